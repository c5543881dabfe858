"""The measuring child: ``python -m loadersearch.measure.child --fd N --spec JSON``.

Started by :func:`loadersearch.measure.runner.measure` in its own process group. It builds the
workload, runs the timed loop and writes JSON lines on file descriptor ``N`` (a pipe of its
own, not stdout, which torch or user code may print to):

* ``{"type": "ready", ...}`` once the workload is built (imports, dataset, model: the fixed
  overhead ends here);
* ``{"type": "warmup", "epoch": i, "seconds": s}`` after each unmeasured warm-up epoch;
* ``{"type": "window", ...}`` one per measurement window (:class:`~..result.Window` fields);
* ``{"type": "extra_epoch", "n": n, "precision": p}`` after each measured epoch added for the
  plan's precision (no windows: the pruner compares the same windows in every trial);
* then ``{"type": "result", ...}`` or ``{"type": "error", "status", "reason", "message"}``.

Two keys of ``MeasurePlan.extra`` change what is measured (``loadersearch diagnose`` sets them):
``"resident": true`` feeds the step one batch kept on the device (the ingestion ceiling), and
``"cold_cache": true`` evicts the dataset's files from the page cache before each measured epoch
and reports what stayed resident (``page_cache`` in the result).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
import time
import traceback
from typing import Any, TextIO

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec

PRECISION_NOTE = "the projected epoch time is known to"  # how precision_note begins

# The raise that gets a closer figure, for each limit that can stop the added epochs.
_RAISE = {
    "extend_limit_s": "raise extend_limit_s",
    "the measurement's time limit": "raise the time limit (timeout_s)",
}


def precision_note(
    precision: float | None, epochs: int, plan: MeasurePlan, bound: str = "", budget_s: float = 0.0
) -> str:
    """What a result must say when its projected epoch time is known less well than the plan
    asks (``precision`` of ``epochs`` measured epochs; ``bound`` and ``budget_s``: the limit
    that set the added epochs' seconds, as the loop's LoopRecord says it), or "" when it is
    known well enough."""
    from loadersearch.measure.loop import MIN_EPOCHS_FOR_PRECISION

    if not plan.precision or precision is None or precision <= plan.precision:
        return ""
    bound = bound or "extend_limit_s"
    budget = budget_s or plan.extend_limit_s
    fix = _RAISE.get(bound, "measure longer epochs (steps) or more of them (epochs)")
    if epochs < MIN_EPOCHS_FOR_PRECISION:
        why = (
            f"only {epochs} measured epochs fitted in the {budget:.1f} s allowed for more "
            f"({bound}), too few to judge their spread"
        )
    else:
        why = (
            f"the {budget:.1f} s allowed for more epochs ({bound}) ran out first: its "
            "batches' fetch times vary a lot (slow or uneven storage, a busy machine)"
        )
    return (
        f"{PRECISION_NOTE} +/-{precision:.1%} (90% confidence, {epochs} measured epochs), "
        f"not the +/-{plan.precision:.1%} asked for: {why}; {fix} for a closer figure"
    )


def sizing_notes(record: Any, plan: MeasurePlan, config: LoaderConfig) -> list[str]:
    """What the result must say about its measured epochs' length (``record``: the loop's
    :class:`~loadersearch.measure.loop.LoopRecord`)."""
    from loadersearch.measure.projection import steady_span

    notes = []
    if record.steps < record.target_steps:
        notes.append(
            f"measured epochs of {record.steps} steps, cut from {record.target_steps} by the "
            f"epoch time limit ({plan.epoch_limit_s:g} s at the warm-up's rate): the steady "
            "part may still include the prefetch ramp (raise epoch_limit_s)"
        )
    note = precision_note(
        record.precision, len(record.epochs), plan, record.extend_bound, record.extend_budget_s
    )
    if note:
        notes.append(note)
    if record.steps > 1 and steady_span(record.steps, config.num_workers) == 0:
        notes.append(
            f"{record.steps} steps per epoch are too few to separate the steady rate with "
            f"{config.num_workers} workers: the rate includes the epoch start (use more steps)"
        )
    return notes


# Of the plan's time limit, the share that the precision's added epochs may run into: the rest
# is for the result, the workers' shut-down and a slow machine.
FINISH_SHARE = 0.8


def finish_by(plan: MeasurePlan, started: float) -> float:
    """``time.monotonic()`` by which the measured epochs of a measurement that ``started``
    (``time.monotonic()``) must be done, so that the precision's added epochs never run a
    healthy measurement into its time limit (a TIMEOUT)."""
    return started + FINISH_SHARE * plan.timeout_s


def _die_with_parent() -> None:
    """Ask Linux to SIGKILL this process if the parent dies (DataLoader workers then notice their
    parent is gone and exit): no orphaned measurement even if the parent is SIGKILLed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _send(out: TextIO, kind: str, **data: Any) -> None:
    out.write(json.dumps({"type": kind, **data}) + "\n")
    out.flush()


def run(out: TextIO, spec_json: str, ranks: int | None = None) -> int:
    """Measure the configuration in ``spec_json``, reporting on ``out``; returns an exit code.
    ``ranks`` runs the multi-rank job (:mod:`loadersearch.measure.ranks`) with that many ranks
    whatever ``gpus`` says (1 rank: the DDP path on one device, for the GPU acceptance)."""
    from loadersearch.measure.failures import classify_exception

    started = time.monotonic()
    config: LoaderConfig | None = None
    wspec: WorkloadSpec | None = None
    try:
        data = json.loads(spec_json)
        wspec = WorkloadSpec.from_dict(data["workload"])
        config = LoaderConfig.from_dict(data["config"])
        plan = MeasurePlan.from_dict(data["plan"])
        if ranks or wspec.gpus > 1:  # one process per rank, this one their launcher
            from loadersearch.measure.launcher import run_job

            world = ranks or wspec.gpus
            run_job(out, wspec, config, plan, world_size=world, started=started)
        else:
            _measure(out, wspec, config, plan, started)
        return 0
    except BrokenPipeError:  # the parent is gone: nobody to report to
        return 1
    except BaseException as e:  # every failure becomes a classified message
        status, reason, message = classify_exception(
            e, config.batch_size if config else None, wspec.vram_cap if wspec else None
        )
        _send(
            out,
            "error",
            status=status,
            reason=reason,
            message=message,
            traceback="".join(traceback.format_exception(e))[-4000:],
        )
        return 0


def _measure(
    out: TextIO, wspec: WorkloadSpec, config: LoaderConfig, plan: MeasurePlan, started: float
) -> None:
    from loadersearch.measure.loop import run_loop
    from loadersearch.measure.probes import Probes
    from loadersearch.measure.projection import full_epoch_images, project, window_cv
    from loadersearch.workload import create_workload

    workload = create_workload(wspec, batch_size=config.batch_size)
    cuda_index = workload.device.index if workload.cuda else None
    probes = Probes(cuda_index).start()
    memory = None
    if workload.cuda:
        from loadersearch.measure.cuda import CudaMemory

        cap = wspec.vram_cap if wspec.kind != "emulated" else None
        memory = CudaMemory(workload.device, cap, probes.process_used)
        memory.apply_cap()
    notes = list(workload.notes)
    if memory is not None and memory.state.cap_bytes is not None and plan.warmup_epochs == 0:
        notes.append(
            "no warm-up epoch: the memory outside the allocator (CUDA context, kernels) was not "
            "measured, so the VRAM cap limits the allocator only"
        )
    if config.pin_memory and not workload.cuda:
        notes.append("pin_memory has no effect without a CUDA device (batches stay on the host)")
    dataset_len = len(workload.dataset)
    full = full_epoch_images(dataset_len, config.batch_size)
    if full == 0:
        notes.append(
            f"the dataset ({dataset_len} images) is smaller than one batch "
            f"({config.batch_size}): projected as one batch per epoch"
        )
        full = config.batch_size
    _send(
        out,
        "ready",
        device=workload.device_label,
        img_size=workload.img_size,
        dataset_len=dataset_len,
        dataset_images=full,
        emulated=workload.emulated,
        notes=notes,
        pid=os.getpid(),
        started=started,  # time.monotonic() at the child's start: its start-up and build split
    )
    windows = []

    def on_window(w: Any) -> None:
        windows.append(w)
        _send(out, "window", **w.to_dict())

    def on_warmup(epoch: int, seconds: float) -> None:
        _send(out, "warmup", epoch=epoch, seconds=seconds)

    cold = _ColdCache(wspec.data) if plan.extra.get("cold_cache") else None

    def on_measuring(measuring: bool) -> None:
        if measuring:
            if memory is not None:
                memory.begin_measured()
            probes.begin_measured()
        else:
            probes.end_measured()

    try:
        record = run_loop(
            workload,
            config,
            plan,
            seed=wspec.seed,
            on_window=on_window,
            on_warmup=on_warmup,
            on_measuring=on_measuring,
            after_first_step=memory.settle if memory is not None else None,
            resident=bool(plan.extra.get("resident")),
            before_epoch=cold.evict if cold is not None else None,
            on_extra=lambda n, precision: _send(out, "extra_epoch", n=n, precision=precision),
            finish_by=finish_by(plan, started),
        )
    finally:
        probes.stop()
    cuda_fields = memory.summary() if memory is not None else {}
    proj = project(record.epochs, config.batch_size, config.num_workers, full)
    late_notes = list(cuda_fields.pop("notes", []))
    if probes.nvml.handle is not None and probes.nvml_peak is None:
        late_notes.append(
            "NVML lists no process with this pid (a container's PID namespace?): the "
            "per-process device memory is unknown; see peak_vram_bytes"
        )
    late_notes.extend(sizing_notes(record, plan, config))
    seconds = sum(w.seconds for w in windows)
    _send(
        out,
        "result",
        steady_rate=proj.steady_rate,
        start_cost_s=proj.start_cost_s,
        epoch_time_s=proj.epoch_time_s,
        objective=proj.objective,
        window_cv=window_cv([w.rate for w in windows], plan.windows_per_epoch),
        wait_fraction=sum(w.wait_s for w in windows) / seconds if seconds > 0 else 0.0,
        warmup_s=record.warmup_s,
        epoch_steps=record.steps,
        precision=record.precision,
        extra_epochs=record.extra_epochs,
        peak_vram_bytes=(
            cuda_fields["peak_reserved_bytes"] if memory is not None else workload.peak_vram()
        ),
        notes=late_notes,
        page_cache=cold.summary() if cold is not None else None,
        steps=[
            {"t0": e["t0"], "arrivals": e["arrivals"], "waits": e["waits"]} for e in record.epochs
        ],
        **cuda_fields,
        **probes.summary(),
    )


class _ColdCache:
    """Evicts the dataset's files from the page cache before each measured epoch and keeps
    what ``mincore`` said was still resident right after each eviction."""

    def __init__(self, root: str | None) -> None:
        from loadersearch.measure.pagecache import dataset_files

        self.files = dataset_files(root) if root and os.path.isdir(root) else []
        self.after: list[dict[str, Any]] = []

    def evict(self, epoch: int) -> None:
        from loadersearch.measure.pagecache import evict, residency

        evict(self.files)
        self.after.append(residency(self.files).to_dict())

    def summary(self) -> dict[str, Any]:
        fractions = [a["fraction"] for a in self.after]
        checked = bool(self.after) and all(f is not None for f in fractions)
        return {
            "files": len(self.files),
            "bytes": self.after[0]["bytes"] if self.after else 0,
            "evictions": len(self.after),
            "checked": checked,
            # the worst epoch: how much of the dataset was still in memory after eviction
            "resident_after_evict": max(fractions) if checked else None,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadersearch.measure.child")
    parser.add_argument("--fd", type=int, required=True, help="pipe to write JSON lines to")
    parser.add_argument("--spec", required=True, help="JSON: workload, config, plan")
    parser.add_argument("--ranks", type=int, help="ranks of a DDP job (default: gpus)")
    args = parser.parse_args(argv)
    _die_with_parent()
    out = os.fdopen(args.fd, "w", encoding="utf-8")
    code = run(out, args.spec, args.ranks)
    try:
        out.close()
    except OSError:
        pass
    return code


if __name__ == "__main__":
    sys.exit(main())
