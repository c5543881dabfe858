"""Reading a knob's values as ``--space``, ``--fix`` and a spec file write them
(``num_workers=0:8``, ``pin_memory=true``, ``start_method=fork,spawn``), and the error that
names the knob and the fix (:class:`SpaceError`)."""

from __future__ import annotations

import re

from loadersearch._loader_config import CACHES, LoaderConfig, check_start_method
from loadersearch._options import declared

KNOBS = tuple(declared(LoaderConfig))  # num_workers, batch_size, ..., start_method, cache
_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


class SpaceError(ValueError):
    """A knob's range or value is not usable; the message names the knob and the fix."""


def _check_knob(knob: str) -> None:
    if knob not in KNOBS:
        raise SpaceError(f"unknown knob {knob!r}; choose one of {', '.join(KNOBS)}.")


def _parse_int(knob: str, text: str) -> int:
    try:
        return int(text)
    except ValueError as e:
        raise SpaceError(f"{knob} needs whole numbers but got {text!r}.") from e


def _parse_choices(text: str | list | tuple, knob: str = "start_method") -> tuple[str, ...]:
    """Start methods (or cache modes) from ``fork``, ``fork,spawn``, ``all`` or a list
    (``["fork", "spawn"]``, as a spec file writes it)."""
    from loadersearch._loader_config import START_METHODS

    listed = isinstance(text, (list, tuple))
    low = "" if listed else str(text).strip().lower()
    names = [str(v).lower() for v in text] if listed else re.split("[,:]", low)
    if knob == "cache":
        caches = CACHES if low in ("all", "any") else names
        choices = tuple(dict.fromkeys(c.strip() for c in caches if c.strip()))
        bad = [c for c in choices if c not in CACHES] or ([] if choices else [text])
        if bad:
            raise SpaceError(
                f"unknown cache {bad[0]!r}; choose among {', '.join(CACHES)} (or all), e.g. "
                "cache=none,memmap."
            )
        return choices
    if low in ("all", "any"):
        import multiprocessing

        return tuple(m for m in START_METHODS if m in multiprocessing.get_all_start_methods())
    choices = tuple(dict.fromkeys(p.strip() for p in names if p.strip()))
    for c in choices:
        try:
            check_start_method(c)
        except ValueError as e:
            raise SpaceError(str(e)) from e
    if not choices:
        raise SpaceError(f"cannot read start_method={text!r}; write e.g. start_method=spawn.")
    return choices


def _parse_bool(knob: str, text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise SpaceError(f"{knob} is true or false but got {text!r}.")


def parse_assignment(text: str) -> tuple[str, str]:
    """Split ``knob=value`` (as given to ``--fix`` and ``--space``)."""
    knob, sep, value = text.partition("=")
    if not sep or not knob.strip() or not value.strip():
        raise SpaceError(f"cannot read {text!r}; write KNOB=VALUE, e.g. batch_size=16.")
    knob = knob.strip().replace("-", "_")
    _check_knob(knob)
    return knob, value.strip()
