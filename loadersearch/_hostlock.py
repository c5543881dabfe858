"""One measuring process per host: concurrent measurements on one machine share its CPUs,
page cache and GPU, and corrupt each other's numbers.

:func:`measurement_lock` takes an exclusive ``flock`` on a file in a host-local directory
(``$LOADERSEARCH_LOCK_DIR``, default the system temporary directory, shared by all users of
the host). The kernel releases the lock when its holder dies, even by ``kill -9``, so a crash
never leaves a stale lock. The file name carries the host name (``$LOADERSEARCH_HOST``
overrides it), so two host identities on one machine do not block each other (tests) and a
lock directory shared by mistake still separates machines. A child process that inherits the
file (fork) keeps the lock alive until it exits too: it is still measuring.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import tempfile
from collections.abc import Iterator

from loadersearch._filelock import lock_exclusive
from loadersearch._hardware import host_name
from loadersearch.errors import StudyError

_logger = logging.getLogger(__name__)

LOCK_DIR_ENV = "LOADERSEARCH_LOCK_DIR"

# (pid, path) -> nesting depth of the locks this process holds: a nested measurement_lock in
# the same process is a no-op (a second flock on a new descriptor would wait on ourselves).
_held: dict[tuple[int, str], int] = {}


def lock_path(host: str | None = None) -> str:
    """The lock file of ``host`` (default: this host, see :func:`host_name`)."""
    directory = os.environ.get(LOCK_DIR_ENV) or tempfile.gettempdir()
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", host or host_name())
    return os.path.join(directory, f"loadersearch-measure-{safe}.lock")


def _open(path: str) -> int:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    try:
        return os.open(path, os.O_RDWR)
    except FileNotFoundError:
        pass
    except PermissionError:  # created by another user: flock works on a read-only fd too
        return os.open(path, os.O_RDONLY)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except PermissionError:
        return os.open(path, os.O_RDONLY)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)  # let other users of this host take the lock after us
    return fd


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 64, 0).decode(errors="replace").strip()
    except OSError:
        return "unknown pid"
    return f"pid {text}" if text.isdigit() else "unknown pid"


@contextlib.contextmanager
def measurement_lock(wait: bool = True) -> Iterator[str]:
    """Hold this host's measurement lock for the ``with`` block; yields the lock file path.

    When another process holds it: with ``wait`` True, log once and wait; with ``wait``
    False, raise :class:`StudyError` naming its pid. Re-entrant within one process: a run
    that holds the lock throughout (``--no-wait``) measures its trials under it.
    """
    path = lock_path()
    key = (os.getpid(), path)
    if _held.get(key):
        _held[key] += 1
        try:
            yield path
        finally:
            _held[key] -= 1
        return
    try:
        fd = _open(path)
    except OSError as e:
        raise StudyError(
            f"cannot open the host measurement lock {path}: {e.strerror}. Set "
            f"${LOCK_DIR_ENV} to a writable host-local directory."
        ) from e

    def busy() -> None:
        holder = _holder(fd)
        if not wait:
            raise StudyError(
                f"another loadersearch measurement is running on this host ({holder}); "
                "two measurements at once on one machine corrupt each other's numbers. "
                "Run again without --no-wait to wait for it, or run on another machine."
            )
        _logger.warning(
            "Another loadersearch measurement is running on this host (%s); waiting for it "
            "to finish before measuring.",
            holder,
        )

    try:
        if lock_exclusive(fd, path, StudyError, busy):
            _logger.info("Got the host measurement lock %s.", path)
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, str(os.getpid()).encode(), 0)
        _held[key] = 1
        try:
            yield path
        finally:
            _held.pop(key, None)
    finally:
        # Closing releases the lock; the file stays for the next process.
        os.close(fd)
