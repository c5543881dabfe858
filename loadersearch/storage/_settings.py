"""Storage settings read from the environment: heartbeats, retries, connection timeouts."""

from __future__ import annotations

import os
from typing import Any

from loadersearch.errors import StorageError
from loadersearch.storage._sqlite import (
    SQLITE_BUSY_TIMEOUT,
    sqlite_path,
    sqlite_readonly_connect,
)

# "INTERVAL,GRACE" in seconds, e.g. "1,3" in tests; default below.
HEARTBEAT_ENV = "LOADERSEARCH_HEARTBEAT"
DEFAULT_HEARTBEAT = (30, 120)
# Seconds to keep retrying a call while the database is unreachable.
RETRY_ENV = "LOADERSEARCH_DB_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 120.0
# Seconds to wait for a TCP connection to a database server.
CONNECT_TIMEOUT_ENV = "LOADERSEARCH_DB_CONNECT_TIMEOUT"
DEFAULT_CONNECT_TIMEOUT = 10
# libpq's TCP keepalives and user timeout: a PostgreSQL server that goes silent (a network
# partition: no FIN, no RST) is found dead after ~60 s, where the operating system's defaults
# (2 h of idle before the first probe) would hang a run that long. A URL's own values win
# (``?keepalives_idle=...``).
PG_KEEPALIVE = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
    "tcp_user_timeout": 60_000,  # ms: sent data unacknowledged this long drops the connection
}


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


def float_env(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as e:
        raise StorageError(f"${name}={raw!r} is not a number of seconds.") from e


def engine_kwargs(url: str) -> dict[str, Any]:
    timeout = int(float_env(CONNECT_TIMEOUT_ENV, DEFAULT_CONNECT_TIMEOUT))
    if url.startswith("sqlite"):
        return {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT}}
    kwargs: dict[str, Any] = {"pool_pre_ping": True}  # a dropped connection is replaced
    if url.startswith(("postgresql", "postgres", "mysql", "mariadb")):
        args: dict[str, Any] = {"connect_timeout": timeout}
        if url.startswith(("postgresql", "postgres")):
            args.update(PG_KEEPALIVE)
        # connect_args override the URL's query: keep what the URL says
        given = _url_query(url)
        kwargs["connect_args"] = {k: v for k, v in args.items() if k not in given}
    return kwargs


def _url_query(url: str) -> set[str]:
    """The parameter names in ``url``'s query (none where it cannot be read: a malformed URL
    is refused where it is opened, with its own message)."""
    from loadersearch.storage._url import _read

    parsed, _ = _read(url)
    return set(parsed.query) if parsed is not None else set()


def readonly_engine_kwargs(url: str) -> dict[str, Any]:
    """Engine arguments that open ``url`` read-only: SQLite's ``mode=ro`` (see
    :func:`~loadersearch.storage._sqlite.sqlite_readonly_connect`), or a server session whose
    transactions are read-only, so that a command that only reads cannot write by accident."""
    kwargs = engine_kwargs(url)
    path = sqlite_path(url)
    if path is not None:
        from sqlalchemy.pool import NullPool

        # A connection per session: closing it removes the -wal and -shm it made (see
        # sqlite_readonly_connect) then, not whenever the process ends (a dashboard never).
        return {"creator": sqlite_readonly_connect(path), "poolclass": NullPool}
    args = dict(kwargs.get("connect_args", {}))
    if url.startswith(("postgresql", "postgres")):
        args["options"] = "-c default_transaction_read_only=on"
    elif url.startswith(("mysql", "mariadb")):
        args["init_command"] = "SET SESSION TRANSACTION READ ONLY"
    return {**kwargs, "connect_args": args}
