"""SQLite specifics: where the file is, whether its file system keeps locks, WAL mode."""

from __future__ import annotations

import logging
import os
import sqlite3
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

SQLITE_BUSY_TIMEOUT = 60  # seconds SQLite waits on a lock held by another process

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


def sqlite_readonly_connect(path: str) -> Any:
    """A ``creator`` for SQLAlchemy that opens the SQLite file ``path`` read-only (``mode=ro``):
    SQLite then writes nothing to it and never changes its journal mode.

    A read-only connection to a WAL-mode file needs the file's -wal and -shm (the WAL's
    shared-memory index) and creates them when they are missing, but, being read-only, cannot
    remove them as it closes: a ``report`` left both beside a finished study. So a connection
    that found neither removes them after it closes the way SQLite does: through a connection
    that may write, opened only to be closed, which checkpoints nothing (the read-only one
    wrote nothing) and deletes them only when no other process has the file open (a run
    writing now keeps its WAL). The file itself is left byte for byte as it was. (``immutable``
    would need no -shm, but reads with no locks: a writer's checkpoint in the middle of a read
    gave "database disk image is malformed"; it is used only on read-only media, which nobody
    writes.) With ``poolclass=NullPool`` each session's connection closes when it ends."""
    from urllib.parse import quote

    absolute = os.path.abspath(path)
    beside = (f"{absolute}-wal", f"{absolute}-shm")

    class ReadOnlyConnection(sqlite3.Connection):
        made_wal_files = False

        def close(self) -> None:
            super().close()
            if self.made_wal_files and any(os.path.exists(p) for p in beside):
                _close_wal_files(absolute)

    def connect() -> Any:
        read_only_media = read_only_filesystem(os.path.dirname(absolute))
        had_wal_files = any(os.path.exists(p) for p in beside)
        # On read-only media no -shm can be made: without one the WAL cannot be read at all,
        # so the file is read as it is, unless a -wal with content and its -shm are there.
        live = all(os.path.isfile(p) for p in beside) and os.path.getsize(beside[0]) > 0
        immutable = read_only_media and not live
        uri = f"file:{quote(absolute)}?mode=ro" + ("&immutable=1" if immutable else "")
        conn = sqlite3.connect(
            uri,
            uri=True,
            timeout=SQLITE_BUSY_TIMEOUT,
            check_same_thread=False,
            factory=ReadOnlyConnection,
        )
        conn.made_wal_files = not had_wal_files and not read_only_media
        return conn

    return connect


def _close_wal_files(path: str) -> None:
    """Let SQLite remove the -wal and -shm of ``path`` if no other connection uses them: a
    connection that may write, closed after one read (closing the last connection of a WAL
    file checkpoints it and deletes both)."""
    from urllib.parse import quote

    try:
        conn = sqlite3.connect(f"file:{quote(path)}?mode=rw", uri=True, timeout=1)
        try:
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        finally:
            conn.close()
    except sqlite3.Error as e:  # busy, or not ours to write: the files stay, nothing is lost
        _logger.debug("left the -wal and -shm of %s: %s", path, e)


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
