"""The measurement layer: one DataLoader configuration, measured in a fresh child process.

Public entry point (:func:`loadersearch.measure._runner.measure`)::

    measure(workload: WorkloadSpec, config: LoaderConfig, plan: MeasurePlan, *,
            on_window: Callable[[Window], bool] | None = None) -> MeasureResult

What every command does once before it measures (device, GPUs, dataset, /dev/shm, caches):
:func:`loadersearch.measure._prepare.prepare`.

``on_window`` is called in the parent for every window as it arrives; returning False stops
the measurement at once (the child's whole process group is killed) and the result has status
``PRUNED``. Knows nothing of Optuna or studies.
"""

from __future__ import annotations

from loadersearch.measure import _pagecache as pagecache  # dataset files in the page cache
from loadersearch.measure._failures import classify_exception
from loadersearch.measure._forkserver import serving
from loadersearch.measure._forkserver_process import main
from loadersearch.measure._hostload import HostLoadMeter, busy_share
from loadersearch.measure._plan import DEFAULT_PRECISION, MeasurePlan
from loadersearch.measure._prepare import Prepared, prepare
from loadersearch.measure._projection import coefficient_of_variation, full_epoch_images
from loadersearch.measure._rank_results import paste_lines
from loadersearch.measure._result import (
    BAD_DATASET,
    BAD_PIPELINE,
    BAD_SAMPLE,
    CRASH,
    ERROR,
    INFEASIBLE,
    INFEASIBLE_ADVICE,
    INTERRUPTED,
    INVALID_CONFIG,
    NO_DEVICE,
    OK,
    PHASES,
    PRUNED,
    RESOURCE_LIMIT,
    VRAM_CAP,
    MeasureResult,
    Window,
)
from loadersearch.measure._runner import measure
from loadersearch.measure._shm import host_inflight_budget

__all__ = [
    "pagecache",
    "BAD_DATASET",
    "BAD_PIPELINE",
    "BAD_SAMPLE",
    "CRASH",
    "DEFAULT_PRECISION",
    "ERROR",
    "HostLoadMeter",
    "INFEASIBLE",
    "INFEASIBLE_ADVICE",
    "INTERRUPTED",
    "INVALID_CONFIG",
    "MeasurePlan",
    "MeasureResult",
    "NO_DEVICE",
    "OK",
    "PHASES",
    "PRUNED",
    "Prepared",
    "RESOURCE_LIMIT",
    "VRAM_CAP",
    "Window",
    "busy_share",
    "classify_exception",
    "coefficient_of_variation",
    "full_epoch_images",
    "host_inflight_budget",
    "main",
    "measure",
    "paste_lines",
    "prepare",
    "serving",
]
