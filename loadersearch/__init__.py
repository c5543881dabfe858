"""loadersearch: find the DataLoader settings that keep your GPU fed.

In Python: :func:`tune` searches the settings of your own pipeline (or the built-in
workload), :func:`bench` measures one configuration, and :func:`load_best` is how a training
script reads the winner back from the study that found it. ``tune``, ``bench`` and
``TuneResult`` are imported on first use (:mod:`loadersearch._api`), so ``import loadersearch``
stays light. :class:`AutoLoader` (and :func:`autoloader`, which wraps a DataLoader you build)
tunes the loader inside your training loop instead (:mod:`loadersearch.online`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadersearch._hardware import Hardware, fingerprint
from loadersearch._hostlock import measurement_lock
from loadersearch._lazy import lazy_attribute
from loadersearch._loader_config import DEFAULT_START_METHOD, LoaderConfig
from loadersearch.measure import MeasurePlan
from loadersearch.workload import PipelineSpec, WorkloadSpec

if TYPE_CHECKING:
    from loadersearch._api import bench, tune
    from loadersearch._tune_result import TuneResult
    from loadersearch.online import AutoLoader, autoloader

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_START_METHOD",
    "AutoLoader",
    "Hardware",
    "LoaderConfig",
    "MeasurePlan",
    "PipelineSpec",
    "TuneResult",
    "WorkloadSpec",
    "bench",
    "fingerprint",
    "load_best",
    "measurement_lock",
    "tune",
    "__version__",
    "autoloader",
]

# Imported on first use (loadersearch._lazy): the API's module, and online/, which imports torch.
_LAZY = {
    "TuneResult": "_tune_result",
    "bench": "_api",
    "tune": "_api",
    "AutoLoader": "online",
    "autoloader": "online",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


def __dir__() -> list[str]:
    # PEP 562: without it, dir() (tab completion, help()) misses the lazy names above.
    return sorted(set(globals()) | set(__all__))


def load_best(storage: str | None = None, study: str | None = None) -> LoaderConfig:
    """The confirmed winner of a study (else its best trial) as a :class:`LoaderConfig`: the
    way a training script reads its DataLoader settings from the study that found them::

        import loadersearch
        best = loadersearch.load_best("sqlite:///studies/loadersearch.db", "my-study")
        loader = DataLoader(dataset, shuffle=True, drop_last=True, **best.dataloader_kwargs())

    ``storage`` defaults to ``$LOADERSEARCH_STORAGE`` or ``sqlite:///studies/loadersearch.db``
    (relative to the working directory); ``study`` may be omitted when the storage holds
    exactly one study. Raises :class:`loadersearch.errors.StudyError` when the study does not
    exist or has no feasible trial yet.
    """
    from loadersearch.report import load_best as _load_best

    return _load_best(storage, study)
