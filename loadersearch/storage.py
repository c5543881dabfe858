"""Where studies live: resolving, redacting and opening Optuna storage URLs.

Default ``sqlite:///studies/loadersearch.db`` (relative to the working directory), else
``--storage URL`` or ``$LOADERSEARCH_STORAGE``. PostgreSQL (``postgresql+psycopg://``) and
MySQL/MariaDB (``mysql+pymysql://``) are for several machines sharing one study.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from loadersearch.errors import StorageError

if TYPE_CHECKING:
    import optuna

_logger = logging.getLogger(__name__)

DEFAULT_STORAGE = "sqlite:///studies/loadersearch.db"
ENV_VAR = "LOADERSEARCH_STORAGE"


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
            return f"{head}://***@{tail.split('@', 1)[1]}"
        return url
    if parsed.password is None:
        return url
    return parsed.render_as_string(hide_password=True)


def open_storage(url: str | None = None, *, heartbeat: bool = True) -> optuna.storages.BaseStorage:
    """Open (and for SQLite, create) the storage at ``url``; raise :class:`StorageError` with
    the redacted URL and the fix when it cannot be reached."""
    import optuna

    url = resolve_storage_url(url)
    if url.startswith("sqlite:///"):
        path = url[len("sqlite:///") :]
        directory = os.path.dirname(path)
        if directory and path != ":memory:":
            os.makedirs(directory, exist_ok=True)
    kwargs = {}
    if url.startswith("sqlite"):
        kwargs["engine_kwargs"] = {"connect_args": {"timeout": 60}}
    elif heartbeat:
        kwargs.update(heartbeat_interval=30, grace_period=120)
    try:
        return optuna.storages.RDBStorage(url, **kwargs)
    except Exception as e:
        raise StorageError(
            f"cannot open the study storage {redact_url(url)}: {type(e).__name__}: "
            f"{str(e).splitlines()[0] if str(e) else ''}. Check that the server is running and "
            "the URL is right (--storage or $LOADERSEARCH_STORAGE)."
        ) from e
