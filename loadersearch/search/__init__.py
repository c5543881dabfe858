"""The Optuna study over DataLoader configurations: space, objective, baselines, batch-size
probe, confirmation. :func:`run_study` runs one from start to answer."""

from __future__ import annotations

from typing import Any

__all__ = ["RunOutcome", "SearchSpace", "run_study", "settings_from_study"]


def __getattr__(name: str) -> Any:
    # Lazy, so that loadersearch.spec can import loadersearch.search.space without a cycle.
    if name == "SearchSpace":
        from loadersearch.search.space import SearchSpace

        return SearchSpace
    if name in ("RunOutcome", "run_study", "settings_from_study"):
        from loadersearch.search import study

        return getattr(study, name)
    raise AttributeError(f"module 'loadersearch.search' has no attribute {name!r}")
