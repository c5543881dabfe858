"""What a run says once its study is open: what the measurements describe (the CPU, an
emulated device or storage, several ranks, the CPU budget) and the storage's and /dev/shm's
notes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadersearch._cpu_budget import CpuBudget
from loadersearch.search._opening import ranks_notice

if TYPE_CHECKING:
    import optuna

    from loadersearch._hardware import Hardware
    from loadersearch.measure import Prepared
    from loadersearch.search._settings import StudySettings
    from loadersearch.search._space import SearchSpace

CPU_NOTICE = (
    "No GPU here: measuring real YOLOv4-tiny training on the CPU, where the model, not the "
    "loader, is the bottleneck, so loader settings matter little. For a loader-bound answer "
    "try --workload emulated (a stand-in GPU) or run on the GPU machine."
)
PIPELINE_CPU_NOTICE = (
    "No GPU here: your training step runs on the CPU, beside the DataLoader workers; where the "
    "step is the bottleneck, loader settings matter little. For a loader-bound answer try "
    "--workload emulated (a stand-in GPU) or run on the GPU machine."
)


def notices(
    study: optuna.Study, settings: StudySettings, hardware: Hardware, ready: Prepared
) -> list[str]:
    """What the run says once the study is open: the storage's notes, what the measurements
    describe (the CPU, an emulated device or storage, several ranks), /dev/shm."""
    workload = settings.workload
    lines = list(getattr(study, "storage_notes", []))
    if workload.kind == "train" and ready.device_type != "cuda":
        lines.append(PIPELINE_CPU_NOTICE if workload.pipeline is not None else CPU_NOTICE)
    if workload.emulated:
        lines.append("EMULATED accelerator: results describe a stand-in device, not a GPU.")
    if workload.storage_label():
        lines.append(
            f"{workload.storage_label()}: every sample read waits that long (a "
            "sleep), as on network storage or a hard disk; results describe that storage."
        )
    lines.append(f"CPU budget: {run_cpu_budget(settings, hardware).describe()}.")
    if workload.gpus > 1:
        lines.append(ranks_notice(settings, hardware))
    return [*lines, *ready.shm_lines()]


def run_cpu_budget(settings: StudySettings, hardware: Hardware) -> CpuBudget:
    """The CPUs this run's measurements may use, shared by its ``--gpus`` ranks."""
    return CpuBudget.of(hardware, settings.workload.gpus, "--gpus")


def memory_notice(budget: float | None, space: SearchSpace, hardware: Hardware,
                  ranks: int = 1) -> str | None:  # fmt: skip
    """One line where the host's memory bounds the structured search's default prefetch
    (:func:`~loadersearch.measure.host_inflight_budget`, per rank of ``ranks``): the space's
    largest queue at its deepest prefetch does not fit; None where it does (or the bound is
    unknown)."""
    from loadersearch._units import fmt_bytes

    deepest = space.prefetch_factor[1]
    largest = space.num_workers[1] * deepest * space.batch_choices()[-1]
    if budget is None or largest <= budget:
        return None
    sizes = ", ".join(f"{what} {fmt_bytes(size)}" for what, size in
                      (("/dev/shm", hardware.shm_bytes), ("RAM", hardware.memory_bytes))
                      if size)  # fmt: skip
    per_rank = f" per rank, {ranks} ranks sharing them" if ranks > 1 else ""
    return (
        f"Memory ({sizes}): the batches in flight (workers x prefetch_factor x batch) are "
        f"kept to about {budget:,.0f} images{per_rank} (half of /dev/shm, a tenth of the RAM), "
        f"so the search starts each configuration at the deepest prefetch_factor that fits "
        f"(up to {deepest}), with a smaller batch where one batch a worker does not fit, and "
        f"tries deeper ones later."
    )  # fmt: skip


# The images the creator's memory holds in flight (measure.host_inflight_budget), or None
INFLIGHT_ATTR = "inflight_images"
MEMORY_ATTR = "memory_bound"  # the creator's note of it (None: it bounds nothing)


def memory_bound(study: optuna.Study, settings: StudySettings, hardware: Hardware,
                 ready: Prepared, space: SearchSpace, progress: Any, *, create: bool
                 ) -> float | None:  # fmt: skip
    """The study's memory bound on the search's queue (images in flight), the creating run's,
    stored once (``inflight_images``) so that every machine and every resume proposes the
    same next configuration from the same trials; where it reaches into ``space`` the run
    says so (with the creator's sizes) and the creator keeps the line (``memory_bound``) for
    the report and the dashboard."""
    from loadersearch._hardware import Hardware as _Hardware
    from loadersearch.measure import host_inflight_budget

    if create and INFLIGHT_ATTR not in study.user_attrs:
        budget = host_inflight_budget(hardware, settings.workload, ready.device_type)
        study.set_user_attr(INFLIGHT_ATTR, None if budget is None else round(budget, 1))
    budget = study.user_attrs.get(INFLIGHT_ATTR)
    creator = _Hardware.from_dict(study.user_attrs.get("hardware") or hardware)
    line = None  # the bound is the structured search's
    if settings.sampler == "structured":
        line = memory_notice(budget, space, creator, settings.workload.gpus)
    if line:
        progress.notice(line)
    if create and MEMORY_ATTR not in study.user_attrs:
        study.set_user_attr(MEMORY_ATTR, line)
    return budget
