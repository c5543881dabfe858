"""A full disk under a SQLite study database: checked before a run starts, and named (which
file system, how much is free, what to do) when a write fails for it."""

from __future__ import annotations

import errno
import os

from loadersearch.errors import DiskFullError
from loadersearch.storage._sqlite import filesystem_type

# SQLite in WAL mode appends every transaction to the -wal file and checkpoints it back every
# 1000 pages (4 MiB); the database grows by a few KiB a trial. Below this much free space a
# run would fail within minutes.
MIN_FREE_BYTES = 8 * 2**20


def _mount_point(path: str) -> str:
    path = os.path.realpath(path)
    while not os.path.ismount(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def describe_space(path: str) -> str:
    """``"tmpfs mounted at /data: 12.0 KiB free of 2.0 MiB"`` for the file system of ``path``."""
    directory = os.path.dirname(os.path.abspath(path)) or "."
    while not os.path.isdir(directory) and os.path.dirname(directory) != directory:
        directory = os.path.dirname(directory)
    mount = _mount_point(directory)
    fstype = filesystem_type(directory) or "file system"
    try:
        st = os.statvfs(directory)
    except OSError:
        return f"{fstype} mounted at {mount}"
    return (
        f"{fstype} mounted at {mount}: {_size(st.f_bavail * st.f_frsize)} free of "
        f"{_size(st.f_blocks * st.f_frsize)}"
    )


def free_bytes(path: str) -> int | None:
    directory = os.path.dirname(os.path.abspath(path)) or "."
    try:
        st = os.statvfs(directory)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def full_message(path: str, what: str = "the study database") -> str:
    return (
        f"the disk holding {what} {path} is full ({describe_space(path)}). Free some space "
        "there, or move the study (copy the file while nothing runs, or start a new one with "
        "--storage on another disk), then run the same command again to resume: the trial cut "
        "short is re-run."
    )


def check_free_space(path: str, minimum: int = MIN_FREE_BYTES) -> None:
    """Refuse to start on a SQLite file whose file system has less than ``minimum`` free."""
    free = free_bytes(path)
    if free is not None and free < minimum:
        raise DiskFullError(
            f"only {_size(free)} is free for the study database {path} "
            f"({describe_space(path)}); SQLite needs a few MiB (at least {_size(minimum)}) to "
            "write a study. Free some space there or choose another --storage."
        )


def is_disk_full(e: BaseException | None) -> bool:
    """Whether ``e`` (or its cause) is "database or disk is full" / "No space left"."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(e).lower()
        if "database or disk is full" in text or "no space left on device" in text:
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def disk_full_error(e: BaseException, path: str | None) -> DiskFullError | None:
    """A :class:`DiskFullError` for ``e`` when it says the disk under ``path`` is full."""
    if path is None or not is_disk_full(e):
        return None
    return DiskFullError(full_message(path))
