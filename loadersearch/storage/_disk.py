"""A full or read-only disk under a SQLite study database: checked before a run starts, and
named (which file system, how much is free, what to do) when a write fails for it."""

from __future__ import annotations

import errno
import os

from loadersearch._units import fmt_bytes
from loadersearch.errors import DiskFullError, StorageError
from loadersearch.storage._artifacts import ARTIFACTS_ENV
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
        f"{fstype} mounted at {mount}: {fmt_bytes(st.f_bavail * st.f_frsize)} free of "
        f"{fmt_bytes(st.f_blocks * st.f_frsize)}"
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
            f"only {fmt_bytes(free)} is free for the study database {path} "
            f"({describe_space(path)}); SQLite needs a few MiB (at least {fmt_bytes(minimum)}) "
            "to write a study. Free some space there or choose another --storage."
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


def _existing(path: str) -> str:
    """``path``, or its nearest ancestor that exists (where it would be created)."""
    path = os.path.abspath(path)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return path


def unwritable(path: str) -> tuple[str, str] | None:
    """Why ``path`` (a file or directory, created if missing) cannot be written: ``(the
    directory or file that stops it, "is on a read-only file system" or "is not writable by
    this user")``, or None when it can. (As root a mode does not stop writes, a read-only
    mount does; ``access`` tells both.)"""
    target = _existing(path)
    if os.path.isfile(target):  # the file itself, and its directory for the journal
        blocked = next((p for p in (target, os.path.dirname(target)) if not _writable(p)), None)
    else:
        blocked = None if _writable(target) else target
    if blocked is None:
        return None
    try:
        read_only = bool(os.statvfs(blocked).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    return (
        blocked,
        "is on a read-only file system" if read_only else "is not writable by this user",
    )


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK | (os.X_OK if os.path.isdir(path) else 0))


def check_writable(db_path: str | None, artifacts: str | None) -> None:
    """Refuse, before anything is created, a run whose SQLite database ``db_path`` (with the
    -wal and -shm files SQLite writes beside it) or artifacts directory ``artifacts`` cannot
    be written; one line naming both, the directory that stops them and the fix."""
    blocked = [
        (what, path, why)
        for what, path in (("db", db_path), ("artifacts", artifacts))
        if path is not None and (why := unwritable(path)) is not None
    ]
    if not blocked:
        return
    where, reason = blocked[0][2]
    whats = [what for what, _, _ in blocked]
    names = {
        "db": f"the study database {db_path}",
        "artifacts": f"its artifacts directory {artifacts}",
    }
    if whats == ["artifacts"]:
        names["artifacts"] = f"the study's artifacts directory {artifacts}"
    fixes = []
    if "db" in whats:
        fixes.append(
            "put the study on a writable disk with --storage sqlite:///DIR/NAME.db (its "
            "artifacts directory goes beside it)"
        )
    if "artifacts" in whats:
        fixes.append(f"set ${ARTIFACTS_ENV}=DIR to a writable directory for the artifacts")
    readers = ""
    if db_path is not None and os.path.isfile(db_path):
        readers = " (`report`, `best` and `dashboard` read the study where it is.)"
    raise StorageError(
        f"a run writes {' and '.join(names[w] for w in whats)}, and {where} {reason}: "
        f"{', or '.join(fixes)}.{readers}"
    )
