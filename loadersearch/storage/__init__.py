"""Where studies live: resolving, redacting and opening Optuna storage URLs.

Default ``sqlite:///studies/loadersearch.db`` (relative to the working directory), else
``--storage URL`` or ``$LOADERSEARCH_STORAGE``. PostgreSQL (``postgresql+psycopg://``) and
MySQL/MariaDB (``mysql+pymysql://``) are for several machines sharing one study.

:func:`open_storage` returns an Optuna ``RDBStorage`` that

- records heartbeats (server backends), so that a trial of a killed machine is marked FAIL
  and its configuration re-run by ``RetryHeartbeatStaleTrialCallback``;
- retries, with backoff, calls that fail because the server went away (restart, dropped
  connection) and then raises :class:`~loadersearch.errors.StorageError`; every call is one
  transaction, so a failed call leaves nothing half-written (:mod:`._retrying`);
- never shows a password: errors and logs carry :func:`redact_url`'s form of the URL
  (:mod:`._url`);
- on a local SQLite file, runs in WAL mode, and warns where SQLite is unsafe (:mod:`._sqlite`);
- names a full disk (file system, free space, what to do) and waits for space within the
  retry period, so the measurement in hand is kept if space is freed (:mod:`._disk`).

:func:`open_existing_storage` opens storage read-only (``report``, ``best``, ``dashboard``) and
refuses a database without Optuna's tables unchanged. :func:`study_lock` serialises the set-up
of one study among processes (:mod:`._lock`).

Environment settings (heartbeat timing, retry and connect timeouts) are in :mod:`._settings`;
where a study's artifacts (trial pictures) live, in :mod:`._artifacts` (opened by
:mod:`._open`).
"""

from __future__ import annotations

from loadersearch.storage._artifacts import ARTIFACTS_ENV, artifact_dir
from loadersearch.storage._disk import describe_space
from loadersearch.storage._lock import study_lock
from loadersearch.storage._open import (
    open_artifact_store,
    open_existing_storage,
    open_storage,
    studies_listed,
    study_hosts,
)
from loadersearch.storage._retrying import retrying_storage_class
from loadersearch.storage._settings import heartbeat_settings
from loadersearch.storage._sqlite import (
    filesystem_type,
    is_network_filesystem,
    sqlite_path,
    storage_warnings,
)
from loadersearch.storage._url import (
    DEFAULT_STORAGE,
    ENV_VAR,
    check_url,
    environ_without_storage,
    redact_url,
    resolve_storage_url,
    scrub,
    scrub_known,
)

__all__ = [
    "ARTIFACTS_ENV",
    "DEFAULT_STORAGE",
    "ENV_VAR",
    "artifact_dir",
    "check_url",
    "describe_space",
    "environ_without_storage",
    "filesystem_type",
    "heartbeat_settings",
    "is_network_filesystem",
    "open_artifact_store",
    "open_existing_storage",
    "open_storage",
    "redact_url",
    "resolve_storage_url",
    "retrying_storage_class",
    "scrub",
    "scrub_known",
    "sqlite_path",
    "storage_warnings",
    "studies_listed",
    "study_hosts",
    "study_lock",
]
