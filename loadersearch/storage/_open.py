"""Opening study storage: the one place that builds an ``RDBStorage``."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from loadersearch.errors import StorageError, StudyError
from loadersearch.storage._retrying import retrying_storage_class
from loadersearch.storage._settings import (
    DEFAULT_RETRY_SECONDS,
    RETRY_ENV,
    engine_kwargs,
    float_env,
    heartbeat_settings,
)
from loadersearch.storage._sqlite import sqlite_path, storage_warnings, use_sqlite_wal
from loadersearch.storage._url import (
    first_line,
    redact_url,
    resolve_storage_url,
    safe_cause,
    scrub,
)

if TYPE_CHECKING:
    import optuna


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

    kwargs: dict[str, Any] = {"engine_kwargs": engine_kwargs(url)}
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
            storage = retrying_storage_class()(url, **kwargs)
    except ImportError as e:
        raise StorageError(
            f"the database driver for {redact_url(url)} is not installed ({first_line(e)}). "
            "loadersearch installs psycopg (postgresql+psycopg://) and PyMySQL "
            "(mysql+pymysql://); use one of those URL schemes or install your driver."
        ) from e
    except Exception as e:
        raise StorageError(
            scrub(
                f"cannot open the study storage {redact_url(url)}: {first_line(e)}. Check "
                "that the server is running and the URL is right (--storage or "
                "$LOADERSEARCH_STORAGE).",
                url,
            )
        ) from safe_cause(url, e)
    storage.retry_seconds = (
        float_env(RETRY_ENV, DEFAULT_RETRY_SECONDS) if retry_seconds is None else retry_seconds
    )
    storage.warnings = storage_warnings(url)
    if path is not None and not any("network file system" in w for w in storage.warnings):
        use_sqlite_wal(storage.engine)
    return storage


def open_existing_storage(url: str | None = None) -> optuna.storages.RDBStorage:
    """Open a storage that must already hold studies (for ``report``, ``best``, ``dashboard``):
    a SQLite URL whose file does not exist is refused instead of creating an empty database."""

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
