"""Where studies live: resolving, redacting and opening Optuna storage URLs.

Default ``sqlite:///studies/loadersearch.db`` (relative to the working directory), else
``--storage URL`` or ``$LOADERSEARCH_STORAGE``. PostgreSQL (``postgresql+psycopg://``) and
MySQL/MariaDB (``mysql+pymysql://``) are for several machines sharing one study.

:func:`open_storage` returns an Optuna ``RDBStorage`` that

- records heartbeats (server backends), so that a trial of a killed machine is marked FAIL
  and its configuration re-run by ``RetryHeartbeatStaleTrialCallback``;
- retries, with backoff, calls that fail because the server went away (restart, dropped
  connection) and then raises :class:`StorageError`; every call is one transaction, so a
  failed call leaves nothing half-written;
- never shows a password: errors and logs carry :func:`redact_url`'s form of the URL.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from loadersearch.errors import StorageError

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)

DEFAULT_STORAGE = "sqlite:///studies/loadersearch.db"
ENV_VAR = "LOADERSEARCH_STORAGE"
# "INTERVAL,GRACE" in seconds, e.g. "1,3" in tests; default below.
HEARTBEAT_ENV = "LOADERSEARCH_HEARTBEAT"
DEFAULT_HEARTBEAT = (30, 120)
# Seconds to keep retrying a call while the database is unreachable.
RETRY_ENV = "LOADERSEARCH_DB_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 120.0
# Seconds to wait for a TCP connection to a database server.
CONNECT_TIMEOUT_ENV = "LOADERSEARCH_DB_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 10
SQLITE_BUSY_TIMEOUT = 60  # seconds SQLite waits on a lock held by another process

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


def resolve_storage_url(url: str | None = None) -> str:
    """The storage URL to use: the argument, else ``$LOADERSEARCH_STORAGE``, else the default."""
    return url or os.environ.get(ENV_VAR) or DEFAULT_STORAGE


def redact_url(url: str) -> str:
    """``url`` with any password replaced by ``***``; safe to print, log and store."""
    try:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
    except Exception:  # not a SQLAlchemy URL: hide everything between "://" and "@"
        head, sep, tail = url.partition("://")
        if sep and "@" in tail:
            return f"{head}://***@{tail.rsplit('@', 1)[1]}"
        return url
    if parsed.password is None:
        return url
    return parsed.render_as_string(hide_password=True)


def _password(url: str) -> str | None:
    try:
        from sqlalchemy.engine import make_url

        password = make_url(url).password
    except Exception:
        return None
    return str(password) if password else None


def _scrub(text: str, url: str) -> str:
    """``text`` with ``url`` and its password (raw and URL-encoded) replaced."""
    text = text.replace(url, redact_url(url))
    password = _password(url)
    if password:
        from urllib.parse import quote_plus

        for form in {password, quote_plus(password)}:
            text = text.replace(form, "***")
    return text


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def _safe_cause(url: str, cause: BaseException) -> BaseException | None:
    """``cause`` to chain to a :class:`StorageError`, or None when some exception in its chain
    would print the password of ``url`` (in a --debug traceback)."""
    password = _password(url)
    e: BaseException | None = cause
    seen = 0
    while e is not None and password and seen < 20:
        if password in str(e) or password in repr(e):
            return None
        e = e.__cause__ or e.__context__
        seen += 1
    return cause


def heartbeat_settings() -> tuple[int, int]:
    """(heartbeat interval, grace period) in seconds, from ``$LOADERSEARCH_HEARTBEAT``."""
    raw = os.environ.get(HEARTBEAT_ENV)
    if not raw:
        return DEFAULT_HEARTBEAT
    try:
        interval, grace = (int(x) for x in raw.split(","))
    except ValueError as e:
        raise StorageError(
            f"${HEARTBEAT_ENV}={raw!r} is not 'INTERVAL,GRACE' in whole seconds (e.g. '30,120')."
        ) from e
    if interval < 1 or grace <= interval:
        raise StorageError(
            f"${HEARTBEAT_ENV}={raw!r}: the interval must be at least 1 s and the grace period "
            "longer than the interval (e.g. '30,120')."
        )
    return interval, grace


def _float_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as e:
        raise StorageError(f"${name}={raw!r} is not a number of seconds.") from e


def _is_transient(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) says the database was unreachable or busy, so that the
    same call may succeed later; errors in the request itself are not retried."""
    import sqlalchemy.exc as sa_exc

    e: BaseException | None = exc
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, sa_exc.DBAPIError) and e.connection_invalidated:
            return True
        if isinstance(e, sa_exc.OperationalError | sa_exc.InterfaceError):
            # SQLite reports both a busy file and a broken schema as OperationalError.
            if e.orig is not None and "sqlite" in type(e.orig).__module__:
                text = str(e).lower()
                return "locked" in text or "busy" in text or "disk i/o" in text
            return True
        if isinstance(e, sa_exc.DisconnectionError | sa_exc.TimeoutError):
            return True
        if isinstance(e, ConnectionError | TimeoutError):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def _make_retrying_storage_class() -> type:
    """Build the RDBStorage subclass lazily, so that importing this module stays cheap."""
    import optuna
    from optuna.storages import RDBStorage

    class RetryingRDBStorage(RDBStorage):
        """``RDBStorage`` whose calls survive a database restart: a call that fails because
        the connection was lost is retried with exponential backoff for ``retry_seconds``,
        then raises :class:`StorageError` (URL redacted). Each call is one transaction, so a
        failed attempt writes nothing; writes whose first attempt may have committed before
        the connection dropped are checked on retry (study creation, trial state)."""

        retry_seconds: float = DEFAULT_RETRY_SECONDS
        warnings: list[str]

        def _retrying(self, name: str, call, *args: Any, **kwargs: Any) -> Any:
            deadline = time.monotonic() + self.retry_seconds
            delay = 0.25
            attempt = 0
            while True:
                attempt += 1
                try:
                    return call(*args, **kwargs)
                except Exception as e:
                    if not _is_transient(e):
                        raise
                    last = e
                # Drop this thread's session (its connection is dead) before trying again.
                try:
                    self.scoped_session.remove()
                except Exception:  # the session is unusable anyway
                    pass
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StorageError(
                        _scrub(
                            f"lost the connection to the study storage {redact_url(self.url)} "
                            f"during {name} and could not get it back in {attempt} tries over "
                            f"{self.retry_seconds:g} s (last error: {_first_line(last)}). "
                            "Check that the database server is running and reachable; run the "
                            "same command again to continue the study (a trial cut short is "
                            f"re-run once its heartbeat is stale). ${RETRY_ENV} sets how long "
                            "to retry.",
                            self.url,
                        )
                    ) from _safe_cause(self.url, last)
                if attempt == 1:
                    _logger.warning(
                        "The study storage %s is unreachable (%s); retrying for up to %g s.",
                        redact_url(self.url),
                        _scrub(_first_line(last), self.url),
                        self.retry_seconds,
                    )
                time.sleep(min(delay * (0.5 + random.random()), left))
                delay = min(delay * 2, 10.0)

        # --- writes whose lost acknowledgement needs a check ---------------------------------

        def create_new_study(self, directions, study_name=None):  # type: ignore[override]
            state = {"failed": False}

            def call():
                try:
                    return RDBStorage.create_new_study(self, directions, study_name)
                except optuna.exceptions.DuplicatedStudyError:
                    # Our own earlier attempt committed before the connection dropped.
                    if state["failed"] and study_name is not None:
                        return RDBStorage.get_study_id_from_name(self, study_name)
                    raise
                except Exception:
                    state["failed"] = True
                    raise

            return self._retrying("create_new_study", call)

        def set_trial_state_values(self, trial_id, state, values=None):  # type: ignore[override]
            flags = {"failed": False}

            def call():
                try:
                    return RDBStorage.set_trial_state_values(self, trial_id, state, values)
                except optuna.exceptions.UpdateFinishedTrialError:
                    if flags["failed"] and state.is_finished():
                        stored = RDBStorage.get_trial(self, trial_id)
                        if stored.state == state:
                            return True  # our earlier attempt committed
                    raise
                except Exception:
                    flags["failed"] = True
                    raise

            return self._retrying("set_trial_state_values", call)

    # --- calls that are safe to repeat (reads, upserts, single transactions) ----------------
    def _wrap(name: str):
        original = getattr(RDBStorage, name)

        @functools.wraps(original)
        def method(self, *args: Any, **kwargs: Any) -> Any:
            return self._retrying(name, original, self, *args, **kwargs)

        return method

    for _name in (
        "delete_study",
        "set_study_user_attr",
        "set_study_system_attr",
        "get_study_id_from_name",
        "get_study_name_from_id",
        "get_study_directions",
        "get_study_user_attrs",
        "get_study_system_attrs",
        "get_trial_user_attrs",
        "get_trial_system_attrs",
        "get_all_studies",
        "_create_new_trial",
        "_set_trial_param",
        "get_trial_param",
        "set_trial_intermediate_value",
        "set_trial_user_attr",
        "set_trial_system_attr",
        "get_trial_id_from_study_id_trial_number",
        "get_trial",
        "get_all_trials",
        "_get_trials",
        "get_best_trial",
        "_get_best_trial_id",
        "record_heartbeat",
        "_get_stale_trial_ids",
    ):
        setattr(RetryingRDBStorage, _name, _wrap(_name))
    return RetryingRDBStorage


@functools.cache
def _retrying_storage_class() -> type:
    return _make_retrying_storage_class()


def _engine_kwargs(url: str) -> dict[str, Any]:
    timeout = int(_float_env(CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT))
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT}}
    kwargs: dict[str, Any] = {"pool_pre_ping": True}  # a dropped connection is replaced
    if url.startswith(("postgresql", "postgres", "mysql", "mariadb")):
        kwargs["connect_args"] = {"connect_timeout": timeout}
    return kwargs


def sqlite_path(url: str) -> str | None:
    """The database file of a SQLite URL; None for other backends and in-memory databases."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///") :].split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    return path


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
    wrong URL fails fast.
    """
    import optuna
    from optuna.storages import RetryHeartbeatStaleTrialCallback

    url = resolve_storage_url(url)
    path = sqlite_path(url)
    if path is not None:
        directory = os.path.dirname(path)
        if directory:
            try:
                os.makedirs(directory, exist_ok=True)
            except OSError as e:
                raise StorageError(
                    f"cannot create the directory {directory!r} for the study database "
                    f"{url}: {e.strerror}. Choose another --storage path."
                ) from e
    import warnings

    kwargs: dict[str, Any] = {"engine_kwargs": _engine_kwargs(url)}
    default_interval, default_grace = heartbeat_settings()
    try:
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
            storage = _retrying_storage_class()(url, **kwargs)
    except ImportError as e:
        raise StorageError(
            f"the database driver for {redact_url(url)} is not installed ({_first_line(e)}). "
            "loadersearch installs psycopg (postgresql+psycopg://) and PyMySQL "
            "(mysql+pymysql://); use one of those URL schemes or install your driver."
        ) from e
    except Exception as e:
        raise StorageError(
            _scrub(
                f"cannot open the study storage {redact_url(url)}: {_first_line(e)}. Check "
                "that the server is running and the URL is right (--storage or "
                "$LOADERSEARCH_STORAGE).",
                url,
            )
        ) from _safe_cause(url, e)
    storage.retry_seconds = (
        _float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS) if retry_seconds is None else retry_seconds
    )
    storage.warnings = storage_warnings(url)
    if path is not None and not any("network file system" in w for w in storage.warnings):
        _use_sqlite_wal(storage.engine)
    return storage


def _use_sqlite_wal(engine: Any) -> None:
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


def open_existing_storage(url: str | None = None) -> optuna.storages.RDBStorage:
    """Open a storage that must already hold studies (for ``report``, ``best``, ``dashboard``):
    a SQLite URL whose file does not exist is refused instead of creating an empty database."""
    from loadersearch.errors import StudyError

    url = resolve_storage_url(url)
    path = sqlite_path(url)
    if path is not None and not os.path.exists(path):
        raise StudyError(
            f"no study database at {redact_url(url)}; run `loadersearch run` first or pass "
            "--storage."
        )
    return open_storage(url, heartbeat=False)


def study_hosts(storage: optuna.storages.BaseStorage, study_id: int) -> list[str]:
    """Distinct host names recorded (trial user attr ``host``) on a study's trials."""
    hosts = {t.user_attrs.get("host") for t in storage.get_all_trials(study_id, deepcopy=False)}
    return sorted(h for h in hosts if isinstance(h, str) and h)


class _BudgetReached(Exception):
    """Another worker claimed the last trial of the budget between our check and our ask."""

    def __init__(self) -> None:
        super().__init__(
            "not measured: other workers took the rest of the study's budget at the same moment"
        )


def _heartbeat_interval(study: optuna.Study) -> int | None:
    get = getattr(study._storage, "get_heartbeat_interval", None)
    return get() if get is not None else None


def optimize_to_total(
    study: optuna.Study,
    objective: Any,
    total: int,
    *,
    states: tuple | None = None,
    catch: tuple[type[Exception], ...] = (),
    callbacks: list | None = None,
    poll_seconds: float | None = None,
    trial_attrs: dict[str, Any] | None = None,
) -> int:
    """Run ``objective`` until the study holds ``total`` trials in ``states`` (default COMPLETE
    and PRUNED), counting every worker's trials: ``total`` is the study's budget, shared by
    all machines, and is not exceeded (``MaxTrialsCallback`` alone overshoots by up to one
    trial per extra worker). Returns the number of trials this process ran.

    While the remaining budget is taken by trials running elsewhere, this waits (polling every
    ``poll_seconds``, default 2) instead of stopping, because one of those workers may have
    died: once its heartbeat is stale its trial is failed and re-queued, and this worker runs
    it.

    The total is recorded in the study (user attribute ``trials``), so a worker started
    without ``--trials`` works towards it. Every trial this process runs gets the user
    attributes ``trial_attrs`` and, when this host's fingerprint differs from the one the
    study stored (user attribute ``hardware``; a machine that joined with
    ``--allow-mixed-hardware``), ``hardware_differences``.
    """
    import warnings

    import optuna
    from optuna.trial import TrialState

    from loadersearch.hardware import check_compatible, fingerprint

    counted = tuple(states or (TrialState.COMPLETE, TrialState.PRUNED))
    if study.user_attrs.get("trials") != total:
        study.set_user_attr("trials", total)
    attrs = dict(trial_attrs or {})
    stored = study.user_attrs.get("hardware")
    if stored:
        # The refusal happened when the study was opened; here the differences are recorded.
        differences = check_compatible(stored, fingerprint(), allow_mixed=True)
        if differences:
            attrs["hardware_differences"] = differences
    interval = _heartbeat_interval(study)
    # Waiting workers notice the end (or a stale trial) quickly; a count query is cheap.
    poll = poll_seconds or min(float(interval or 2), 2.0)
    ran = 0
    waiting_logged = False

    def ahead_of(number: int) -> int:
        trials = study.get_trials(deepcopy=False)
        return sum(
            t.state in counted or (t.state == TrialState.RUNNING and t.number < number)
            for t in trials
        )

    def guarded(trial: optuna.Trial) -> Any:
        # Close the race between two workers that both saw one trial left and both asked.
        if ahead_of(trial.number) >= total:
            trial.set_user_attr("surplus", "budget reached by other workers; not measured")
            raise _BudgetReached
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        return objective(trial)

    while True:
        if interval:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                optuna.storages.fail_stale_trials(study)
        trials = study.get_trials(deepcopy=False)
        finished = sum(t.state in counted for t in trials)
        running = sum(t.state == TrialState.RUNNING for t in trials)
        if finished >= total:
            return ran
        if finished + running >= total:
            if not interval:  # without heartbeats a dead trial would be waited on forever
                return ran
            if not waiting_logged:
                _logger.warning(
                    "The rest of the budget (%d of %d trials) is running on other workers; "
                    "waiting in case one of them dies.",
                    total - finished,
                    total,
                )
                waiting_logged = True
            time.sleep(poll)
            continue
        waiting_logged = False
        study.optimize(
            guarded, n_trials=1, catch=(*catch, _BudgetReached), callbacks=callbacks or []
        )
        ran += 1
