"""What the Lightning and Hugging Face integrations share: the AutoLoader options a callback
takes, the per-rank CPU budget, a stored study's winner as this host may use it, a
DataLoader rebuilt with other knobs, and the choice as metrics, parameters and a log line.

No framework is imported here: each integration hands in the DataLoader its framework built.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from loadersearch.errors import LoaderSearchError

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from loadersearch import LoaderConfig
    from loadersearch._cpu_budget import CpuBudget
    from loadersearch.online import OnlineReport

_logger = logging.getLogger(__name__)

# AutoLoader's options a callback passes on: its tuning budget, and knobs to fix (a knob given
# here is not tuned). Not batch_sizes: the frameworks count an epoch's steps once, before it.
AUTOLOADER_OPTIONS = (
    "max_workers", "tune_steps", "window_steps", "margin",
    "num_workers", "prefetch_factor", "pin_memory", "persistent_workers",
)  # fmt: skip
KNOBS = ("num_workers", "prefetch_factor", "pin_memory", "persistent_workers")
PREFIX = "loadersearch/"  # the metric and parameter names in the framework's loggers


def autoloader_options(options: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``options`` checked against :data:`AUTOLOADER_OPTIONS` (a TypeError naming the unknown
    ones and the known ones, at the callback's construction rather than mid-training)."""
    unknown = sorted(set(options) - set(AUTOLOADER_OPTIONS))
    if unknown:
        raise TypeError(
            f"{where} got unknown option(s) {', '.join(unknown)}; it takes study, storage and "
            f"AutoLoader's {', '.join(AUTOLOADER_OPTIONS)}."
        )
    return dict(options)


def rank_budget(ranks: int | None = None, source: str | None = None) -> CpuBudget:
    """This process's CPU budget (:func:`loadersearch._cpu_budget.cpu_budget`: its affinity and
    cgroup quota, shared by the training processes of the node): the ranks from
    ``$LOCAL_WORLD_SIZE`` (torchrun, accelerate launch) when set, else ``ranks`` (what the
    framework says, named by ``source``), else 1. Its ``worker_bound`` is the top of each
    rank's worker ladder (``cpus // ranks``; one process: 2x the CPUs, at most 32), as the
    offline search bounds ``--gpus N``."""
    from loadersearch._cpu_budget import RANKS_ENV, cpu_budget

    if ranks is None or os.environ.get(RANKS_ENV):
        return cpu_budget()
    return cpu_budget(ranks, ranks_source=source)


def ladder_options(options: Mapping[str, Any], budget: CpuBudget) -> dict[str, Any]:
    """AutoLoader's ``options`` with ``max_workers`` from ``budget`` unless given, and the
    budget said in a log line."""
    out = dict(options)
    if "max_workers" not in out:
        out["max_workers"] = budget.worker_bound
        _logger.info(
            "loadersearch: CPU budget: %s; worker ladder up to %d.",
            budget.describe(),
            out["max_workers"],
        )
    return out


def accelerator() -> bool:
    """Pinned memory helps (and DataLoader uses it) only with an accelerator."""
    import torch

    acc = getattr(torch, "accelerator", None)
    return bool(acc.is_available()) if acc is not None else torch.cuda.is_available()


def study_winner(study: str | None, storage: str | None) -> tuple[LoaderConfig, int]:
    """The answer :func:`loadersearch.load_best` gives for ``study`` (the confirmed winner,
    else the best trial), and the ranks per node it was measured with. Raises
    :class:`~loadersearch.errors.StudyError` when the study is missing or has no finished
    feasible trial, and when it was measured on other hardware (the hardware guard: GPU
    model and count, CPU count)."""
    from loadersearch._hardware import check_compatible, fingerprint
    from loadersearch.errors import StudyError
    from loadersearch.report import open_study, summarize

    stored = open_study(storage, study)
    check_compatible(stored.user_attrs.get("hardware"), fingerprint(), allow_mixed=False)
    summary = summarize(stored)
    if summary.winner is None:
        raise StudyError(
            f"study {summary.study!r} has no finished feasible trial yet; run "
            "`loadersearch run` until it has."
        )
    return summary.winner.config, summary.gpus


def stored_winner(study: str, storage: str | None, ranks: int = 1) -> LoaderConfig | None:
    """:func:`study_winner`'s configuration, or None, logged with the reason, when the study
    is missing, empty or of other hardware: training never stops for want of a study (the
    callback tunes online instead). A study measured with another number of ranks per node
    is used, with a warning."""
    try:
        config, gpus = study_winner(study, storage)
    except LoaderSearchError as e:
        _logger.warning("loadersearch: not using study %r (%s); tuning online instead.", study, e)
        return None
    if gpus != ranks:
        _logger.warning(
            "loadersearch: study %r measured %d rank(s) per node and this job runs %d: its "
            "winner's workers may not fit each rank's share of the CPUs.",
            study,
            gpus,
            ranks,
        )
    return config


def knobs_of(config: LoaderConfig) -> dict[str, Any]:
    """The four loader knobs of ``config`` as this host may use them (no pinned memory
    without an accelerator)."""
    return {
        "num_workers": config.num_workers,
        "prefetch_factor": config.prefetch_factor if config.num_workers else None,
        "pin_memory": bool(config.pin_memory and accelerator()),
        "persistent_workers": bool(config.persistent_workers and config.num_workers),
    }


def with_knobs(loader: DataLoader, knobs: Mapping[str, Any]) -> DataLoader:
    """A DataLoader like ``loader`` (its dataset, order, batches, collate, worker seeding,
    start method) with ``knobs`` (:func:`knobs_of`)."""
    from torch.utils.data import DataLoader

    workers = knobs["num_workers"]
    kwargs: dict[str, Any] = {
        "collate_fn": loader.collate_fn,
        "worker_init_fn": loader.worker_init_fn,
        "generator": loader.generator,
        "timeout": loader.timeout,
        "num_workers": workers,
        "pin_memory": knobs["pin_memory"],
    }
    if loader.batch_size is None and loader.batch_sampler is not None:  # the user's batches
        kwargs["batch_sampler"] = loader.batch_sampler
    else:
        kwargs.update(batch_size=loader.batch_size, sampler=loader.sampler)
        kwargs["drop_last"] = loader.drop_last
    if workers > 0:
        kwargs["prefetch_factor"] = knobs["prefetch_factor"]
        kwargs["persistent_workers"] = knobs["persistent_workers"]
        kwargs["multiprocessing_context"] = loader.multiprocessing_context
    if hasattr(loader, "in_order"):  # torch >= 2.6
        kwargs["in_order"] = loader.in_order
    return DataLoader(loader.dataset, **kwargs)


def settings_of(loader: Any) -> dict[str, Any]:
    """The four knobs a DataLoader (or a settled AutoLoader) serves with."""
    config = getattr(loader, "config", None)
    if config is not None:  # an AutoLoader
        return knobs_of(config)
    workers = loader.num_workers
    return {
        "num_workers": workers,
        "prefetch_factor": loader.prefetch_factor if workers else None,
        "pin_memory": bool(loader.pin_memory),
        "persistent_workers": bool(loader.persistent_workers and workers),
    }


def choice_params(knobs: Mapping[str, Any], source: str) -> dict[str, Any]:
    """The choice as logger parameters: ``loadersearch/num_workers``, ... and where it came
    from (``online``, or ``study NAME``). Knobs that do not apply (None) are left out."""
    params = {PREFIX + k: v for k, v in knobs.items() if v is not None}
    params[PREFIX + "source"] = source
    return params


def report_metrics(report: OnlineReport) -> dict[str, float]:
    """What online tuning measured and cost, as logger metrics (the ones it could measure)."""
    values = {
        "images_per_s": report.images_per_s,
        "baseline_images_per_s": report.baseline_images_per_s,
        "speedup": report.speedup,
        "tuning_cost_s": max(0.0, report.cost_s),
        "saved_per_epoch_s": report.saved_per_epoch_s,
        "tuning_steps": report.tuning_steps,
    }
    return {PREFIX + k: float(v) for k, v in values.items() if v is not None}


def describe(knobs: Mapping[str, Any], source: str, report: OnlineReport | None) -> str:
    """One log line: the choice, where it came from, and (online) its rate, cost and saving."""
    text = ", ".join(f"{k}={v}" for k, v in knobs.items() if v is not None)
    if report is None:
        return f"loadersearch: train DataLoader {text} (from {source})."
    line = (
        f"loadersearch: train DataLoader {text} (tuned online in {report.tuning_steps} steps: "
        f"{report.images_per_s:.1f} img/s"
    )
    if report.speedup is not None:
        line += f", x{report.speedup:.2f} over {report.baseline.label()}"
    line += f"; tuning cost {max(0.0, report.cost_s):.1f} s"
    if report.saved_per_epoch_s is not None:
        line += f", saves {report.saved_per_epoch_s:.1f} s per epoch"
    return line + ")."
