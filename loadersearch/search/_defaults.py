"""This machine's defaults for a study: whether the CPU does the heavy work
(:func:`cpu_bound`), and the short measurement plan (:func:`default_plan`) and the search
space (:func:`default_space`) that follow from it.
"""

from __future__ import annotations

from typing import Any

from loadersearch._cpu_budget import CpuBudget
from loadersearch._hardware import Hardware
from loadersearch.measure import DEFAULT_PRECISION, MeasurePlan
from loadersearch.search._space import SearchSpace, default_worker_bound
from loadersearch.workload import WorkloadSpec, uses_cuda


def cpu_bound(workload: WorkloadSpec, hardware: Hardware) -> bool:
    """Whether the CPU does the heavy work of this measurement: training on a CPU, or any
    workload on a host without a GPU (its loader decodes ~50-100 img/s at 416 px). Such
    measurements get short plans and small batches."""
    gpu = uses_cuda(workload, hardware)
    return not gpu and (workload.kind == "train" or hardware.gpu_count == 0)


def default_plan(*, small: bool) -> MeasurePlan:
    """Short measurements. Where the CPU does the heavy work (~70 img/s for training at 128 px
    on 2 cores, ~50-100 img/s for the loader at 416 px; less on a busy machine), 2 warm-up
    steps and two short epochs of 4 one-step windows keep a trial to a few seconds and still
    give the pruner 8 paired windows; elsewhere 3 short epochs of 8 steps (MeasurePlan's
    defaults) cut into 12 windows of 2 steps. Either way a configuration with many batches in
    flight measures longer epochs (MeasurePlan.sized_steps), within 8 s each on the CPU (20 s
    elsewhere) at its warm-up's rate, and a measurement whose epochs disagree goes on with more
    epochs until the projected epoch time is known to +/-5% (90% confidence), for at most 8 s
    more on the CPU (20 s elsewhere)."""
    shared = {"windows_per_epoch": 4, "warmup_epochs": 1, "precision": DEFAULT_PRECISION}
    if small:
        return MeasurePlan(
            epochs=2, steps=4, warmup_steps=2, timeout_s=120, epoch_limit_s=8.0,
            extend_limit_s=8.0, **shared,
        )  # fmt: skip
    return MeasurePlan(epochs=3, steps=8, warmup_steps=4, **shared)


def study_plan_with(plan_in: dict[str, Any], *, small: bool) -> MeasurePlan:
    """:func:`default_plan` with the fields given; a plan the two make invalid is refused with
    the defaults it took named (``ValueError``): a user who gave ``--steps 1`` learns that the
    4 windows it cannot hold are the study's default, not something they asked for."""
    study = default_plan(small=small).to_dict()
    try:
        return MeasurePlan(**{**study, **plan_in})
    except ValueError as e:
        merged = {**study, **plan_in}
        clash = merged.get("windows_per_epoch", 0) > merged.get("steps", 0)
        taken = [f"{k} {study[k]}" for k in _CHECKED if k not in plan_in]
        if not (clash and taken):
            raise
        where = "where the CPU does the heavy work" if small else "on this machine"
        raise ValueError(
            f"{str(e).rstrip('.')}; {' and '.join(taken)} not given: a study's default {where}."
        ) from e


_CHECKED = ("windows_per_epoch", "steps")  # the fields MeasurePlan checks against each other


def default_space(hardware: Hardware, *, small: bool, ranks: int = 1) -> SearchSpace:
    """The default ranges for this machine (batch sizes 8..32 where the CPU does the work):
    ``num_workers`` up to the CPU budget's bound (:class:`CpuBudget`: the CPUs this process
    may use, shared by ``ranks``); with several ranks, per rank within the CPUs they share."""
    workers = default_worker_bound(CpuBudget.of(hardware, ranks))
    batch = (8, 32) if small else (8, 128)
    return SearchSpace(num_workers=(0, workers), batch_size=batch, batch_step=8)
