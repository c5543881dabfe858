"""One process at a time creates or initialises a study: a lock held by the database server
(PostgreSQL advisory lock, MySQL/MariaDB ``GET_LOCK``) or, for a SQLite file, an ``flock`` on a
file beside it. Each is released when its holder dies (the server drops the session, the kernel
the file lock), so a killed process never leaves a study locked.

Optuna writes a study's creation, each attribute and each enqueued trial in transactions of
their own, and its ``enqueue_trial(skip_if_exists=True)`` checks then acts: two runs starting
one study at once both enqueued the baselines. Under this lock every step of a study's set-up
(create, attributes, batch-size probe, baselines) is check-then-act by one process, and each
step checks what is already there, so a set-up cut short is completed by the next run.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

from loadersearch._filelock import lock_exclusive
from loadersearch.errors import StorageError

_logger = logging.getLogger(__name__)

POLL_S = 0.5  # server locks are polled (try-lock), so that Ctrl-C and SIGTERM stay prompt


def sqlite_lock_path(db_path: str) -> str:
    """The lock file beside a SQLite study database (created once, kept)."""
    return f"{db_path}.lock"


@contextlib.contextmanager
def file_lock(path: str, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """An exclusive ``flock`` on ``path`` (created if missing) for the ``with`` block."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise StorageError(
            f"cannot create the lock file {path} beside the study database: {e.strerror}. "
            "Check that its directory is writable, or choose another --storage."
        ) from e
    try:
        lock_exclusive(fd, path, StorageError, on_wait)
        yield
    finally:
        os.close(fd)  # releases the lock


def _key(name: str) -> tuple[int, str]:
    digest = hashlib.sha256(f"loadersearch-study:{name}".encode()).digest()
    # PostgreSQL takes a signed 64-bit key; MySQL a name of at most 64 characters.
    return int.from_bytes(digest[:8], "big", signed=True), f"loadersearch:{digest.hex()[:40]}"


def _lock_error(engine: Any, name: str, e: Exception) -> StorageError:
    from loadersearch.storage._url import first_line, redact_url, scrub

    url = engine.url.render_as_string(hide_password=False)
    return StorageError(
        scrub(
            f"cannot take the set-up lock of study {name!r} in {redact_url(url)}: "
            f"{first_line(e)}. Check that the database is reachable and run the same command "
            "again.",
            url,
        )
    )


@contextlib.contextmanager
def _server_lock(engine: Any, name: str, on_wait: Callable[[], None] | None) -> Iterator[None]:
    import sqlalchemy.exc
    from sqlalchemy import text

    number, label = _key(name)
    if engine.dialect.name == "postgresql":
        take = text("SELECT pg_try_advisory_lock(:k)").bindparams(k=number)
        give = text("SELECT pg_advisory_unlock(:k)").bindparams(k=number)
    else:  # mysql / mariadb: GET_LOCK waits up to its timeout on the server, then says 0
        take = text("SELECT GET_LOCK(:k, 1)").bindparams(k=label)
        give = text("SELECT RELEASE_LOCK(:k)").bindparams(k=label)
    conn = None
    try:
        conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        waited = False
        while not conn.execute(take).scalar():
            if not waited and on_wait is not None:
                on_wait()
            waited = True
            if engine.dialect.name == "postgresql":
                time.sleep(POLL_S)
    except sqlalchemy.exc.DBAPIError as e:
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.invalidate()
        raise _lock_error(engine, name, e) from None
    try:
        yield
    finally:
        try:
            conn.execute(give)
            conn.close()
        except Exception:  # a dead session has released its locks already
            _logger.debug("releasing the set-up lock of %s failed", name, exc_info=True)
            with contextlib.suppress(Exception):
                conn.invalidate()


@contextlib.contextmanager
def study_lock(
    storage: Any, name: str, on_wait: Callable[[], None] | None = None
) -> Iterator[None]:
    """Hold the set-up lock of study ``name`` in ``storage`` (an ``RDBStorage``) for the
    ``with`` block; ``on_wait()`` is called once if another process holds it."""
    from loadersearch.storage._sqlite import sqlite_path

    dialect = storage.engine.dialect.name
    if dialect == "sqlite":
        path = sqlite_path(str(storage.url))
        if path is None:  # in-memory: one process only
            yield
            return
        with file_lock(sqlite_lock_path(path), on_wait):
            yield
        return
    if dialect in ("postgresql", "mysql", "mariadb"):
        with _server_lock(storage.engine, name, on_wait):
            yield
        return
    _logger.debug("no study lock for the %s backend", dialect)
    yield
