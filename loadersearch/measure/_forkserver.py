"""A preloaded fork server for the measuring children: :class:`ForkServer`, :func:`serving`.

Started from scratch, a measuring child spent ~1.9 s of every ~4 s trial on the development
machine before measuring anything: the Python start, ``import torch``, the dataset's label
index. The fork server pays that once: started once (by :func:`serving`, around a whole
``run``), it imports torch and the measurement code, reads each workload's dataset index once,
and then forks one measuring process per measurement. The isolation stays what it was:

* every measurement is a fresh process, forked from the idle server (which never measures and
  never builds a DataLoader), leading a process group of its own that its DataLoader workers
  join; the parent kills the whole group, as before;
* no CUDA state is shared: the server imports torch but never initialises CUDA (it does not
  even ask ``torch.cuda.is_available()``, which initialises the driver), so each child
  initialises CUDA itself after the fork;
* peak memory is per configuration: the child's probes see the child and its workers only
  (pages it shares copy-on-write with the server count in its RSS, as the same libraries did
  when every child imported torch itself).

Protocol, on a ``SOCK_SEQPACKET`` socket pair (one message per send): a request is a JSON
object with the child's spec, environment and working directory, sent with two file
descriptors (``SCM_RIGHTS``): the write end of the measurement's pipe and the file that becomes
the child's stdout and stderr. The server answers ``{"pid": N}`` once it has forked and
``{"exit": N, "code": C}`` when that child has ended (``C`` as
:attr:`subprocess.Popen.returncode`: negative for a signal). The server dies with the process
that started it (``PR_SET_PDEATHSIG``), and its children die with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

from loadersearch._limits import address_space_problem, limit_problem
from loadersearch.errors import LoaderSearchError, ResourceLimitError
from loadersearch.measure._forkserver_process import MAX_MSG, MODULE
from loadersearch.storage import environ_without_storage
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)

_ENTRY = f"import sys; from {MODULE} import main; sys.exit(main())"
START_TIMEOUT_S = 120.0  # a server that is not ready by then (imports hang) is a crash
CLOSE_TIMEOUT_S = 5.0


class ForkServerError(LoaderSearchError, RuntimeError):
    """The fork server could not be started or stopped answering (exit 1: the run failed,
    not its input)."""

    exit_code = 1


class ForkServerTimeout(ForkServerError):
    """The fork server was not ready in time (its imports took too long)."""


class ForkedChild:
    """A measuring child forked by the server: the part of :class:`subprocess.Popen` that the
    runner uses (``pid``, ``returncode``, ``wait``)."""

    def __init__(self, server: ForkServer, pid: int) -> None:
        self._server = server
        self.pid = pid
        self.returncode: int | None = None

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child's end and return its exit code; raises
        :class:`subprocess.TimeoutExpired` after ``timeout`` seconds, as Popen does."""
        if self.returncode is None:
            self.returncode = self._server.wait_exit(self.pid, timeout)
        return self.returncode


class ForkServer:
    """The parent's handle on one fork server process. Thread-safe (a lock guards the
    socket); it serves any number of measurements, one after the other as a host measures."""

    def __init__(self, command: list[str] | None = None) -> None:
        # Not ``-m MODULE``: runpy would import this module a second time as __main__ (the
        # package imports it first). ``command`` lets a benchmark start a server of its own
        # (that, say, wraps the dataset) which ends by calling :func:`main`.
        self._command = command or [sys.executable, "-c", _ENTRY]
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()  # one reader of the socket at a time
        self._exits: dict[int, int] = {}  # pid -> exit code, read but not yet claimed
        self._pids: list[int] = []  # fork replies read while waiting for something else
        self._ready = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._sock is not None

    def start(self, timeout: float = START_TIMEOUT_S) -> ForkServer:
        """Start the server process and wait until it has imported everything; raises
        :class:`ForkServerTimeout` if that takes more than ``timeout`` seconds."""
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._proc = subprocess.Popen(
                [*self._command, "--fd", str(child.fileno())],
                pass_fds=(child.fileno(),),
                start_new_session=True,  # no terminal signals: the parent decides its end
                env=environ_without_storage(),  # the study's password stays out of its environ
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
            )
        except BaseException:
            parent.close()
            raise
        finally:
            child.close()
        self._sock = parent
        try:
            msg = self._recv(timeout)
        except BaseException:  # Ctrl-C while the server imports: it must not outlive us
            self.close()
            raise
        if msg is None or not msg.get("ready"):
            ended = self._sock is None
            proc = self._proc
            code = None
            if ended and proc is not None:  # it died while starting: how?
                with contextlib.suppress(subprocess.TimeoutExpired):
                    code = proc.wait(timeout=5.0)
            self.close()
            if msg is None and not ended:
                raise ForkServerTimeout(
                    f"the measurement fork server was not ready in {timeout:g} s"
                )
            said = str(msg.get("error") or "") if msg else ""
            limit = limit_problem(said, aborted=code is not None and code < 0)
            if not limit and not said and code not in (None, 0):
                # It died before it could say why (glibc: "cannot allocate memory for
                # thread-local data", exit 127): under an address-space limit, that limit.
                limit = address_space_problem("it died while loading")
            if limit:  # a process limit, not a bug: named with its fix
                raise ResourceLimitError(f"the measurement fork server could not start: {limit}.")
            raise ForkServerError(
                "the measurement fork server did not start"
                + (f" ({msg.get('error')})" if msg and msg.get("error") else "")
                + (f", exit status {code}" if code not in (None, 0) else "")
                + "; its output is above. Run again with --debug for details."
            )
        self._ready = True
        logger.debug("fork server %d ready in %.2f s", self._proc.pid, msg.get("seconds", 0))
        return self

    def spawn(
        self,
        spec_json: str,
        workload: WorkloadSpec,
        out_fd: int,
        log_fd: int,
        env: dict[str, str] | None = None,
    ) -> ForkedChild:
        """Fork a measuring child that runs ``spec_json`` (see :mod:`..child`), writing its
        messages on ``out_fd`` and its stdout/stderr to ``log_fd``, with the environment
        ``env`` (default this process's; its PYTHONPATH entries reach the child's
        ``sys.path``, as they would in a new interpreter), less ``$LOADERSEARCH_STORAGE``."""
        request = {
            "spec": spec_json,
            "workload": workload.to_dict(),
            "env": environ_without_storage(env),
            "cwd": os.getcwd(),
        }
        data = json.dumps(request).encode()
        with self._lock:
            if not self.alive:
                raise ForkServerError("the measurement fork server is not running")
            try:
                socket.send_fds(self._sock, [data], [out_fd, log_fd])
            except OSError as e:
                raise ForkServerError(f"the measurement fork server is gone ({e})") from e
            while not self._pids:
                if not self._read_one(None):
                    raise ForkServerError("the measurement fork server ended while forking")
            return ForkedChild(self, self._pids.pop(0))

    def wait_exit(self, pid: int, timeout: float | None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while pid not in self._exits:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(f"measuring child {pid}", timeout or 0)
                if not self._read_one(left):
                    if self._sock is None:  # the server died; it took its children with it
                        logger.warning("the measurement fork server ended unexpectedly")
                        return -signal.SIGKILL
            return self._exits.pop(pid)

    def _read_one(self, timeout: float | None) -> bool:
        """Read one message into ``_pids``/``_exits``; False on timeout or the server's end."""
        msg = self._recv(timeout)
        if msg is None:
            return False
        if "exit" in msg:
            self._exits[int(msg["exit"])] = int(msg["code"])
        elif "pid" in msg:
            self._pids.append(int(msg["pid"]))
        return True

    def _recv(self, timeout: float | None) -> dict[str, Any] | None:
        sock = self._sock
        if sock is None:
            return None
        ready, _, _ = select.select([sock], [], [], timeout)
        if not ready:
            return None
        data = sock.recv(MAX_MSG)
        if not data:  # the server is gone
            self._drop()
            return None
        return json.loads(data)

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        """Stop the server (it kills any child still running) and reap it."""
        self._drop()
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if not self._ready:  # still importing: it would notice the closed socket only later
            proc.kill()
        try:
            proc.wait(timeout=CLOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> ForkServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _Block:
    """The process's :func:`serving` state: how deep, with which command, and its server."""

    lock = threading.Lock()
    depth = 0
    command: list[str] | None = None
    server: ForkServer | None = None


@contextlib.contextmanager
def serving(command: list[str] | None = None) -> Iterator[None]:
    """Keep one fork server for every measurement of this block (a whole ``run``): started at
    the first measurement (a block that measures nothing costs nothing), restarted if it died,
    stopped at the end. Nested blocks share the outermost one's server. The server lives in
    this block only, so a dataset index it read is never older than the block (labels edited
    during a run are not seen until the next run). ``command``: see :class:`ForkServer`."""
    with _Block.lock:
        _Block.depth += 1
        if _Block.depth == 1:
            _Block.command = command
    try:
        yield
    finally:
        with _Block.lock:
            _Block.depth -= 1
            server = _Block.server if _Block.depth == 0 else None
            if _Block.depth == 0:
                _Block.server = None
        if server is not None:
            server.close()


@contextlib.contextmanager
def server_for_one(timeout: float = START_TIMEOUT_S) -> Iterator[ForkServer]:
    """The server of the enclosing :func:`serving` block (started now if it has none yet),
    or, outside any block, one started for this measurement only (then a measurement costs
    what a fresh process always cost). Raises :class:`ForkServerTimeout` when a server is not
    ready in ``timeout`` seconds."""
    with _Block.lock:
        if _Block.depth > 0:
            if _Block.server is None or not _Block.server.alive:
                if _Block.server is not None:
                    logger.warning("the measurement fork server died; starting another")
                    _Block.server.close()
                    _Block.server = None
                _Block.server = ForkServer(_Block.command).start(timeout)
            kept: ForkServer | None = _Block.server
        else:
            kept = None
    if kept is not None:
        yield kept
        return
    server = ForkServer().start(timeout)
    try:
        yield server
    finally:
        server.close()
