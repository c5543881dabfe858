"""Several ranks in one measurement: a DistributedDataParallel job, one process per device.

With ``WorkloadSpec.gpus = N > 1`` the measuring child (:mod:`loadersearch.measure._child`)
becomes the job's launcher, as torchrun's agent is: it hosts the rendezvous store (a
``TCPStore`` on 127.0.0.1, on a port the kernel picks, so no port race) and starts N rank
processes with ``torch.multiprocessing`` (spawn: a fresh interpreter per rank, as under
torchrun) under torchrun's environment contract: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and ``TORCHELASTIC_USE_AGENT_STORE``
(the ranks join the launcher's store as torchrun's workers join the agent's), and
``OMP_NUM_THREADS=1`` unless set, as torchrun does with several processes per node. Each rank
initialises the process group (NCCL on CUDA, rank r on device r; gloo on a CPU), builds the
same DataLoader configuration over its shard of the common epoch order
(:class:`~loadersearch.measure._loop.ShortEpochSampler` with rank and world size, as
``DistributedSampler`` shards an epoch) and runs the timed loop:

* ``train``: YOLOv4-tiny wrapped in ``DistributedDataParallel`` (gradients all-reduced every
  step, buffers broadcast), so the measurement includes what DDP costs;
* ``emulated``: each rank sleeps its step, then all-reduces one number, so the ranks stay in
  lockstep as DDP keeps them;
* ``loader``: each rank's pipeline alone, as fast as it goes.

Every window edge waits for all ranks (a barrier after the device sync), so every window starts
and ends together on all ranks and window k is the same position in every trial. The job's
window holds all ranks' images over the slowest rank's seconds; the job's projection uses, per
step, the moment the last rank had its batch. Per-rank figures (rate, data wait, memory) come
with the result (:attr:`MeasureResult.ranks`), and a note names a rank that starves.

Faults end the whole trial at once. The launcher watches its ranks' pipes and process
sentinels: the first rank that fails (an exception it reports, or its death) classifies the
trial, "rank r: ..." in the message; the launcher reports it and exits, and the parent kills
the whole process group (every rank and DataLoader worker, as for one process). A collective
that failed only because a peer died ("Connection reset by peer") is not that first failure
when the peer's own failure shows within ``PEER_GRACE_S``. A rank that hangs stops the
windows, so the parent's stall limit cuts the trial; the process group's timeout is that same
stall limit (not NCCL's 10 or gloo's 30 minutes), so no collective is left waiting.

Importing this module does not import torch.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import logging
import multiprocessing
import os
import time
import traceback
from collections.abc import Callable
from typing import Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._body import RankRole, measure_share
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._process import die_with_parent
from loadersearch.measure._rank_results import rank_failure
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)

MASTER_ADDR = "127.0.0.1"
START_METHOD = "spawn"  # each rank a fresh interpreter, as torchrun starts them
_ARRIVED = "loadersearch/arrived/"


def backend_for(cuda: bool) -> str:
    """The process-group backend: NCCL between CUDA devices, gloo between CPU ranks."""
    return "nccl" if cuda else "gloo"


def launch_env(world_size: int, port: int) -> dict[str, str]:
    """The environment every rank starts with (torchrun's contract for one node);
    ``RANK`` and ``LOCAL_RANK`` are set in each rank."""
    env = {
        "WORLD_SIZE": str(world_size),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_RANK": "0",
        "MASTER_ADDR": MASTER_ADDR,
        "MASTER_PORT": str(port),
        "TORCHELASTIC_USE_AGENT_STORE": "True",
    }
    if world_size > 1 and "OMP_NUM_THREADS" not in os.environ:
        env["OMP_NUM_THREADS"] = "1"  # torchrun's default with several processes per node
    return env


def rank_main(rank: int, conns: list[Any], job: dict[str, Any]) -> None:
    """A rank's process (started by :func:`run_job` through ``torch.multiprocessing``).

    Reports on its own pipe (``conns[rank]``) what the single measuring child writes on its
    pipe, as ``(kind, data)`` tuples; an exception becomes an ``("error", ...)`` message and
    exit code 1."""
    die_with_parent()  # SIGKILL with the launcher (torch.multiprocessing asks for SIGINT)
    # A spawned process keeps "spawn" as its default start method; a torchrun worker is a
    # fresh interpreter with the platform's default. (The measured DataLoader names its start
    # method anyway: LoaderConfig.start_method.)
    multiprocessing.set_start_method(None, force=True)
    conn = conns[rank]
    for i, other in enumerate(conns):
        if i != rank:
            other.close()
    os.environ["RANK"] = os.environ["LOCAL_RANK"] = str(rank)
    wspec = WorkloadSpec.from_dict(job["workload"])
    config = LoaderConfig.from_dict(job["config"])
    plan = MeasurePlan.from_dict(job["plan"])

    def send(kind: str, **data: Any) -> None:
        conn.send((kind, data))

    try:
        started = float(job.get("started", time.monotonic()))
        _run_rank(send, rank, int(job["world_size"]), wspec, config, plan, started)
    except BaseException as e:  # every failure becomes a classified message
        failure = rank_failure(rank, e, config, wspec, plan)
        try:
            send(
                "error",
                **dataclasses.asdict(failure),
                traceback="".join(traceback.format_exception(e))[-4000:],
            )
        except OSError:  # the launcher is gone: nobody to report to
            pass
        raise SystemExit(1) from None
    finally:
        conn.close()


def _arrive(rank: int, world_size: int, plan: MeasurePlan) -> None:
    """Wait until every rank has started (on the launcher's store, with the measurement's
    whole time limit): spawning N interpreters on a busy machine takes a while, and the
    process group's own timeout is kept short (the stall limit) for the collectives."""
    from torch.distributed import TCPStore

    store = TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world_size,
        is_master=False,
        timeout=datetime.timedelta(seconds=plan.timeout_s),
    )
    store.set(f"{_ARRIVED}{rank}", "1")
    store.wait([f"{_ARRIVED}{r}" for r in range(world_size)])


def _run_rank(
    send: Callable[..., None],
    rank: int,
    world_size: int,
    wspec: WorkloadSpec,
    config: LoaderConfig,
    plan: MeasurePlan,
    started: float,
) -> None:
    """Join the job's process group, measure this rank's share, leave the group."""
    import torch
    import torch.distributed as dist

    from loadersearch.workload import resolve_device

    cuda = resolve_device(wspec.device) == "cuda"
    if cuda:
        found = torch.cuda.device_count()
        if rank >= found:
            raise RuntimeError(
                f"{world_size} ranks need {world_size} CUDA devices but torch sees {found}; "
                + (f"use --gpus {found} or fewer" if found else "use --gpus 1 or --device cpu")
            )
        torch.cuda.set_device(rank)  # "cuda" below is this rank's device
    backend = backend_for(cuda)
    _arrive(rank, world_size, plan)
    device = torch.device("cuda", rank) if cuda else torch.device("cpu")
    dist.init_process_group(
        backend,
        init_method="env://",
        timeout=datetime.timedelta(seconds=min(plan.stall_s, plan.timeout_s)),
        **({"device_id": device} if cuda else {}),
    )
    barrier_kwargs = {"device_ids": [rank]} if cuda else {}

    def barrier() -> None:
        dist.barrier(**barrier_kwargs)

    def agree(n: int) -> int:  # every rank measures epochs of the same length: the shortest
        value = torch.tensor([n], dtype=torch.int64, device=device)
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
        return int(value.item())

    def ddp(model: Any) -> Any:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[rank] if cuda else None)

    role = RankRole(
        rank,
        world_size,
        backend,
        barrier,
        agree,
        wrap_model=ddp if wspec.kind == "train" else None,
        wrap_step=functools.partial(_lockstep, device=device, cuda=cuda)
        if wspec.kind == "emulated"
        else None,
    )
    measure_share(send, wspec, config, plan, started, role)
    try:
        dist.destroy_process_group()
    except Exception:  # the launcher has what it needs; it and its ranks are killed next
        logger.debug("destroy_process_group failed", exc_info=True)


def _lockstep(step: Callable[..., None], device: Any, cuda: bool) -> Callable[..., None]:
    """The emulated step followed by a one-number all-reduce, so that the ranks advance
    together, step by step, as DDP's gradient all-reduce keeps them."""
    import torch
    import torch.distributed as dist

    token = torch.zeros(1, device=device)

    def lockstep(*batch: Any) -> None:
        step(*batch)
        dist.all_reduce(token)
        if cuda:  # NCCL only queues the all-reduce; the emulated device waits for it
            torch.cuda.synchronize(device.index)

    return lockstep
