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

from loadersearch.measure._prepare import Prepared, prepare
from loadersearch.measure._result import MeasureResult, Window
from loadersearch.measure._runner import measure

__all__ = ["MeasureResult", "Prepared", "Window", "measure", "prepare"]
