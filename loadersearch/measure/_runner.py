"""Measure one DataLoader configuration in a fresh child process: :func:`measure`.

The child (:mod:`loadersearch.measure._child`) is forked by a preloaded fork server
(:mod:`loadersearch.measure._forkserver`: the server of the enclosing ``serving()`` block, which
``run`` keeps for all its trials, or one started for this measurement alone). It leads its own
process group, so that its DataLoader workers can be killed with it, and reports on a pipe of
its own. The parent enforces
the wall-clock limit and the stall limit, calls ``on_window`` for each window, and after any
ending (result, error, timeout, prune, Ctrl-C, an exception in ``on_window``) SIGKILLs the
child's whole process group and reaps it: no process of the measurement is left. Once the
result is in, nothing the child still does matters, so it is killed at once rather than left
to shut its workers down (which would overlap the next measurement).

To reap the workers that outlive a killed child, this process makes itself a *child
subreaper* (Linux ``PR_SET_CHILD_SUBREAPER``) on first use: orphaned workers are re-parented
here instead of to PID 1 (which, in some containers, never reaps them).
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import json
import logging
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from loadersearch._limits import fd_limit_said, fd_problem, limit_problem
from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._failures import classify_exit
from loadersearch.measure._forkserver import ForkedChild, ForkServerTimeout, server_for_one
from loadersearch.measure._hostload import HostLoadMeter, busy_share
from loadersearch.measure._messages import FollowState, handle
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._result import (
    ERROR,
    INFEASIBLE,
    OK,
    PRUNED,
    RESOURCE_LIMIT,
    TIMEOUT,
    MeasureResult,
    Window,
    phases_of,
)
from loadersearch.workload import WorkloadSpec, workload_for

logger = logging.getLogger(__name__)

EXIT_GRACE_S = 3.0  # a child that closed its pipe may take this long to exit by itself
REAP_TIMEOUT_S = 5.0
# A child that said "too many open files" and then sent nothing for this long has hung on it
# (DataLoader workers that cannot pass a file descriptor wait for ever): end it now, with the
# limit named, rather than at the measurement's time limit (minutes on a GPU plan).
FD_HANG_S = 10.0

_subreaper = False


def _become_subreaper() -> None:
    global _subreaper
    if _subreaper or not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(36, 1, 0, 0, 0) == 0:  # PR_SET_CHILD_SUBREAPER
            _subreaper = True
    except (OSError, AttributeError):
        logger.debug("cannot become a child subreaper", exc_info=True)


def measure(
    workload: WorkloadSpec,
    config: LoaderConfig,
    plan: MeasurePlan,
    *,
    on_window: Callable[[Window], bool] | None = None,
    on_ready: Callable[[MeasureResult], None] | None = None,
    prepared: bool = False,
) -> MeasureResult:
    """Measure ``config`` on ``workload`` for ``plan`` in a fresh child process.

    ``prepared``: :func:`~loadersearch.measure._prepare.prepare` has readied ``workload``
    (its device resolved, its caches built, the cache ``config`` names among them), so this
    measurement does not check its cache again; without it, a missing or stale memmap cache
    is built here, outside the child's time limit.

    ``on_ready(result)`` is called once the workload is built, before any window, with the
    result so far (device, ``dataset_images``: the images of one full epoch).
    ``on_window(window)`` is called for every window as it arrives; returning False stops the
    measurement at once (status PRUNED, the windows so far kept). Failures of the configuration
    or the data come back as a status and a reason (see :mod:`loadersearch.measure._result`),
    never as an exception. A ``KeyboardInterrupt`` (Ctrl-C) in the caller propagates after the
    child's process group has been killed and reaped, so that a search stops on Ctrl-C; the
    same holds for an exception raised by ``on_window``.
    """
    _become_subreaper()
    busy_share()  # a bad $LOADERSEARCH_BUSY_SHARE is refused before anything runs
    workload = _ready_workload(workload, config, prepared)
    result = MeasureResult(
        config=config,
        status=ERROR,
        workload=workload.kind,
        emulated=workload.emulated,
        emulated_io_ms=workload.emulated_io_ms,
        device="emulated" if workload.emulated else "unknown",
    )
    spec = json.dumps(
        {"workload": workload.to_dict(), "config": config.to_dict(), "plan": plan.to_dict()}
    )
    env, skipped_file = _child_env(workload)
    # The fixed cost (overhead_s) runs from here: the fork, or a whole server's start when no
    # serving() block keeps one.
    t0 = time.monotonic()
    with contextlib.ExitStack() as stack:
        if skipped_file is not None:
            stack.callback(_collect_skipped, result, skipped_file)
        try:
            server = stack.enter_context(server_for_one(timeout=plan.timeout_s))
        except ForkServerTimeout:  # the imports alone took the whole limit, as a child's could
            _timeout(
                result, f"the measurement passed its {plan.timeout_s:g} s limit during start-up"
            )
            result.wall_s = time.monotonic() - t0
            return result
        read_fd, write_fd = os.pipe()
        log = tempfile.TemporaryFile()
        try:
            proc = server.spawn(spec, workload, write_fd, log.fileno(), env=env)
        except BaseException:
            os.close(read_fd)
            log.close()
            raise
        finally:
            os.close(write_fd)
        meter = HostLoadMeter()
        marks: dict[str, float] = {}
        try:
            _follow(proc, read_fd, log, plan, result, t0, on_window, on_ready, meter, marks)
        finally:
            marks.setdefault("done", time.monotonic())
            _record_host_load(result, meter)
            _kill_group(proc)
            os.close(read_fd)
            log.close()
            end = time.monotonic()
            result.wall_s = end - t0
            result.phases = phases_of(marks, t0, end)
    return result


def _ready_workload(workload: WorkloadSpec, config: LoaderConfig, prepared: bool) -> WorkloadSpec:
    """``workload`` as the child measures it: with the cache ``config`` names, the default
    dataset generated and (unless ``prepared``) a memmap cache built here, outside the child's
    time limit."""
    workload = workload_for(workload, config)  # a configuration that names its cache
    if workload.data is None and workload.pipeline is None:
        # generate the default dataset here, not inside the timed child
        from loadersearch.workload import default_dataset

        workload = dataclasses.replace(workload, data=default_dataset())
    if workload.cache == "memmap" and workload.pipeline is None and not prepared:
        # build a missing or stale memmap cache here too, not inside the child's time limit
        from loadersearch.errors import LoaderSearchError
        from loadersearch.workload import prepare_cache

        try:
            prepare_cache(workload)
        except LoaderSearchError:
            pass  # the child meets it again, and it comes back as the result's status
    return workload


def _child_env(workload: WorkloadSpec) -> tuple[dict[str, str] | None, str | None]:
    """The child's environment (None: this process's) and the file it names skipped images
    in (None without ``skip_bad_samples``)."""
    env = None
    if workload.pipeline is not None:  # the child imports the user's modules
        from loadersearch.workload import child_environ

        env = child_environ(workload.pipeline)
    skipped_file = None
    if workload.skip_bad_samples and workload.pipeline is None:
        # where the child and its DataLoader workers name the images they replace
        from loadersearch.workload import SKIPPED_ENV

        fd, skipped_file = tempfile.mkstemp(prefix="loadersearch-skipped-")
        os.close(fd)
        env = {**(env if env is not None else os.environ), SKIPPED_ENV: skipped_file}
    return env, skipped_file


def _collect_skipped(result: MeasureResult, path: str) -> None:
    """The images the measurement skipped (``skip_bad_samples``), read once its processes are
    gone: into ``result``, each new one named once (workload.datasets.skipped)."""
    from loadersearch.workload import announce, read_skipped

    try:
        result.skipped_samples = announce(read_skipped(path))
    finally:
        with contextlib.suppress(OSError):
            os.unlink(path)


def _stderr_tail(log) -> str:  # noqa: ANN001 - a binary file object
    # pread, not seek and read: the child writes through the same open file (one offset), and
    # this is read while it runs (FD_HANG_S), so moving the offset could misplace its writes.
    try:
        fd = log.fileno()
        size = os.fstat(fd).st_size
        start = max(0, size - 4000)
        return os.pread(fd, size - start, start).decode("utf-8", "replace")
    except (OSError, ValueError):
        return ""


def _follow(
    proc: ForkedChild,
    read_fd: int,
    log,  # noqa: ANN001
    plan: MeasurePlan,
    result: MeasureResult,
    t0: float,
    on_window: Callable[[Window], bool] | None,
    on_ready: Callable[[MeasureResult], None] | None = None,
    meter: HostLoadMeter | None = None,
    marks: dict[str, float] | None = None,
) -> None:
    """Read the child's messages into ``result`` until it ends, one way or another. ``meter``
    is started when the measured part begins (after the build and each warm-up epoch);
    ``marks`` gets the moments that divide the measurement into its phases
    (:func:`~loadersearch.measure._result.phases_of`)."""
    marks = {} if marks is None else marks
    stall = min(plan.stall_s, plan.timeout_s)
    deadline = t0 + plan.timeout_s
    last = t0
    state = FollowState()
    buf = b""
    fd_said: float | None = None  # when the child's output first said "too many open files"
    while True:
        now = time.monotonic()
        if now >= deadline:
            return _timeout(
                result,
                f"the measurement passed its {plan.timeout_s:g} s limit during {state.phase}",
                log,
            )
        if state.started and now - last >= stall:
            return _timeout(
                result,
                f"no progress for {stall:g} s during {state.phase}: a DataLoader worker or the "
                "training loop hung",
                log,
            )
        until = min(deadline, last + stall) if state.started else deadline
        ready, _, _ = select.select([read_fd], [], [], min(until - now, 1.0))
        if not ready:
            now = time.monotonic()
            if fd_said is None and log is not None and fd_limit_said(_stderr_tail(log)):
                fd_said = now
            if fd_said is not None and now - max(fd_said, last) >= FD_HANG_S:
                result.status, result.reason = INFEASIBLE, RESOURCE_LIMIT
                result.message = (
                    f"the measuring process ran out of file descriptors and made no progress "
                    f"for {FD_HANG_S:g} s during {state.phase}: {fd_problem()}"
                )
                return None
            continue
        chunk = os.read(read_fd, 65536)
        if not chunk:  # the child closed the pipe: it exited (or is exiting) without a result
            try:
                proc.wait(timeout=EXIT_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
            code = proc.returncode if proc.returncode is not None else 1
            result.status, result.reason, result.message = classify_exit(
                code, _stderr_tail(log), started=state.started
            )
            return None
        buf += chunk
        *lines, buf = buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            msg = json.loads(line)
            last = time.monotonic()
            if handle(msg, state, result, marks, t0, last, on_window, on_ready, meter):
                return None


def _record_host_load(result: MeasureResult, meter: HostLoadMeter) -> None:
    """How busy the machine was while ``result`` was measured (measure.hostload)."""
    try:
        load = meter.stop()
    except Exception:  # a probe must never end the measurement
        logger.debug("cannot read the host load", exc_info=True)
        return
    if load is None or load.wall_s <= 0:
        return
    result.outside_load = load.outside_load
    result.outside_share = load.outside_share
    result.steal_share = load.steal_share
    # a rate the machine may have lowered: a failed measurement has none
    result.busy_host = result.status in (OK, PRUNED) and load.busy()
    if result.busy_host:
        result.notes.append(
            f"measured on a busy machine: {load.describe()}; the figures may be low because "
            "of the machine, not the configuration"
        )


def _timeout(result: MeasureResult, message: str, log=None) -> None:  # noqa: ANN001
    # Workers that cannot open a file descriptor may hang rather than fail: name the limit.
    problem = limit_problem(_stderr_tail(log)) if log is not None else None
    if problem:
        message += f"; the measuring process said: {problem}"
    result.status, result.reason, result.message = INFEASIBLE, TIMEOUT, message


def _kill_group(proc: ForkedChild) -> None:
    """SIGKILL the child's process group (DataLoader workers included) and reap all of it."""
    pgid = proc.pid  # the child leads its own group
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
    deadline = time.monotonic() + REAP_TIMEOUT_S
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
            if pid:
                continue
        except ChildProcessError:  # none of the group is (or is yet) our child
            try:
                os.killpg(pgid, 0)
            except (ProcessLookupError, PermissionError):
                return
        if time.monotonic() > deadline:
            logger.warning(
                "processes of the measurement (process group %d) are still listed after %g s",
                pgid,
                REAP_TIMEOUT_S,
            )
            return
        time.sleep(0.01)
