"""The rules people use today, enqueued as the first trials of every study: PyTorch's
DataLoader defaults, the source article's 2 x physical cores, and Ultralytics' rule
(``min(cpus // max(gpus, 1), 8)`` workers, from ``ultralytics/data/build.py``; 8.4 writes
``min(os.cpu_count() // max(nd, 1), workers, batches)`` with ``workers=8`` by default).

Each rule counts the CPUs of the CPU budget (:class:`~loadersearch._cpu_budget.CpuBudget`: the
CPUs this process may use, its affinity and cgroup quota), not every CPU of the machine:
Ultralytics itself reads ``os.cpu_count()``, which in a container with a CPU quota or under
``taskset`` counts CPUs the loader cannot use, and its rule then oversubscribes them; the
rule's line says so when the two differ.

Each baseline is clamped to the study's space (a fixed knob wins), and runs at a sensible
fixed batch size unless batch_size is fixed: the comparison is about the loader rules, not
about the batch size.
"""

from __future__ import annotations

from dataclasses import dataclass

from loadersearch._cpu_budget import CpuBudget
from loadersearch._hardware import Hardware
from loadersearch._loader_config import LoaderConfig
from loadersearch.search._space import SearchSpace

DEFAULT_BATCH = 16  # the common YOLOv4-tiny recipe (bubbliiiing/yolov4-tiny-pytorch: batch 16)


@dataclass(frozen=True)
class Baseline:
    name: str  # stored as the trial's "baseline" user attribute
    rule: str  # one line, shown in reports
    config: LoaderConfig


def baselines(
    space: SearchSpace,
    hardware: Hardware,
    *,
    gpu: bool,
    ranks: int = 1,
    budget: CpuBudget | None = None,
) -> list[Baseline]:
    """The three baselines for this machine, clamped to ``space``; configurations that clamp to
    the same point are merged (their names joined with ``+``).

    ``budget``: the CPUs the rules count (default: the one ``hardware`` recorded). The
    article's rule counts its physical cores (``budget.cores``), Ultralytics' its CPUs.
    With several ``ranks`` (a DDP job, one process per device) each rule is per rank:
    Ultralytics splits the CPUs between the job's devices, and the source article's
    multi-GPU section gives each GPU's loader 4 workers ("2-8 x number of GPUs" in all)."""
    budget = budget or CpuBudget.of(hardware, ranks)
    cpus = budget.cpus
    physical = budget.cores or cpus
    gpus = ranks if ranks > 1 else (hardware.gpu_count if gpu else 0)
    ultralytics_workers = min(cpus // max(gpus, 1), 8)
    limited = budget.machine_cpus is not None and cpus < budget.machine_cpus
    usable = " usable" if limited else ""
    itself = f" (Ultralytics itself reads os.cpu_count() = {budget.machine_cpus})"
    itself = itself if limited else ""
    if ranks > 1:
        article = (
            f"the source article's multi-GPU loader: num_workers=4 per GPU (2-8 x {ranks} "
            "GPUs in all), pin_memory, prefetch 2",
            LoaderConfig(num_workers=4, batch_size=DEFAULT_BATCH, pin_memory=True),
        )
    else:
        article = (
            f"the source article: num_workers = 2 x {physical}{usable} physical cores, "
            "pin_memory, prefetch 2",
            LoaderConfig(
                num_workers=2 * physical,
                batch_size=DEFAULT_BATCH,
                pin_memory=True,
                prefetch_factor=2,
            ),
        )
    rules = [
        (
            "pytorch",
            "PyTorch defaults: num_workers=0, pin_memory=False",
            LoaderConfig(num_workers=0, batch_size=DEFAULT_BATCH, pin_memory=False),
        ),
        ("article", *article),
        (
            "ultralytics",
            f"Ultralytics: min({cpus}{usable} CPUs // {max(gpus, 1)} GPUs, 8) workers, "
            f"prefetch 4, pin_memory when a GPU{itself}",
            LoaderConfig(
                num_workers=ultralytics_workers,
                batch_size=DEFAULT_BATCH,
                pin_memory=gpu and hardware.gpu_count > 0,
                prefetch_factor=4 if ultralytics_workers > 0 else None,
            ),
        ),
    ]
    merged: dict[LoaderConfig, Baseline] = {}
    for name, rule, config in rules:
        clamped = space.clamp(config)
        if clamped in merged:
            old = merged[clamped]
            merged[clamped] = Baseline(f"{old.name}+{name}", f"{old.rule}; {rule}", clamped)
        else:
            merged[clamped] = Baseline(name, rule, clamped)
    return list(merged.values())


def baseline_names(attr: str | None) -> list[str]:
    """The names in a trial's "baseline" user attribute (``"pytorch+article"`` -> two)."""
    return [n for n in (attr or "").split("+") if n]
