"""The values a caller gives a study (``loadersearch run``'s options, :func:`loadersearch.tune`'s
arguments) as :class:`~loadersearch.search.settings.Overrides`, built the same way for both."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loadersearch.search.settings import Overrides


def make_overrides(
    study: Mapping[str, Any],
    *,
    baselines: bool = True,
    probe: bool = True,
    settle: bool = True,
    allow_mixed_hardware: bool = False,
    workload: Mapping[str, Any] | None = None,
    plan: Mapping[str, Any] | None = None,
    space_ranges: Mapping[str, Any] | None = None,
    space_fixed: Mapping[str, Any] | None = None,
    pipeline: Mapping[str, Any] | None = None,
) -> Overrides:
    """``study``: the ``[study]`` values given (None: not given, the spec file's or the default
    applies). The switches are given only when they differ from the default (``baselines``,
    ``probe``, ``settle`` turned off; mixed hardware allowed), so that a spec file's value
    stands otherwise."""
    return Overrides(
        study={
            **study,
            "baselines": None if baselines else False,
            "probe": None if probe else False,
            "settle": None if settle else False,
            "allow_mixed_hardware": True if allow_mixed_hardware else None,
        },
        workload=dict(workload or {}),
        plan=dict(plan or {}),
        space_ranges=dict(space_ranges or {}),
        space_fixed=dict(space_fixed or {}),
        pipeline=dict(pipeline or {}),
    )
