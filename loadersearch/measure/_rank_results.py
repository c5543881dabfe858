"""What the launcher of a multi-rank measurement (:mod:`loadersearch.measure._ranks`) makes of
its ranks' messages: the job's windows, epochs, memory and notes merged from the ranks', a
rank that starves named, and the first failure among ranks that fail together.

Importing this module does not import torch.
"""

from __future__ import annotations

import logging
import math
import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._projection import full_epoch_images
from loadersearch.measure._result import CRASH, ERROR, INFEASIBLE, TIMEOUT, Window
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)

# A rank starves when it waits for data this much more of its time than the other ranks.
STARVING_MARGIN = 0.10
_COLLECTIVE = re.compile(
    r"gloo/transport|NCCL|ProcessGroup|Connection (?:reset|closed) by peer", re.IGNORECASE
)
_TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)


def job_epoch_images(dataset_len: int, batch_size: int, world_size: int) -> int:
    """Images of one full epoch of the whole job: ``DistributedSampler`` gives every rank
    ``ceil(len / world_size)`` samples (padding the last shard), each rank drops its last
    partial batch."""
    per_rank = math.ceil(dataset_len / world_size)
    return full_epoch_images(per_rank, batch_size) * world_size


def paste_lines(config: LoaderConfig, ranks: int, dataset: str = "dataset") -> list[str]:
    """The answer for a job of ``ranks`` processes, one per GPU: the sampler and the per-rank
    ``DataLoader`` lines to paste into the training script, and the ``torchrun`` command
    that launches it as it was measured (one node)."""
    return [
        f"sampler = DistributedSampler({dataset}, shuffle=True)  # rank and world size from "
        "torchrun; call sampler.set_epoch(epoch) before each epoch",
        f"loader = {config.snippet(dataset, sampler='sampler')}  # per rank",
        f"torchrun --standalone --nproc_per_node={ranks} YOUR_TRAIN_SCRIPT.py",
    ]


# -- merging what the ranks measured ---------------------------------------------------------


def merge_windows(windows: Sequence[Window]) -> Window:
    """The job's window from every rank's window at one position: all ranks' images over the
    slowest rank's seconds (the ranks leave each window edge together; the slowest sets the
    pace); data wait and copy time are the ranks' mean, the epoch start the latest."""
    seconds = max(w.seconds for w in windows)
    wait = statistics.fmean(w.wait_s for w in windows)
    h2d = statistics.fmean(w.h2d_s for w in windows)
    return Window(
        index=windows[0].index,
        epoch=windows[0].epoch,
        images=sum(w.images for w in windows),
        seconds=seconds,
        wait_s=wait,
        compute_s=max(0.0, seconds - wait - h2d),
        h2d_s=h2d,
        start_s=max(w.start_s for w in windows),
        epoch_images=sum(w.epoch_images for w in windows),
    )


def merge_epochs(per_rank: Sequence[Sequence[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The job's measured epochs from each rank's (``seconds``, ``arrivals``): an epoch lasts
    as long as its slowest rank, and step k's batch has arrived when the last rank has it
    (every rank creates its iterator at the same barrier)."""
    merged = []
    for epochs in zip(*per_rank, strict=True):
        merged.append(
            {
                "seconds": max(e["seconds"] for e in epochs),
                "arrivals": [max(a) for a in zip(*(e["arrivals"] for e in epochs), strict=True)],
            }
        )
    return merged


def merge_cuda(per_rank: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The job's CUDA memory figures from each rank's (:meth:`CudaMemory.summary` without its
    notes): the cap is per device, so peaks and the memory outside the allocator are the
    largest rank's, the allocator fraction the tightest; retries and OOMs add up. Empty off
    CUDA."""
    if not per_rank or not per_rank[0]:
        return {}

    def values(key: str) -> list[Any]:
        return [r[key] for r in per_rank if r.get(key) is not None]

    def pick(key: str, how: Callable[[list[Any]], Any]) -> Any:
        found = values(key)
        return how(found) if found else None

    return {
        "peak_allocated_bytes": pick("peak_allocated_bytes", max),
        "peak_reserved_bytes": pick("peak_reserved_bytes", max),
        "cuda_overhead_bytes": pick("cuda_overhead_bytes", max),
        "memory_fraction": pick("memory_fraction", min),
        "alloc_retries": pick("alloc_retries", sum),
        "alloc_ooms": pick("alloc_ooms", sum),
    }


def merge_notes(per_rank: Sequence[Sequence[str]], *, without: str | None = None) -> list[str]:
    """The ranks' notes: once when every rank has it, else with the rank that has it.
    ``without``: notes beginning so are left out (before the rank's name is added)."""
    if without:
        per_rank = [[n for n in notes if not n.startswith(without)] for notes in per_rank]
    shared = set(per_rank[0]).intersection(*per_rank[1:]) if per_rank else set()
    notes = [n for n in per_rank[0] if n in shared] if per_rank else []
    for rank, rank_notes in enumerate(per_rank):
        notes.extend(f"rank {rank}: {n}" for n in rank_notes if n not in shared)
    return list(dict.fromkeys(notes))


def starving_ranks(ranks: Sequence[dict[str, Any]]) -> list[str]:
    """Notes naming each rank that waits for data clearly longer than the others."""
    notes = []
    for r in ranks:
        others = [o["wait_fraction"] for o in ranks if o["rank"] != r["rank"]]
        if not others:
            continue
        rest = statistics.fmean(others)
        if r["wait_fraction"] > rest + STARVING_MARGIN:
            notes.append(
                f"rank {r['rank']} starves: it waited for data {r['wait_fraction']:.0%} of the "
                f"measured time, the other ranks {rest:.0%}; DDP makes every rank wait for it "
                "at each step"
            )
    return notes


# -- failures ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RankFailure:
    """How one rank failed, in the order the launcher saw it."""

    rank: int
    status: str
    reason: str
    message: str
    collective: bool = False  # a collective failed: maybe only because another rank failed
    timed_out: bool = False  # ... by its timeout: another rank (or its worker) hung


def is_collective_error(e: BaseException) -> bool:
    """Whether ``e`` comes from a collective or the process group (gloo, NCCL, c10d)."""
    names = {c.__name__ for c in type(e).__mro__}
    return bool(names & {"DistError", "DistBackendError", "DistNetworkError"}) or bool(
        _COLLECTIVE.search(str(e))
    )


def rank_failure(
    rank: int, e: BaseException, config: LoaderConfig, wspec: WorkloadSpec, plan: MeasurePlan
) -> RankFailure:
    """Classify an exception raised in rank ``rank`` (as the single child classifies its own)."""
    from loadersearch.measure._failures import classify_exception

    status, reason, message = classify_exception(e, config.batch_size, wspec.vram_cap)
    collective = is_collective_error(e)
    timed_out = collective and bool(_TIMED_OUT.search(str(e)))
    if timed_out:
        status, reason = INFEASIBLE, TIMEOUT
        message = (
            f"a collective timed out after {plan.stall_s:g} s waiting for another rank ({message})"
        )
    return RankFailure(rank, status, reason, message, collective, timed_out)


def exit_failure(rank: int, exitcode: int | None) -> RankFailure:
    """A rank that ended without reporting an error (killed by a signal, or exited)."""
    from loadersearch.measure._failures import classify_exit

    if exitcode == 0:
        return RankFailure(rank, ERROR, CRASH, "the rank exited without a result")
    status, reason, message = classify_exit(exitcode if exitcode is not None else 1, "")
    return RankFailure(rank, status, reason, message.replace("measuring process", "rank"))


def first_failure(failures: Sequence[RankFailure], world_size: int) -> tuple[str, str, str]:
    """(status, reason, message) of the trial: the first rank that failed by itself; when
    every failure is a collective that lost a peer, the first of those, and when those timed
    out, the ranks that did not fail are the ones that hung."""
    if not failures:
        raise ValueError("first_failure() needs at least one failure.")
    own = [f for f in failures if not f.collective]
    if own:
        f = own[0]
        return f.status, f.reason, f"rank {f.rank}: {f.message}"
    waiting = [f for f in failures if f.timed_out]
    if waiting:
        failed = {f.rank for f in failures}
        quiet = [str(r) for r in range(world_size) if r not in failed]
        who = f"rank {', '.join(quiet)}" if quiet else "a rank"
        return (
            INFEASIBLE,
            TIMEOUT,
            f"{who} hung: rank {', '.join(str(f.rank) for f in waiting)} waited "
            "for it in a collective until the process group's timeout (a rank or one of its "
            "DataLoader workers stopped)",
        )
    f = failures[0]
    return f.status, f.reason, f"rank {f.rank}: {f.message}"


# -- one rank ----------------------------------------------------------------------------------
