"""The launcher of a multi-rank measurement (:mod:`loadersearch.measure._ranks`): it starts the
ranks, follows their pipes and sentinels, and writes the single measuring child's messages
(one ready, the warm-ups, the job's windows, a result or the first failure).

Importing this module does not import torch.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import statistics
import time
from typing import Any, TextIO

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._notes import PRECISION_NOTE, precision_note
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._process import send_line
from loadersearch.measure._rank_results import (
    RankFailure,
    exit_failure,
    first_failure,
    job_epoch_images,
    merge_cuda,
    merge_epochs,
    merge_notes,
    merge_windows,
    starving_ranks,
)
from loadersearch.measure._ranks import MASTER_ADDR, START_METHOD, launch_env, rank_main
from loadersearch.measure._result import Window
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)

# After a collective fails in one rank, how long to wait for the failure of the peer that
# caused it (a dead rank's sentinel fires at once; this only covers a busy machine).
PEER_GRACE_S = 2.0


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
        send_line(self.out, kind, **data)

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
        from loadersearch.measure._projection import epoch_time_precision, project, window_cv

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
        notes = merge_notes([r["notes"] for r in res], without=PRECISION_NOTE)
        job_note = precision_note(
            precision,
            len(epochs),
            self.plan,
            res[0].get("extend_bound", ""),
            res[0].get("extend_budget_s", 0.0),
        )
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

    from loadersearch.measure._probes import Probes

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
