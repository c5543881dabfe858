"""One process's share of a measurement, from the workload to its result: the single measuring
child (:mod:`loadersearch.measure._child`) runs it for the whole measurement, each rank of a
DistributedDataParallel job (:mod:`loadersearch.measure._ranks`) for its shard.

:func:`measure_share` builds the workload, starts the probes and the VRAM cap, says it is
ready, runs the timed loop (warm-up, measured epochs, the epochs added for the plan's
precision), then sends its result: the messages of :mod:`loadersearch.measure._child`, through
``send(kind, **data)``. What one rank of several does besides comes in a :class:`RankRole`
(the DDP model, the collectives that keep the ranks in step); its messages go to the job's
launcher (:mod:`loadersearch.measure._launcher`), which merges every rank's into the job's.

Importing this module does not import torch.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._notes import sizing_notes
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._projection import full_epoch_images, project, window_cv
from loadersearch.measure._result import Window
from loadersearch.workload import WorkloadSpec

Send = Callable[..., None]  # send(kind, **data): one message to whoever started the process

# Of the plan's time limit, the share that the precision's added epochs may run into: the rest
# is for the result, the workers' shut-down and a slow machine.
FINISH_SHARE = 0.8


def finish_by(plan: MeasurePlan, started: float) -> float:
    """``time.monotonic()`` by which the measured epochs of a measurement that ``started``
    (``time.monotonic()``) must be done, so that the precision's added epochs never run a
    healthy measurement into its time limit (a TIMEOUT)."""
    return started + FINISH_SHARE * plan.timeout_s


@dataclass(frozen=True)
class RankRole:
    """What one rank of a multi-rank job adds to the body (made by ``measure.ranks``)."""

    rank: int
    world_size: int
    backend: str  # the process group's: "nccl" or "gloo"
    barrier: Callable[[], None]  # waits for every rank (at each window edge)
    agree: Callable[[int], int]  # the smallest of every rank's n (the epochs' length)
    wrap_model: Callable[[Any], Any] | None = None  # train: the DDP wrapper
    wrap_step: Callable[[Callable[..., None]], Callable[..., None]] | None = None  # emulated


def measure_share(
    send: Send,
    wspec: WorkloadSpec,
    config: LoaderConfig,
    plan: MeasurePlan,
    started: float,
    role: RankRole | None = None,
) -> None:
    """Measure ``config`` on ``wspec``'s workload in this process, reporting through ``send``:
    ready, the warm-ups, the windows, the added epochs, then the result. ``started``: when the
    measuring process started (``time.monotonic()``), for the plan's time limit. ``role``: this
    process is one rank of several (its result is its launcher's to merge)."""
    from loadersearch.measure._loop import run_loop
    from loadersearch.measure._pagecache import ColdCache
    from loadersearch.measure._probes import Probes
    from loadersearch.workload import create_workload

    wrap_model = role.wrap_model if role is not None else None
    workload = create_workload(wspec, batch_size=config.batch_size, wrap_model=wrap_model)
    if role is not None and role.wrap_step is not None:
        workload.step = role.wrap_step(workload.step)
    probes = Probes(workload.device.index if workload.cuda else None).start()
    memory = _cuda_memory(workload, wspec, probes)
    world = role.world_size if role is not None else 1
    # one full epoch of this process's shard (the launcher projects the job's)
    full = full_epoch_images(math.ceil(len(workload.dataset) / world), config.batch_size)
    send("ready", **_ready(workload, memory, config, plan, full, started, role))
    windows: list[Window] = []

    def on_window(w: Window) -> None:
        windows.append(w)
        send("window", **w.to_dict())

    def on_measuring(measuring: bool) -> None:
        if measuring:
            if memory is not None:
                memory.begin_measured()
            probes.begin_measured()
        else:
            probes.end_measured()
        if role is not None:  # the launcher's probes measure the job's whole tree meanwhile
            send("measuring", measuring=measuring)

    # What diagnose asks of a measurement (the ingestion ceiling, a cold page cache) is asked
    # of a single process only.
    extra = plan.extra if role is None else {}
    cold = ColdCache(wspec.data) if extra.get("cold_cache") else None
    try:
        record = run_loop(
            workload,
            config,
            plan,
            seed=wspec.seed,
            on_window=on_window,
            on_warmup=lambda epoch, seconds: send("warmup", epoch=epoch, seconds=seconds),
            on_measuring=on_measuring,
            after_first_step=memory.settle if memory is not None else None,
            rank=role.rank if role is not None else 0,
            world_size=world,
            barrier=role.barrier if role is not None else None,
            agree=role.agree if role is not None else None,
            resident=bool(extra.get("resident")),
            before_epoch=cold.evict if cold is not None else None,
            on_extra=lambda n, precision: send("extra_epoch", n=n, precision=precision),
            finish_by=finish_by(plan, started),
        )
    finally:
        probes.stop()
    result = _result(record, windows, workload, memory, probes, config, plan, full, cold, role)
    send("result", **result)


def _cuda_memory(workload: Any, wspec: WorkloadSpec, probes: Any) -> Any:
    """On CUDA, the device memory's bookkeeping with the VRAM cap applied (per device, so per
    rank); None on a CPU."""
    if not workload.cuda:
        return None
    from loadersearch.measure._cuda import CudaMemory

    cap = wspec.vram_cap if wspec.kind != "emulated" else None
    memory = CudaMemory(workload.device, cap, probes.process_used)
    memory.apply_cap()
    return memory


def _ready(
    workload: Any,
    memory: Any,
    config: LoaderConfig,
    plan: MeasurePlan,
    full: int,
    started: float,
    role: RankRole | None,
) -> dict[str, Any]:
    """The ready message: the workload is built (imports, dataset, model: the fixed overhead
    ends here)."""
    dataset_len = len(workload.dataset)
    fields = {
        "device": workload.device_label,
        "img_size": workload.img_size,
        "dataset_len": dataset_len,
        "emulated": workload.emulated,
        "notes": list(workload.notes),
        "pid": os.getpid(),
    }
    if role is not None:  # the launcher says the job's epoch and notes (measure.launcher)
        return {**fields, "backend": role.backend}
    notes = fields["notes"]
    if memory is not None and memory.state.cap_bytes is not None and plan.warmup_epochs == 0:
        notes.append(
            "no warm-up epoch: the memory outside the allocator (CUDA context, kernels) was not "
            "measured, so the VRAM cap limits the allocator only"
        )
    if config.pin_memory and not workload.cuda:
        notes.append("pin_memory has no effect without a CUDA device (batches stay on the host)")
    if full == 0:
        notes.append(
            f"the dataset ({dataset_len} images) is smaller than one batch "
            f"({config.batch_size}): projected as one batch per epoch"
        )
    # started: time.monotonic() at the child's start (its start-up and build split there)
    return {**fields, "dataset_images": full or config.batch_size, "started": started}


def _result(
    record: Any,
    windows: list[Window],
    workload: Any,
    memory: Any,
    probes: Any,
    config: LoaderConfig,
    plan: MeasurePlan,
    full: int,
    cold: Any,
    role: RankRole | None,
) -> dict[str, Any]:
    """The result message: a single process's projection, or what a rank's launcher needs to
    merge the job's (its epochs, windows' rates and device memory)."""
    full = full or config.batch_size  # a dataset smaller than one batch: one batch per epoch
    proj = project(record.epochs, config.batch_size, config.num_workers, full)
    cuda_fields = memory.summary() if memory is not None else {}
    notes = list(cuda_fields.pop("notes", []))
    if role is None and probes.nvml.handle is not None and probes.nvml_peak is None:
        notes.append(
            "NVML lists no process with this pid (a container's PID namespace?): the "
            "per-process device memory is unknown; see peak_vram_bytes"
        )
    notes.extend(sizing_notes(record, plan, config))
    seconds = sum(w.seconds for w in windows)
    fields = {
        "steady_rate": proj.steady_rate,
        "wait_fraction": sum(w.wait_s for w in windows) / seconds if seconds > 0 else 0.0,
        "warmup_s": record.warmup_s,
        "epoch_steps": record.steps,
        "extra_epochs": record.extra_epochs,
        "peak_vram_bytes": (
            cuda_fields["peak_reserved_bytes"] if memory is not None else workload.peak_vram()
        ),
        "notes": notes,
        **probes.summary(),
    }
    if role is not None:
        return {
            **fields,
            "epochs": record.epochs,
            "extend_bound": record.extend_bound,
            "extend_budget_s": record.extend_budget_s,
            "window_rates": [w.rate for w in windows],
            "cuda": cuda_fields,
        }
    return {
        **fields,
        "start_cost_s": proj.start_cost_s,
        "epoch_time_s": proj.epoch_time_s,
        "objective": proj.objective,
        "window_cv": window_cv([w.rate for w in windows], plan.windows_per_epoch),
        "precision": record.precision,
        "page_cache": cold.summary() if cold is not None else None,
        "steps": [
            {"t0": e["t0"], "arrivals": e["arrivals"], "waits": e["waits"]} for e in record.epochs
        ],
        **cuda_fields,
    }
