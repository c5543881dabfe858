"""What a trial records from its measurement: the value of each window reported to the pruner
(:func:`window_value`, with the share of the epoch start a short measuring epoch carries:
:func:`start_weight`), the share of a window the loop waited for data (:func:`window_wait`),
and the measurement as the trial's user attributes (:func:`result_attrs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadersearch.measure import INFEASIBLE, MeasureResult, Window

if TYPE_CHECKING:
    from loadersearch.measure import MeasurePlan


def window_value(window: Window, start_weight: float = 0.0) -> float:
    """The value reported to the pruner for one window: its images/s with the epoch-start cost
    that falls in it counted as the objective counts it. The objective pays the start once
    per *full* epoch of ``N`` images; a short measuring epoch of ``S`` steps of ``B`` images
    pays it once per ``S*B`` images, so counting it whole would over-weight it (without
    persistent_workers every epoch starts its workers again) and leaving it out would let a
    configuration that wins by its start (a smaller batch's first batch arrives sooner) be
    pruned against one with a faster steady rate (the tabular benchmark pruned its optimum
    so). ``start_weight`` = ``S*B/N``
    (:func:`start_weight`); 0 leaves the start out."""
    busy = window.seconds - window.start_s
    if busy <= 0 or window.images <= 0:
        return window.rate
    return window.images / (busy + start_weight * window.start_s)


def start_weight(epoch_images: int, full_images: int) -> float:
    """The share of one epoch start a short measuring epoch of ``epoch_images`` carries in the
    objective: ``epoch_images / full_images`` (at most 1; 0 when the full epoch is unknown)."""
    if full_images <= 0:
        return 0.0
    return min(1.0, epoch_images / full_images)


def window_start_weight(
    window: Window, plan: MeasurePlan, batch_size: int, full_images: int
) -> float:
    """:func:`start_weight` of the measured epoch ``window`` belongs to: its own length (sized
    to the configuration, :meth:`~loadersearch.measure._plan.MeasurePlan.sized_steps`), or
    ``plan.steps`` batches for a window that does not carry it."""
    epoch_images = window.epoch_images or plan.steps * batch_size
    return start_weight(epoch_images, full_images)


def window_wait(window: Window) -> float:
    """The share of one window the training loop waited for data."""
    return window.wait_s / window.seconds if window.seconds > 0 else 0.0


def result_attrs(result: MeasureResult) -> dict[str, Any]:
    """The measurement as trial user attributes (JSON-friendly, rounded for reading)."""

    def r(x: float | None, n: int = 4) -> float | None:
        return None if x is None else round(float(x), n)

    done = len(result.windows)
    measured = sum(w.seconds for w in result.windows)
    attrs: dict[str, Any] = {
        "status": result.status,
        "reason": result.reason,
        "message": (result.message or "")[:500],
        "config": result.config.label(),
        "objective": r(result.objective, 2),
        "steady_rate": r(result.steady_rate, 2),
        "start_cost_s": r(result.start_cost_s),
        "epoch_time_s": r(result.epoch_time_s, 2),
        "dataset_images": result.dataset_images,
        "wait_fraction": r(result.wait_fraction),
        "window_cv": r(result.window_cv),
        "peak_vram_bytes": result.peak_vram_bytes,
        "peak_allocated_bytes": result.peak_allocated_bytes,
        "peak_reserved_bytes": result.peak_reserved_bytes,
        "nvml_peak_bytes": result.nvml_peak_bytes,
        "cuda_overhead_bytes": result.cuda_overhead_bytes,
        "alloc_retries": result.alloc_retries,
        "alloc_ooms": result.alloc_ooms,
        # allocator retries or OOMs while measuring: ran at its memory limit, slower
        "memory_pressure": bool(result.alloc_retries or result.alloc_ooms),
        "start_method": result.config.start_method,
        "epoch_steps": result.epoch_steps,  # steps per measured epoch, sized to the config
        # the projected epoch time's 90% CI half-width (relative), and the epochs added for it
        "precision": r(result.precision, 4),
        "extra_epochs": result.extra_epochs,
        "emulated_io_ms": result.emulated_io_ms,  # EMULATED storage latency, 0 = none
        "gpu_util_mean": r(result.gpu_util_mean, 1),
        "cpu_util_mean": r(result.cpu_util_mean, 1),
        "peak_rss_bytes": result.peak_rss_bytes,
        "shm_peak_bytes": result.shm_peak_bytes,
        # the machine while measuring (measure.hostload): others' CPU use, steal, the flag
        "outside_load": r(result.outside_load, 2),
        "outside_share": r(result.outside_share, 3),
        "steal_share": r(result.steal_share, 3),
        "busy_host": bool(result.busy_host),
        "overhead_s": r(result.overhead_s, 2),
        "warmup_s": r(result.warmup_s, 2),
        "wall_s": r(result.wall_s, 2),
        "windows_done": done,
        "measured_s": r(measured, 3),
        # where wall_s went: start, build, warmup, planned, extra, teardown (measure.result)
        "phases": {k: r(v, 2) for k, v in result.phases.items()},
        # Per window, the share the loop waited for data (the rates are the trial's
        # intermediate values): what the report and the trial's note draw.
        "window_wait": [r(window_wait(w), 3) for w in result.windows],
        "device": result.device,
        "emulated": bool(result.emulated),
        "feasible": result.status != INFEASIBLE,
    }
    if result.status == INFEASIBLE:
        attrs["infeasible_reason"] = result.reason
    if result.ranks:  # several ranks: each one's figures, to see which one starves

        def rounded(v: Any) -> Any:
            if isinstance(v, list):
                return [rounded(x) for x in v]
            return r(v) if isinstance(v, float) else v

        attrs["ranks"] = [
            {k: rounded(v) for k, v in rank.items() if k != "pid"} for rank in result.ranks
        ]
    return attrs
