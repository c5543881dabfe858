"""Opening study storage: the one place that builds an ``RDBStorage``, and the study's artifact
store beside it."""

from __future__ import annotations

import logging
import os
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar

from loadersearch.errors import StorageError, StudyError
from loadersearch.storage._artifacts import artifact_dir
from loadersearch.storage._disk import check_free_space, check_writable, disk_full_error
from loadersearch.storage._lock import file_lock, sqlite_lock_path
from loadersearch.storage._retrying import retrying_storage_class, server_full
from loadersearch.storage._settings import (
    DEFAULT_RETRY_SECONDS,
    RETRY_ENV,
    engine_kwargs,
    float_env,
    heartbeat_settings,
    readonly_engine_kwargs,
)
from loadersearch.storage._sqlite import sqlite_path, storage_warnings, use_sqlite_wal
from loadersearch.storage._url import (
    check_url,
    first_line,
    redact_url,
    resolve_storage_url,
    safe_cause,
    scrub,
)

if TYPE_CHECKING:
    import optuna
    from optuna.artifacts import FileSystemArtifactStore

_logger = logging.getLogger(__name__)
T = TypeVar("T")


def open_storage(
    url: str | None = None,
    *,
    heartbeat: bool = True,
    heartbeat_interval: int | None = None,
    grace_period: int | None = None,
    retry_seconds: float | None = None,
) -> optuna.storages.RDBStorage:
    """Open (and for SQLite, create) the storage at ``url``.

    ``heartbeat``: record trial heartbeats, so that a trial whose process died is failed and
    re-run (``RetryHeartbeatStaleTrialCallback``) by the next worker; interval and grace
    period default to ``$LOADERSEARCH_HEARTBEAT`` or 30 s / 120 s. ``retry_seconds``: how
    long a call keeps retrying while the database is unreachable (default
    ``$LOADERSEARCH_DB_RETRY_SECONDS`` or 120). The returned storage has a ``warnings`` list
    (see :func:`storage_warnings`) for the CLI to show. Raises :class:`StorageError` with the
    redacted URL and the fix when the storage cannot be opened; opening is not retried, so a
    wrong URL fails fast, except while the server has no free connection (see
    :func:`_while_full`). A SQLite file is created under a lock beside it (two processes
    creating Optuna's tables at once collide), and refused when its file system has too
    little free space for SQLite's write-ahead log.
    """
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    url = resolve_storage_url(url)
    check_url(url)
    path = sqlite_path(url)
    if path is not None:
        check_run_storage(url, artifacts=False)
        directory = os.path.dirname(path)
        if directory:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as e:
                raise StorageError(
                    f"cannot create the directory {directory!r} for the study database "
                    f"{url}: {e.strerror}. Choose another --storage path."
                ) from e
        check_free_space(path)
    import warnings

    kwargs: dict[str, Any] = {"engine_kwargs": engine_kwargs(url)}
    default_interval, default_grace = heartbeat_settings()
    with warnings.catch_warnings():
        # Heartbeats and the retry callback are marked experimental in Optuna; we rely on
        # them deliberately, so the warning would only confuse users.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        if heartbeat:
            kwargs.update(
                heartbeat_interval=heartbeat_interval or default_interval,
                grace_period=grace_period or default_grace,
                heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=3),
            )
        if path is not None and (not os.path.exists(path) or os.path.getsize(path) == 0):
            # A new file: the processes creating Optuna's tables in it take turns. (An
            # existing file is opened without it: a run setting up a study holds this lock
            # for as long as that takes; a late schema race is retried in _construct.)
            with file_lock(sqlite_lock_path(path)):
                storage = _construct(url, kwargs)
        else:
            storage = _construct(url, kwargs)
    storage.retry_seconds = (
        float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS) if retry_seconds is None else retry_seconds
    )
    storage.warnings = storage_warnings(url)
    if path is not None and not any("network file system" in w for w in storage.warnings):
        use_sqlite_wal(storage.engine)
    return storage


SCHEMA_RACE_TRIES = 5  # another process creating the same tables at once: try again


def _while_full(url: str, open_once: Callable[[], T]) -> T:
    """``open_once()``, tried again with back-off while the server refuses the connection for
    having none free (``max_connections``; :func:`server_full`), for up to
    ``$LOADERSEARCH_DB_RETRY_SECONDS``: a Slurm array starting more workers than the server
    takes at once then joins as connections free up (each finished worker frees its own)
    instead of failing. Any other error is raised at once."""
    deadline = time.monotonic() + float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS)
    delay = 0.5
    logged = False
    while True:
        try:
            return open_once()
        except Exception as e:
            full = server_full(e)
            left = deadline - time.monotonic()
            if full is None or left <= 0:
                raise
            if not logged:
                logged = True
                _logger.warning(
                    "The database server of %s has no free connection (%s); waiting up to "
                    "%g s for one.",
                    redact_url(url),
                    scrub(first_line(full), url),
                    float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS),
                )
            time.sleep(min(delay * (0.5 + random.random()), left))
            delay = min(delay * 2, 10.0)


def _construct(url: str, kwargs: dict[str, Any]) -> optuna.storages.RDBStorage:
    """The storage object, with errors turned into one :class:`StorageError` line."""
    for attempt in range(1, SCHEMA_RACE_TRIES + 1):
        try:
            return _while_full(url, lambda: retrying_storage_class()(url, **kwargs))
        except ImportError as e:
            raise StorageError(
                f"the database driver for {redact_url(url)} is not installed ({first_line(e)})"
                ". loadersearch installs psycopg (postgresql+psycopg://) and PyMySQL "
                "(mysql+pymysql://); use one of those URL schemes or install your driver."
            ) from e
        except Exception as e:
            if attempt < SCHEMA_RACE_TRIES and _schema_race(e):
                time.sleep(0.1 * attempt)  # let the other process finish its tables
                continue
            raise _open_error(url, e) from safe_cause(url, e)
    raise AssertionError("unreachable")  # pragma: no cover


def _schema_race(e: BaseException) -> bool:
    """Whether ``e`` says another process created Optuna's tables (or their version row)
    while this one did: then the tables are there and opening again succeeds."""
    import sqlalchemy.exc as sa_exc

    text = str(e).lower()
    return isinstance(e, sa_exc.IntegrityError) or (
        isinstance(e, sa_exc.DBAPIError) and ("already exists" in text or "duplicate" in text)
    )


def _open_error(url: str, e: BaseException) -> StorageError:
    path = sqlite_path(url)
    disk_full = disk_full_error(e, path)
    if disk_full is not None:
        return disk_full
    full = server_full(e)
    if full is not None:  # Optuna's own wrapper would say "invalid data in the commit"
        return StorageError(
            scrub(
                f"the database server of {redact_url(url)} has no free connection "
                f"({first_line(full)}), and had none for "
                f"{float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS):g} s. Each loadersearch run or "
                "worker holds up to 2 connections (its trials and their heartbeat): raise the "
                "server's max_connections (PostgreSQL's default is 100, MariaDB's 151), start "
                "fewer workers at once, or put a connection pooler (PgBouncer) in front of "
                f"the server. ${RETRY_ENV} sets how long to wait.",
                url,
            )
        )
    if path is not None:  # a file, not a server: say what to check about a file
        advice = (
            f"Check that {path} is a SQLite database loadersearch or Optuna wrote and that "
            "it and its directory are readable and writable, or choose another --storage."
        )
    else:
        advice = (
            "Check that the server is running and the URL is right (--storage or "
            "$LOADERSEARCH_STORAGE)."
        )
    return StorageError(
        scrub(f"cannot open the study storage {redact_url(url)}: {first_line(e)}. {advice}", url)
    )


# Optuna's tables: a database without them holds no study, and is refused unchanged.
OPTUNA_TABLES = frozenset({"studies", "trials", "version_info"})


def studies_listed(names: list[str], most: int = 20) -> str:
    """The study names a refusal lists (``a, b, ...`` past ``most``; ``none``)."""
    ordered = sorted(names)
    return ", ".join(ordered[:most]) + (", ..." if len(ordered) > most else "") or "none"


def open_existing_storage(url: str | None = None) -> optuna.storages.RDBStorage:
    """Open a storage that must already hold studies, read-only where the backend allows it
    (for ``report``, ``best``, ``dashboard``): nothing is created, no table, no file, no
    journal mode change. A SQLite file is opened with SQLite's ``mode=ro`` (the -wal and -shm
    a read-only connection makes are removed as it closes; ``immutable`` on read-only
    media), a PostgreSQL or MySQL session is a read-only one. A SQLite file that does not
    exist, or a database without Optuna's tables, is refused with :class:`StudyError` and
    left as it was."""
    url = resolve_storage_url(url)
    check_url(url)
    path = sqlite_path(url)
    if path is not None and not os.path.isfile(path):
        raise StudyError(
            f"no study database at {redact_url(url)}; run `loadersearch run` first or pass "
            "--storage."
        )
    kwargs = readonly_engine_kwargs(url)
    _require_optuna_schema(url, kwargs)
    storage = _construct(url, {"engine_kwargs": kwargs, "skip_table_creation": True})
    storage.retry_seconds = float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS)
    storage.warnings = []
    return storage


def _require_optuna_schema(
    url: str, kwargs: dict[str, Any], fix: str | None = None, *, partial_ok: bool = False
) -> None:
    """Refuse, without writing anything, a database that holds no Optuna study tables
    (``partial_ok``: unless every table it holds is one of Optuna's, none included: an empty
    file, or one another run is creating Optuna's tables in now, one table at a time; ``fix``:
    what to do instead, by default check the storage named)."""
    tables = _table_names(url, kwargs)
    if OPTUNA_TABLES <= tables or (partial_ok and tables <= _all_optuna_tables()):
        return
    found = ", ".join(sorted(tables)[:8]) or "none"
    raise StudyError(
        f"{redact_url(url)} holds no Optuna study (tables found: {found}); it was left "
        f"unchanged. {fix or 'Check --storage (or $LOADERSEARCH_STORAGE).'}"
    )


def _all_optuna_tables() -> set[str]:
    """Every table Optuna's storage creates (and Alembic's version table)."""
    from optuna.storages._rdb import models

    return set(models.BaseModel.metadata.tables) | {"alembic_version"}


def _table_names(url: str, kwargs: dict[str, Any]) -> set[str]:
    """The tables in the database at ``url``, read with the engine arguments ``kwargs``."""
    import sqlalchemy

    def table_names() -> set[str]:
        engine = sqlalchemy.create_engine(url, **kwargs)
        try:
            return set(sqlalchemy.inspect(engine).get_table_names())
        finally:
            engine.dispose()

    try:
        return _while_full(url, table_names)
    except Exception as e:
        raise _open_error(url, e) from safe_cause(url, e)


def check_run_storage(url: str, *, artifacts: bool = True) -> None:
    """Refuse, before a run creates anything: a SQLite file that holds another application's
    tables (a run would add Optuna's twelve to it; only a new or empty file, or one with
    Optuna's tables, is written), and a SQLite database or (``artifacts``) artifacts directory
    that cannot be written (a read-only file system). The file is only read, read-only."""
    path = sqlite_path(url)
    if path is not None and os.path.isfile(path) and os.path.getsize(path) > 0:
        _require_optuna_schema(
            url,
            readonly_engine_kwargs(url),
            "A run adds Optuna's tables only to a new file or to a study database: choose "
            "one with --storage sqlite:///PATH/NEW.db.",
            partial_ok=True,
        )
    check_writable(path, artifact_dir(url) if artifacts else None)


def study_hosts(storage: optuna.storages.BaseStorage, study_id: int) -> list[str]:
    """Distinct host names recorded (trial user attr ``host``) on a study's trials."""
    hosts = {t.user_attrs.get("host") for t in storage.get_all_trials(study_id, deepcopy=False)}
    return sorted(h for h in hosts if isinstance(h, str) and h)


def open_artifact_store(url: str, *, create: bool = True) -> FileSystemArtifactStore | None:
    """The artifact store of the storage ``url``, or None. ``create`` (a process that runs
    trials): its folder is created, after the checks a run makes before it creates anything
    (:func:`check_run_storage`: a read-only disk or another application's database is refused
    in one line). Without, for a reader (``dashboard``):
    None unless the folder is there, so that reading a study leaves no folder beside it."""
    from optuna.artifacts import FileSystemArtifactStore

    folder = artifact_dir(url)
    if folder is None:
        return None
    if create:
        check_run_storage(url)
        return _created_on_write(folder)
    if not os.path.isdir(folder):
        return None
    return FileSystemArtifactStore(folder)


def _created_on_write(folder: str) -> FileSystemArtifactStore:
    """An artifact store whose folder is made at its first write: a run refused after the
    storage check (a read-only cache directory, say) leaves no empty folder behind."""
    from optuna.artifacts import FileSystemArtifactStore

    class CreatedOnWrite(FileSystemArtifactStore):
        def write(self, artifact_id: str, content_body: BinaryIO) -> None:
            try:
                os.makedirs(self._base_path, exist_ok=True)
                super().write(artifact_id, content_body)
            except OSError as e:
                # a full disk says so on write or close, nameless (loadersearch._limits.naming,
                # which imports this package)
                if e.filename is None:
                    e.filename = str(self._base_path)
                raise

    return CreatedOnWrite(folder)
