"""The measuring child's messages (one JSON object per line: ``ready``, ``warmup``, ``window``,
``extra_epoch``, ``result``, ``error``) read into a :class:`MeasureResult` as they arrive
(:func:`handle`); the parent's loop around them (time limits, stalls, the child's exit) is
:func:`loadersearch.measure._runner._follow`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadersearch.measure._hostload import HostLoadMeter
from loadersearch.measure._result import OK, PRUNED, MeasureResult, Window

logger = logging.getLogger(__name__)

_RESULT_FIELDS = (
    "steady_rate",
    "start_cost_s",
    "epoch_time_s",
    "objective",
    "window_cv",
    "wait_fraction",
    "warmup_s",
    "peak_vram_bytes",
    "peak_allocated_bytes",
    "peak_reserved_bytes",
    "nvml_peak_bytes",
    "cuda_overhead_bytes",
    "memory_fraction",
    "alloc_retries",
    "alloc_ooms",
    "gpu_util_mean",
    "cpu_util_mean",
    "peak_rss_bytes",
    "shm_peak_bytes",
    "nvml",
    "epoch_steps",
    "precision",
    "extra_epochs",
    "page_cache",
    "steps",
)


@dataclass
class FollowState:
    """Where the measurement is, as its messages said."""

    phase: str = "start-up"
    started: bool = False  # the stall limit applies from "ready" on; start-up has only the timeout


def handle(
    msg: dict[str, Any],
    state: FollowState,
    result: MeasureResult,
    marks: dict[str, float],
    t0: float,
    last: float,
    on_window: Callable[[Window], bool] | None,
    on_ready: Callable[[MeasureResult], None] | None,
    meter: HostLoadMeter | None,
) -> bool:
    """One message of the child (arrived at ``last``) into ``result``, ``state`` and ``marks``;
    True when the measurement has ended (its result, its error, or pruned by ``on_window``)."""
    kind = msg.pop("type")
    if kind == "ready":
        result.overhead_s = last - t0
        if isinstance(msg.get("started"), (int, float)):
            marks["started"] = float(msg["started"])
        marks["ready"] = marks["measuring"] = last
        result.device = msg["device"]
        result.dataset_images = msg["dataset_images"]
        result.img_size = msg["img_size"]
        result.emulated = msg["emulated"]
        result.notes.extend(msg["notes"])
        state.phase = "the warm-up"
        state.started = True
        if meter is not None:
            meter.start()
        if on_ready is not None:
            on_ready(result)
    elif kind == "warmup":
        state.phase = "the warm-up"
        marks["measuring"] = last
        if meter is not None:  # the measured epochs start after the last warm-up
            meter.start()
    elif kind == "window":
        window = Window.from_dict(msg)
        result.windows.append(window)
        marks["window"] = last
        state.phase = f"window {window.index + 1}"
        if on_window is not None and on_window(window) is False:
            result.status = PRUNED
            result.message = f"pruned after window {window.index}"
            marks["done"] = last
            return True
    elif kind == "extra_epoch":  # for the precision: progress, nothing to report
        state.phase = f"extra measured epoch {msg['n']} (for the precision)"
        # it comes at the added epoch's end: the epoch began with the last window's end
        marks.setdefault("extra", marks.get("window", last))
    elif kind == "result":
        for name in _RESULT_FIELDS:
            setattr(result, name, msg.get(name))
        result.notes.extend(msg.get("notes", []))
        result.ranks = msg.get("ranks") or []  # several ranks (measure.ranks) only
        result.status = OK
        marks["done"] = last
        return True
    elif kind == "error":
        result.status = msg["status"]
        result.reason = msg["reason"]
        result.message = msg["message"]
        logger.debug("measurement failed in the child:\n%s", msg.get("traceback", ""))
        return True
    return False
