"""The fork server's own process, started by
:class:`~loadersearch.measure._forkserver.ForkServer` (which describes the protocol): it
imports torch and the measurement code once (:func:`main`), then forks one measuring child
per request (:func:`serve`), each a fresh process leading a process group of its own, and
reports each child's end. It never measures, never builds a DataLoader and never initialises
CUDA.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import sys
import time
from typing import Any

from loadersearch.measure._process import die_with_parent
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)

MODULE = "loadersearch.measure._forkserver_process"
MAX_MSG = 1 << 20  # one request: the spec JSON and the environment
# Imported by the server before its first fork, so that no child imports them again.
_PRELOAD_MODULES = (
    "torch",
    "torch.utils.data",
    "numpy",
    "PIL.Image",
    "psutil",
    "loadersearch.measure._child",
    # and what classifying a failure imports: a child out of file descriptors cannot open a
    # module to say so (it would die with "could not run" instead of the configuration's cause)
    "loadersearch.measure._cuda",
    "loadersearch.measure._failures",
    "loadersearch.measure._loop",
    "loadersearch.measure._probes",
    "loadersearch.measure._projection",
    "loadersearch.workload",
    "loadersearch.workload._augment",
    "loadersearch.workload._datasets",
    "loadersearch.workload._emulated",
    "loadersearch.workload._loss",
    "loadersearch.workload._yolov4_tiny",
)


def _preload(workload: dict[str, Any], done: set[str]) -> None:
    """Read the dataset index of ``workload`` once (no CUDA, no img_size needed)."""
    try:
        spec = WorkloadSpec.from_dict(workload)
        from loadersearch.workload import preload_workload

        key = json.dumps([spec.data, spec.data_format, spec.data_split, spec.skip_bad_samples])
        if key not in done:
            done.add(key)
            preload_workload(spec)
    except Exception:  # the child reads the index itself and reports the problem properly
        logger.debug("preloading %s failed", workload, exc_info=True)


def _run_child(sock: socket.socket, request: dict[str, Any], out_fd: int, log_fd: int) -> None:
    """In the forked child: become a measuring process and exit with its code (never return)."""
    code = 1
    try:
        os.setpgid(0, 0)  # lead a process group of our own (the server also sets it)
        server = os.getppid()
        sock.close()
        from loadersearch.measure import _child as child

        die_with_parent()  # the parent is now the server
        if os.getppid() != server:  # the server died before the line above took effect
            os._exit(1)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        for fd in (devnull, log_fd):
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        # The server's sys.path was made from its own start's PYTHONPATH: entries added since
        # (a user pipeline's module folders) are put where a new interpreter would have them.
        extra = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[1:1] = [p for p in extra if p not in sys.path]
        with os.fdopen(out_fd, "w", encoding="utf-8") as out:
            code = child.run(out, request["spec"])
    except BaseException:  # noqa: BLE001 - whatever happens, the process must end here
        import traceback

        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _fork(sock: socket.socket, request: dict[str, Any], fds: list[int]) -> int:
    out_fd, log_fd = fds
    pid = os.fork()
    if pid == 0:
        _run_child(sock, request, out_fd, log_fd)
    with contextlib.suppress(OSError):  # closes the race with the child's own setpgid
        os.setpgid(pid, pid)
    os.close(out_fd)
    os.close(log_fd)
    return pid


def serve(sock: socket.socket) -> None:
    """The server's loop: fork a child per request, report each child's end; stop (killing
    the children still running) when the parent closes its end of the socket."""
    children: dict[int, int] = {}  # pidfd -> pid
    preloaded: set[str] = set()
    try:
        while True:
            ready, _, _ = select.select([sock, *children], [], [])
            for fd in ready:
                if fd is sock:
                    data, fds, _, _ = socket.recv_fds(sock, MAX_MSG, 2)
                    if not data:
                        return
                    request = json.loads(data)
                    _preload(request["workload"], preloaded)
                    pid = _fork(sock, request, fds)
                    children[os.pidfd_open(pid)] = pid
                    sock.send(json.dumps({"pid": pid}).encode())
                else:
                    pid = children.pop(fd)
                    os.close(fd)
                    _, status = os.waitpid(pid, 0)
                    code = os.waitstatus_to_exitcode(status)
                    sock.send(json.dumps({"exit": pid, "code": code}).encode())
    finally:
        for fd, pid in children.items():
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with contextlib.suppress(OSError):
                os.waitpid(pid, 0)
            os.close(fd)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog=MODULE)
    parser.add_argument("--fd", type=int, required=True, help="the SOCK_SEQPACKET socket")
    args = parser.parse_args(argv)
    die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent ends us by closing the socket
    sock = socket.socket(fileno=args.fd)
    t0 = time.perf_counter()
    try:
        import importlib

        for name in _PRELOAD_MODULES:
            importlib.import_module(name)
        ready = {"ready": True, "seconds": time.perf_counter() - t0}
    except Exception as e:  # noqa: BLE001 - reported to the parent, which raises
        ready = {"ready": False, "error": f"{type(e).__name__}: {e}"}
    try:
        sock.send(json.dumps(ready).encode())
        if ready["ready"]:
            serve(sock)
    except (BrokenPipeError, ConnectionResetError):  # the parent is gone
        pass
    # No interpreter teardown (torch's takes a while): the parent waits for this exit.
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
