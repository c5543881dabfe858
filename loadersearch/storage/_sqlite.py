"""SQLite specifics: where the file is, whether its file system keeps locks, WAL mode."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from typing import Any

_logger = logging.getLogger(__name__)

# File systems where SQLite's file locks are unreliable (Optuna and SQLite both warn).
NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb",
        "smb3",
        "smbfs",
        "fuse.sshfs",
        "sshfs",
        "lustre",
        "gpfs",
        "beegfs",
        "glusterfs",
        "fuse.glusterfs",
        "ceph",
        "fuse.ceph",
        "9p",
        "afs",
        "ocfs2",
        "gfs2",
        "fuse.s3fs",
        "fuse.gcsfuse",
        "fuse.rclone",
        "davfs",
        "fuse.juicefs",
    }
)

_SERVER_ADVICE = (
    "Use a PostgreSQL or MySQL server for studies shared by several machines "
    "(--storage postgresql+psycopg://USER@HOST/DB), as Optuna's documentation advises."
)


def sqlite_path(url: str) -> str | None:
    """The database file of a SQLite URL; None for other backends and in-memory databases."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return path


def read_only_filesystem(path: str) -> bool:
    """Whether the file system holding ``path`` is mounted read-only."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def wal_format(path: str) -> bool:
    """Whether the SQLite file ``path`` is in WAL mode (its header's read and write versions
    are 2; rollback-journal files have 1)."""
    try:
        with open(path, "rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return header[:16] == b"SQLite format 3\0" and header[18:20] == b"\x02\x02"


def _readonly_uri(path: str) -> str:
    """The ``mode=ro`` URI of ``path``, ``immutable`` when nothing beside the file is needed.

    A read-only connection to a WAL-mode file creates its -wal and -shm files (SQLite needs
    the shared-memory index) and, being read-only, cannot remove them when it closes: a
    ``report`` left both behind. Where the file's WAL holds nothing (no -wal, or an empty
    one: every write is checkpointed into the file, as a finished run leaves it), the file
    alone is the database, and ``immutable`` reads it with no lock and no file beside it. A
    writer that starts meanwhile appends to the WAL and leaves the file as it is until it
    checkpoints (1000 pages later, or as it closes), so a read of one session (each is a
    connection of its own) sees the state before it. A WAL with
    content (a run writing now, or one killed before its checkpoint) is read through its -wal
    and -shm as they are. A rollback-journal file is never ``immutable`` (its writers change
    the file itself), except on read-only media, where nobody writes it."""
    from urllib.parse import quote

    absolute = os.path.abspath(path)
    wal, shm = f"{absolute}-wal", f"{absolute}-shm"
    wal_content = os.path.isfile(wal) and os.path.getsize(wal) > 0
    if read_only_filesystem(os.path.dirname(absolute)):
        # No -shm can be made here: without one, the WAL's content cannot be read at all.
        immutable = not (wal_content and os.path.exists(shm))
    else:
        immutable = wal_format(absolute) and not wal_content
    return f"file:{quote(absolute)}?mode=ro" + ("&immutable=1" if immutable else "")


def sqlite_readonly_connect(path: str) -> Any:
    """A ``creator`` for SQLAlchemy that opens the SQLite file ``path`` read-only (``mode=ro``):
    SQLite then writes nothing to it and never changes its journal mode. Each connection
    decides anew whether it can be ``immutable`` (see :func:`_readonly_uri`), so a
    dashboard opened on a finished study reads a run started later through its WAL (with
    ``poolclass=NullPool`` every session is a new connection)."""
    import sqlite3

    from loadersearch.storage._settings import SQLITE_BUSY_TIMEOUT

    def connect() -> Any:
        return sqlite3.connect(
            _readonly_uri(path), uri=True, timeout=SQLITE_BUSY_TIMEOUT, check_same_thread=False
        )

    return connect


def filesystem_type(path: str, mounts: str = "/proc/mounts") -> str | None:
    """The type of the file system holding ``path`` (e.g. ``ext4``, ``nfs4``), read from
    ``mounts``; None when it cannot be told."""
    path = os.path.realpath(path)
    best: tuple[int, str] | None = None
    try:
        with open(mounts) as f:
            for line in f:
                fields = line.split()
                if len(fields) < 3:
                    continue
                # /proc/mounts escapes spaces and tabs in mount points as octal.
                point = fields[1].encode().decode("unicode_escape")
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and (best is None or len(point) > best[0]):
                    best = (len(point), fields[2])
    except OSError:
        return None
    return best[1] if best else None


def is_network_filesystem(fstype: str | None) -> bool:
    if not fstype:
        return False
    return fstype in NETWORK_FILESYSTEMS or fstype.split(".")[-1] in NETWORK_FILESYSTEMS


def storage_warnings(
    url: str, hosts: Iterable[str] = (), *, mounts: str = "/proc/mounts"
) -> list[str]:
    """Why this storage may lose or corrupt a shared study, for the CLI to show; empty when
    fine. SQLite on a network file system, or a SQLite study with trials from several hosts
    (``hosts``: the host names recorded on its trials), is unsafe: its file locks do not
    hold across machines. Each warning is also logged."""
    path = sqlite_path(url)
    if path is None:
        return []
    found: list[str] = []
    fstype = filesystem_type(os.path.dirname(os.path.abspath(path)) or ".", mounts)
    if is_network_filesystem(fstype):
        found.append(
            f"the SQLite study database {path} is on a network file system ({fstype}), where "
            "SQLite's file locks may not work: concurrent writers can corrupt it or fail with "
            f"'database is locked'. {_SERVER_ADVICE}"
        )
    distinct = sorted(set(h for h in hosts if h))
    if len(distinct) > 1:
        found.append(
            f"the SQLite study database {path} has trials from {len(distinct)} hosts "
            f"({', '.join(distinct[:5])}{', ...' if len(distinct) > 5 else ''}): SQLite is "
            f"for one machine; sharing its file between machines is unsafe. {_SERVER_ADVICE}"
        )
    for message in found:
        _logger.warning("%s", message)
    return found


def use_sqlite_wal(engine: Any) -> None:
    """Write-ahead logging and ``synchronous=NORMAL`` on a local SQLite file.

    Each trial writes ~40 small transactions (parameters, one intermediate value per window,
    ~25 user attributes); in SQLite's default rollback-journal mode each one fsyncs the file
    several times, which made the study's own overhead ~0.7 s a trial (benchmark_search:
    25 user attributes 429 ms -> 55 ms with WAL). WAL keeps readers (optuna-dashboard) from
    blocking the writer too. It needs shared memory between the processes using the file,
    so it is skipped on a network file system (where SQLite is unsafe anyway).
    """
    from sqlalchemy import event, text

    def _pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    event.listen(engine, "connect", _pragmas)
    engine.dispose()  # connections opened before the listener get it on reconnect
    try:
        with engine.connect() as conn:  # persistent in the file: once is enough
            conn.execute(text("PRAGMA journal_mode=WAL"))
    except Exception as e:  # a busy or read-only file keeps its mode; still correct
        _logger.debug("could not switch %s to WAL: %s", engine.url, e)
