"""Storage URLs: which one to use, and how to show it without its password."""

from __future__ import annotations

import os

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


def scrub(text: str, url: str) -> str:
    """``text`` with ``url`` and its password (raw and URL-encoded) replaced."""
    text = text.replace(url, redact_url(url))
    password = _password(url)
    if password:
        from urllib.parse import quote_plus

        for form in {password, quote_plus(password)}:
            text = text.replace(form, "***")
    return text


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def safe_cause(url: str, cause: BaseException) -> BaseException | None:
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
