"""loadersearch: find the DataLoader settings that keep your GPU fed."""

from __future__ import annotations

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec

__version__ = "0.1.0"

__all__ = ["LoaderConfig", "MeasurePlan", "WorkloadSpec", "load_best", "__version__"]


def load_best(storage: str | None = None, study: str | None = None) -> LoaderConfig:
    """Return the confirmed winner of a study as a :class:`LoaderConfig`.

    ``storage`` defaults to ``$LOADERSEARCH_STORAGE`` or ``sqlite:///studies/loadersearch.db``;
    ``study`` may be omitted when the storage holds exactly one study.
    """
    from loadersearch.report import load_best as _load_best

    return _load_best(storage, study)
