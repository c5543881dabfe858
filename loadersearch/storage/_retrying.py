"""An ``RDBStorage`` whose calls survive a database restart or a dropped connection."""

from __future__ import annotations

import functools
import logging
import random
import time
from typing import Any

from loadersearch.errors import DiskFullError, StorageError
from loadersearch.storage._disk import is_disk_full
from loadersearch.storage._settings import DEFAULT_RETRY_SECONDS, RETRY_ENV
from loadersearch.storage._url import first_line, redact_url, safe_cause, scrub

_logger = logging.getLogger(__name__)


def is_transient(exc: BaseException) -> bool:
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


# A server with no free connection: PostgreSQL SQLSTATE 53300 (max_connections, or a role's or
# a database's CONNECTION LIMIT), MySQL/MariaDB 1040 (max_connections) and 1226 (a user's
# max_user_connections). It ends when other clients disconnect, unlike a wrong host or port.
_FULL_SQLSTATES = frozenset({"53300"})
_FULL_MYSQL_CODES = frozenset({1040, 1226})
_FULL_TEXTS = ("too many clients", "too many connections", "max_user_connections")


def server_full(exc: BaseException) -> BaseException | None:
    """The driver's error in ``exc`` (or its causes) that says the database server refused a
    new connection because it has none free, or None."""
    e: BaseException | None = exc
    seen = 0
    while e is not None and seen < 10:
        args = getattr(e, "args", ())
        if getattr(e, "sqlstate", None) in _FULL_SQLSTATES or (
            type(e).__module__.startswith("pymysql") and args and args[0] in _FULL_MYSQL_CODES
        ):
            return e
        # psycopg gives no SQLSTATE for an error while connecting: only the server's text.
        if type(e).__module__.startswith("psycopg") and any(
            t in str(e).lower() for t in _FULL_TEXTS
        ):
            return e
        e = getattr(e, "orig", None) or e.__cause__ or e.__context__
        seen += 1
    return None


def _disk_full(url: str, e: BaseException) -> StorageError:
    from loadersearch.storage._disk import full_message
    from loadersearch.storage._sqlite import sqlite_path

    path = sqlite_path(url)
    if path is not None:
        return DiskFullError(full_message(path))
    return DiskFullError(
        scrub(
            f"the database server of {redact_url(url)} reports a full disk ({first_line(e)}). "
            "Free space on the server, then run the same command again to resume.",
            url,
        )
    )


def _where_full(url: str, e: BaseException) -> str:
    from loadersearch.storage._disk import describe_space
    from loadersearch.storage._sqlite import sqlite_path

    path = sqlite_path(url)
    return f"{path} on {describe_space(path)}" if path else scrub(first_line(e), url)


# Over 80 lines because it holds a class: RDBStorage's subclass is defined in here, not at the
# top level, so that importing this module does not import optuna (and SQLAlchemy); each of its
# methods is short.
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
        _full_logged = False  # the full-disk wait was announced (reset by a call that works)

        def _retrying(self, name: str, call, *args: Any, **kwargs: Any) -> Any:
            deadline = time.monotonic() + self.retry_seconds
            delay = 0.25
            attempt = 0
            full = False
            while True:
                attempt += 1
                try:
                    result = call(*args, **kwargs)
                    self._full_logged = False
                    return result
                except Exception as e:
                    # A full disk is often freed by someone (logs rotate, a job ends): wait
                    # for it like for a server, so the measurement in hand is not lost.
                    full = is_disk_full(e)
                    if not full and not is_transient(e):
                        raise
                    last = e
                # Drop this thread's session (its connection is dead) before trying again.
                try:
                    self.scoped_session.remove()
                except Exception:  # the session is unusable anyway
                    pass
                left = deadline - time.monotonic()
                if full and left <= 0:
                    raise _disk_full(self.url, last) from None
                if full and not self._full_logged:  # once, not once per thread or call
                    self._full_logged = True
                    _logger.warning(
                        "The disk holding the study database is full (%s); waiting up to %g s "
                        "for space: free some to keep the measurement in hand.",
                        _where_full(self.url, last),
                        self.retry_seconds,
                    )
                if full:
                    time.sleep(min(delay * (0.5 + random.random()), max(left, 0)))
                    delay = min(delay * 2, 5.0)
                    continue
                if left <= 0:
                    raise StorageError(
                        scrub(
                            f"lost the connection to the study storage {redact_url(self.url)} "
                            f"during {name} and could not get it back in {attempt} tries over "
                            f"{self.retry_seconds:g} s (last error: {first_line(last)}). "
                            "Check that the database server is running and reachable; run the "
                            "same command again to continue the study (a trial cut short is "
                            f"re-run once its heartbeat is stale). ${RETRY_ENV} sets how long "
                            "to retry.",
                            self.url,
                        )
                    ) from safe_cause(self.url, last)
                if attempt == 1:
                    _logger.warning(
                        "The study storage %s is unreachable (%s); retrying for up to %g s.",
                        redact_url(self.url),
                        scrub(first_line(last), self.url),
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

        def record_heartbeat(self, trial_id):  # type: ignore[override]
            # Runs in Optuna's heartbeat thread, where an exception would print a traceback and
            # end the heartbeats of a live trial: a missed beat is logged, the next one tried.
            try:
                return self._retrying("record_heartbeat", RDBStorage.record_heartbeat, self,
                                      trial_id)  # fmt: skip
            except StorageError as e:  # the trial's own writes report the same problem
                _logger.debug("could not record the trial's heartbeat: %s", e)
                return None

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
        "_get_stale_trial_ids",
    ):
        setattr(RetryingRDBStorage, _name, _wrap(_name))
    return RetryingRDBStorage


@functools.cache
def retrying_storage_class() -> type:
    return _make_retrying_storage_class()
