"""Several ranks in one measurement: a DistributedDataParallel job, one process per device.

With ``WorkloadSpec.gpus = N > 1`` the measuring child (:mod:`loadersearch.measure.child`)
becomes the job's launcher, as torchrun's agent is: it hosts the rendezvous store (a
``TCPStore`` on 127.0.0.1, on a port the kernel picks, so no port race) and starts N rank
processes with ``torch.multiprocessing`` (spawn: a fresh interpreter per rank, as under
torchrun) under torchrun's environment contract: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``,
``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT`` and ``TORCHELASTIC_USE_AGENT_STORE``
(the ranks join the launcher's store as torchrun's workers join the agent's), and
``OMP_NUM_THREADS=1`` unless set, as torchrun does with several processes per node. Each rank
initialises the process group (NCCL on CUDA, rank r on device r; gloo on a CPU), builds the
same DataLoader configuration over its shard of the common epoch order
(:class:`~loadersearch.measure.loop.ShortEpochSampler` with rank and world size, as
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
import logging
import math
import multiprocessing
import os
import re
import statistics
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure.projection import full_epoch_images
from loadersearch.measure.result import CRASH, ERROR, INFEASIBLE, TIMEOUT, Window

logger = logging.getLogger(__name__)

MASTER_ADDR = "127.0.0.1"
START_METHOD = "spawn"  # each rank a fresh interpreter, as torchrun starts them
# After a collective fails in one rank, how long to wait for the failure of the peer that
# caused it (a dead rank's sentinel fires at once; this only covers a busy machine).
PEER_GRACE_S = 2.0
# A rank starves when it waits for data this much more of its time than the other ranks.
STARVING_MARGIN = 0.10
_ARRIVED = "loadersearch/arrived/"
_COLLECTIVE = re.compile(
    r"gloo/transport|NCCL|ProcessGroup|Connection (?:reset|closed) by peer", re.IGNORECASE
)
_TIMED_OUT = re.compile(r"timed out|timeout", re.IGNORECASE)


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


def merge_notes(per_rank: Sequence[Sequence[str]]) -> list[str]:
    """The ranks' notes: once when every rank has it, else with the rank that has it."""
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
    from loadersearch.measure.failures import classify_exception

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
    from loadersearch.measure.failures import classify_exit

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


def rank_main(rank: int, conns: list[Any], job: dict[str, Any]) -> None:
    """A rank's process (started by :func:`run_job` through ``torch.multiprocessing``).

    Reports on its own pipe (``conns[rank]``) what the single measuring child writes on its
    pipe, as ``(kind, data)`` tuples; an exception becomes an ``("error", ...)`` message and
    exit code 1."""
    from loadersearch.measure.child import _die_with_parent

    _die_with_parent()  # SIGKILL with the launcher (torch.multiprocessing asks for SIGINT)
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
    import torch
    import torch.distributed as dist

    from loadersearch.measure.child import finish_by, sizing_notes
    from loadersearch.measure.loop import run_loop
    from loadersearch.measure.probes import Probes
    from loadersearch.measure.projection import project
    from loadersearch.workload import create_workload, resolve_device

    cuda = resolve_device(wspec.device) == "cuda"
    if cuda:
        found = torch.cuda.device_count()
        if rank >= found:
            raise RuntimeError(
                f"{world_size} ranks need {world_size} CUDA devices but torch sees {found}; "
                f"use --gpus {found} or fewer"
            )
        torch.cuda.set_device(rank)  # "cuda" below is this rank's device
    backend = backend_for(cuda)
    _arrive(rank, world_size, plan)
    extra = {"device_id": torch.device("cuda", rank)} if cuda else {}
    dist.init_process_group(
        backend,
        init_method="env://",
        timeout=datetime.timedelta(seconds=min(plan.stall_s, plan.timeout_s)),
        **extra,
    )

    def ddp(model: Any) -> Any:
        from torch.nn.parallel import DistributedDataParallel

        return DistributedDataParallel(model, device_ids=[rank] if cuda else None)

    workload = create_workload(
        wspec, batch_size=config.batch_size, wrap_model=ddp if wspec.kind == "train" else None
    )
    if wspec.kind == "emulated":
        workload.step = _lockstep(workload.step, workload.device, cuda)
    barrier_kwargs = {"device_ids": [rank]} if cuda else {}

    def barrier() -> None:
        dist.barrier(**barrier_kwargs)

    def agree(n: int) -> int:  # every rank measures epochs of the same length: the shortest
        value = torch.tensor([n], dtype=torch.int64, device=workload.device)
        dist.all_reduce(value, op=dist.ReduceOp.MIN)
        return int(value.item())

    probes = Probes(workload.device.index if cuda else None).start()
    memory = None
    if cuda:  # the cap per device, as one process enforces it (measure.cuda)
        from loadersearch.measure.cuda import CudaMemory

        cap = wspec.vram_cap if wspec.kind != "emulated" else None
        memory = CudaMemory(workload.device, cap, probes.process_used)
        memory.apply_cap()
    dataset_len = len(workload.dataset)
    send(
        "ready",
        device=workload.device_label,
        backend=backend,
        img_size=workload.img_size,
        dataset_len=dataset_len,
        emulated=workload.emulated,
        notes=list(workload.notes),
        pid=os.getpid(),
    )

    def on_measuring(measuring: bool) -> None:
        if measuring:
            if memory is not None:
                memory.begin_measured()
            probes.begin_measured()
        else:
            probes.end_measured()
        send("measuring", measuring=measuring)

    windows: list[Window] = []

    def on_window(w: Window) -> None:
        windows.append(w)
        send("window", **w.to_dict())

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
            rank=rank,
            world_size=world_size,
            barrier=barrier,
            agree=agree,
            on_extra=lambda n, precision: send("extra_epoch", n=n, precision=precision),
            finish_by=finish_by(plan, started),
        )
    finally:
        probes.stop()
    cuda_fields = memory.summary() if memory is not None else {}
    per_rank_images = full_epoch_images(math.ceil(dataset_len / world_size), config.batch_size)
    proj = project(record.epochs, config.batch_size, config.num_workers, per_rank_images)
    seconds = sum(w.seconds for w in windows)
    send(
        "result",
        epochs=record.epochs,
        warmup_s=record.warmup_s,
        epoch_steps=record.steps,
        extra_epochs=record.extra_epochs,
        extend_bound=record.extend_bound,
        extend_budget_s=record.extend_budget_s,
        steady_rate=proj.steady_rate,
        wait_fraction=sum(w.wait_s for w in windows) / seconds if seconds > 0 else 0.0,
        window_rates=[w.rate for w in windows],
        peak_vram_bytes=(
            cuda_fields["peak_reserved_bytes"] if memory is not None else workload.peak_vram()
        ),
        notes=cuda_fields.pop("notes", []) + sizing_notes(record, plan, config),
        cuda=cuda_fields,
        **probes.summary(),
    )
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


# -- the launcher ------------------------------------------------------------------------------


class _Job:
    """What the launcher knows of its ranks while they run, and what it reports on ``out``."""

    def __init__(
        self,
        out: TextIO,
        world_size: int,
        config: LoaderConfig,
        plan: MeasurePlan,
        probes: Any,
        env_notes: list[str],
    ) -> None:
        self.out = out
        self.world_size = world_size
        self.config = config
        self.plan = plan
        self.probes = probes
        self.env_notes = env_notes
        self.ready: dict[int, dict[str, Any]] = {}
        self.warmups: dict[int, dict[int, float]] = {}
        self.windows: dict[int, dict[int, Window]] = {}
        self.sent_windows: list[Window] = []
        self.results: dict[int, dict[str, Any]] = {}
        self.failures: list[RankFailure] = []
        self.first_failure_at: float | None = None
        self.measuring: set[int] = set()
        self.full_images = 0  # the job's full epoch, known once every rank is ready

    def _send(self, kind: str, **data: Any) -> None:
        from loadersearch.measure.child import _send

        _send(self.out, kind, **data)

    def fail(self, failure: RankFailure, traceback_text: str = "") -> None:
        if any(f.rank == failure.rank for f in self.failures):
            return  # a rank's own report comes before its exit; keep the first
        if traceback_text:
            logger.debug("rank %d failed:\n%s", failure.rank, traceback_text)
        self.failures.append(failure)
        if self.first_failure_at is None:
            self.first_failure_at = time.monotonic()

    def decided(self, running: int) -> bool:
        """Whether the failures seen so far name the trial's failure."""
        if not self.failures:
            return False
        if any(not f.collective for f in self.failures) or running == 0:
            return True
        assert self.first_failure_at is not None
        return time.monotonic() - self.first_failure_at >= PEER_GRACE_S

    def report_failure(self) -> None:
        status, reason, message = first_failure(self.failures, self.world_size)
        self._send("error", status=status, reason=reason, message=message)

    def handle(self, rank: int, kind: str, data: dict[str, Any]) -> None:
        if kind == "ready":
            self.ready[rank] = data
            if len(self.ready) == self.world_size:
                self._send_ready()
        elif kind == "warmup":
            got = self.warmups.setdefault(data["epoch"], {})
            got[rank] = data["seconds"]
            if len(got) == self.world_size:
                self._send("warmup", epoch=data["epoch"], seconds=max(got.values()))
        elif kind == "measuring":
            self._measuring(rank, data["measuring"])
        elif kind == "window":
            window = Window.from_dict(data)
            got_w = self.windows.setdefault(window.index, {})
            got_w[rank] = window
            if len(got_w) == self.world_size:
                merged = merge_windows([got_w[r] for r in range(self.world_size)])
                del self.windows[window.index]
                self.sent_windows.append(merged)
                self._send("window", **merged.to_dict())
        elif kind == "extra_epoch":  # the ranks extend in step: rank 0 speaks for them
            if rank == 0:
                self._send("extra_epoch", **data)
        elif kind == "result":
            self.results[rank] = data
        elif kind == "error":
            fields = {f.name: data[f.name] for f in dataclasses.fields(RankFailure)}
            self.fail(RankFailure(**fields), data.get("traceback", ""))

    def _measuring(self, rank: int, measuring: bool) -> None:
        # The ranks leave the warm-up at one barrier: the job's measured time starts with the
        # first rank and ends with the last.
        if measuring:
            if not self.measuring:
                self.probes.begin_measured()
            self.measuring.add(rank)
        else:
            self.measuring.discard(rank)
            if not self.measuring:
                self.probes.end_measured()

    def _send_ready(self) -> None:
        first = self.ready[0]
        dataset_len = first["dataset_len"]
        full = job_epoch_images(dataset_len, self.config.batch_size, self.world_size)
        notes = list(first["notes"])
        if full == 0:
            full = self.config.batch_size * self.world_size
            notes.append(
                f"the dataset ({dataset_len} images) is smaller than one batch per rank "
                f"({self.world_size} x {self.config.batch_size}): projected as one batch per "
                "rank per epoch"
            )
        notes.append(
            f"DistributedDataParallel: {self.world_size} ranks ({first['backend']}), one "
            "process per device; num_workers and batch_size are per rank; figures are the "
            "job's (every rank's images over the slowest rank's time), per rank in 'ranks'"
        )
        if first["backend"] == "gloo":
            notes.append(
                "CPU ranks with gloo: a test of the multi-rank path on a machine without GPUs"
            )
        notes.extend(self.env_notes)
        self.full_images = full
        self._send(
            "ready",
            device=f"{self.world_size} ranks ({first['backend']}) x {first['device']}",
            img_size=first["img_size"],
            dataset_len=dataset_len,
            dataset_images=full,
            emulated=first["emulated"],
            notes=notes,
            pid=os.getpid(),
        )

    def report_result(self) -> None:
        from loadersearch.measure.child import PRECISION_NOTE, precision_note
        from loadersearch.measure.projection import epoch_time_precision, project, window_cv

        world = self.world_size
        res = [self.results[r] for r in range(world)]
        epochs = merge_epochs([r["epochs"] for r in res])
        proj = project(
            epochs, self.config.batch_size * world, self.config.num_workers, self.full_images
        )
        ranks = [
            {
                "rank": r,
                "device": self.ready[r]["device"],
                "pid": self.ready[r]["pid"],
                "steady_rate": res[r]["steady_rate"],
                "wait_fraction": res[r]["wait_fraction"],
                "window_rates": res[r]["window_rates"],
                "peak_vram_bytes": res[r]["peak_vram_bytes"],
                "nvml_peak_bytes": res[r]["nvml_peak_bytes"],
                "peak_rss_bytes": res[r]["peak_rss_bytes"],
                "gpu_util_mean": res[r]["gpu_util_mean"],
                "cpu_util_mean": res[r]["cpu_util_mean"],
                **res[r]["cuda"],  # allocator peaks, retries, the cap's fraction (CUDA only)
            }
            for r in range(world)
        ]
        self.probes.stop()
        job = self.probes.summary()  # the whole job's tree: every rank and worker

        def peak(key: str) -> int | None:
            values = [r[key] for r in ranks if r[key] is not None]
            return max(values) if values else None

        utils = [r["gpu_util_mean"] for r in ranks if r["gpu_util_mean"] is not None]
        precision = epoch_time_precision(
            epochs, self.config.batch_size * world, self.config.num_workers, self.full_images
        )
        # Each rank stopped adding epochs on its own figure; the job's (its merged epochs) is
        # the one reported, so its note replaces the ranks' own.
        notes = [
            n for n in merge_notes([r["notes"] for r in res]) if not n.startswith(PRECISION_NOTE)
        ]
        bound = _Bound(res[0].get("extend_bound", ""), res[0].get("extend_budget_s", 0.0))
        job_note = precision_note(precision, len(epochs), bound, self.plan)
        self._send(
            "result",
            steady_rate=proj.steady_rate,
            start_cost_s=proj.start_cost_s,
            epoch_time_s=proj.epoch_time_s,
            objective=proj.objective,
            window_cv=window_cv([w.rate for w in self.sent_windows], self.plan.windows_per_epoch),
            wait_fraction=statistics.fmean(r["wait_fraction"] for r in ranks),
            warmup_s=max(r["warmup_s"] for r in res),
            epoch_steps=res[0]["epoch_steps"],
            precision=precision,
            extra_epochs=res[0].get("extra_epochs", 0),
            # The cap is per device: the largest rank's figure is the one to hold against it.
            peak_vram_bytes=peak("peak_vram_bytes"),
            nvml_peak_bytes=peak("nvml_peak_bytes"),
            gpu_util_mean=statistics.fmean(utils) if utils else None,
            cpu_util_mean=job["cpu_util_mean"],
            peak_rss_bytes=job["peak_rss_bytes"],
            shm_peak_bytes=job["shm_peak_bytes"],
            nvml=res[0]["nvml"],
            notes=notes + ([job_note] if job_note else []) + starving_ranks(ranks),
            ranks=ranks,
            **merge_cuda([r["cuda"] for r in res]),
        )


@dataclass(frozen=True)
class _Bound:
    """What limited a rank's added epochs (as a LoopRecord says it), for the job's note."""

    extend_bound: str
    extend_budget_s: float


def run_job(
    out: TextIO,
    wspec: WorkloadSpec,
    config: LoaderConfig,
    plan: MeasurePlan,
    *,
    world_size: int | None = None,
    started: float | None = None,
) -> None:
    """Launch ``world_size`` (default ``wspec.gpus``) ranks, follow them, and write the single
    measuring child's messages on ``out``: one ready, the warm-ups, the job's windows, then a
    result or the first failure. Returns once reported; the caller's process group (ranks and
    workers) is killed by the parent, as for one process. ``started``: when the measuring
    process started (``time.monotonic()``; default now), for its time limit."""
    from multiprocessing.connection import wait

    import torch.multiprocessing as mp
    from torch.distributed import TCPStore

    from loadersearch.measure.probes import Probes

    world = world_size or wspec.gpus
    store = TCPStore(MASTER_ADDR, 0, world, is_master=True, wait_for_workers=False)
    env = launch_env(world, store.port)
    os.environ.update(env)
    env_notes = []
    if "OMP_NUM_THREADS" in env:
        env_notes.append("OMP_NUM_THREADS=1 in every rank, as torchrun sets it")
    ctx = mp.get_context(START_METHOD)
    pipes = [ctx.Pipe(duplex=False) for _ in range(world)]
    job_spec = {
        "workload": wspec.to_dict(),
        "config": config.to_dict(),
        "plan": plan.to_dict(),
        "world_size": world,
        # time.monotonic() is the machine's one monotonic clock (Linux: CLOCK_MONOTONIC), so a
        # rank can hold its added epochs to the launcher's time limit
        "started": started if started is not None else time.monotonic(),
    }
    probes = Probes(None).start()
    job = _Job(out, world, config, plan, probes, env_notes)
    context = mp.start_processes(
        rank_main,
        args=([send for _, send in pipes], job_spec),
        nprocs=world,
        join=False,
        start_method=START_METHOD,
    )
    for _, send in pipes:
        send.close()  # only the ranks write: a rank's pipe ends with it
    conns = {rank: recv for rank, (recv, _) in enumerate(pipes)}
    sentinels = {p.sentinel: rank for rank, p in enumerate(context.processes)}
    try:
        while len(job.results) < world:
            if job.decided(len(sentinels)):
                job.report_failure()
                return
            timeout = None
            if job.first_failure_at is not None:
                timeout = max(0.0, job.first_failure_at + PEER_GRACE_S - time.monotonic())
            ready = wait([*conns.values(), *sentinels], timeout)
            # A rank's messages before its exit: its own error report beats its exit code.
            for rank, conn in list(conns.items()):
                if conn in ready:
                    _drain(conn, rank, job, conns)
            for sentinel in [s for s in ready if s in sentinels]:
                rank = sentinels.pop(sentinel)
                process = context.processes[rank]
                process.join()
                if rank in conns:
                    _drain(conns[rank], rank, job, conns)
                if process.exitcode != 0 or rank not in job.results:
                    job.fail(exit_failure(rank, process.exitcode))
        job.report_result()
    finally:
        probes.stop()


def _drain(conn: Any, rank: int, job: _Job, conns: dict[int, Any]) -> None:
    """Handle every message waiting on ``conn``; forget it at its end."""
    try:
        while conn.poll():
            kind, data = conn.recv()
            job.handle(rank, kind, data)
    except (EOFError, OSError):
        del conns[rank]
