"""Storage URLs: which one to use, and how to show it without its secrets.

Everything that shows a storage URL (messages, logs, the dashboard command) shows
:func:`redact_url`'s form of it; text that may quote one or its password (a driver's error, a
traceback) goes through :func:`scrub`, or :func:`scrub_known` where the URL is not at hand (the
command line's last word on an error). The URL is parsed by SQLAlchemy's own parser, the one
that connects with it, so what is hidden is what the driver is given as a secret; a string
that parser cannot read is masked more widely, never less.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING
from urllib.parse import quote, quote_plus, unquote

if TYPE_CHECKING:
    from sqlalchemy.engine import URL

DEFAULT_STORAGE = "sqlite:///studies/loadersearch.db"
ENV_VAR = "LOADERSEARCH_STORAGE"
MASK = "***"
_PLACEHOLDER = "__loadersearch_masked__"  # survives SQLAlchemy's quote_plus unchanged
# Secrets shorter than this are masked only where they stand alone: a 1-3 character password
# replaced inside every word would make the message unreadable, and a word containing it does
# not give it away.
_SHORT = 4

# Every URL this process resolved: the command line's error handler scrubs with them all.
_resolved: set[str] = set()


def resolve_storage_url(url: str | None = None) -> str:
    """The storage URL to use: the argument, else ``$LOADERSEARCH_STORAGE``, else the default."""
    resolved = url or os.environ.get(ENV_VAR) or DEFAULT_STORAGE
    _resolved.add(resolved)
    return resolved


def secret_key(key: str) -> bool:
    """Whether the URL query parameter ``key`` carries a secret, and is masked.

    Chosen by pattern rather than from one driver's list: a harmless value masked costs a
    less readable message, a secret shown cannot be taken back. Secret: any name with
    ``pass``, ``pwd``, ``secret``, ``token`` or ``credential`` in it (libpq's ``password``,
    ``sslpassword`` (the client key's passphrase) and ``passfile``, PyMySQL's ``passwd`` and
    ``ssl_key_password``, mysql-connector's ``password1..3``, cloud drivers' access tokens),
    and any name ending in ``key`` (libpq's ``sslkey``, PyMySQL's ``ssl_key``, ``api_key``):
    in psycopg and PyMySQL that is the private key's file (or an OpenSSL engine's key name),
    not the key itself, but it says where the key lives and other drivers take the key
    there. Not masked: certificates (``sslcert``, ``sslrootcert``, ``ssl_ca``, ``ssl_cert``:
    public by design) and the connection's settings (``sslmode``, ``connect_timeout``).
    """
    k = key.lower()
    return any(w in k for w in ("pass", "pwd", "secret", "token", "credential")) or (
        k.endswith("key")
    )


# key=value pairs with a secret key, in a string SQLAlchemy cannot parse (a libpq
# "host=h password=x" string, a broken URL's query): the value up to a space, & or ;.
_SECRET_PAIR = re.compile(
    r"(?i)(?<![\w.-])([\w.-]*(?:pass|pwd|secret|token|credential)[\w.-]*|[\w.-]*key)"
    r"(\s*=\s*)('[^']*'|\"[^\"]*\"|[^\s&;]*)"
)


def _read(url: str) -> tuple[URL | None, bool]:
    """(SQLAlchemy's reading of ``url``, None where it has none; whether the password holds an
    unencoded ``@``). SQLAlchemy ends the password at the first ``@`` and takes its tail for
    the host (``postgres:p@ss@db`` connects to the host ``ss@db``): where that reading is
    implausible, each later ``@`` is tried as the password's end."""
    from sqlalchemy.engine import make_url

    try:
        parsed: URL | None = make_url(url)
    except Exception:
        parsed = None
    if parsed is not None and (parsed.password is None or _plausible(url)):
        return parsed, False
    scheme, sep, rest = url.partition("://")
    user, colon, tail = rest.partition(":")
    if not (sep and colon) or "/" in user or "@" in user:
        return None, False
    for i, char in enumerate(tail):
        if char != "@" or i == tail.find("@"):  # the first '@' is SQLAlchemy's own reading
            continue
        password = quote(unquote(tail[:i]), safe="")
        text = f"{scheme}://{user}:{password}@{tail[i + 1 :]}"
        if not _plausible(text):
            continue
        try:
            return make_url(text), True
        except Exception:
            continue
    return None, False


def _plausible(text: str) -> bool:
    """Whether SQLAlchemy's reading of ``text`` is what its writer meant: no ``@`` after the
    one that ends the user-info (but in the query's values), where a tail of the password
    would be, and a query of ``name=value`` pairs (SQLAlchemy drops a part without ``=``)."""
    place, _, query = text.partition("://")[2].partition("@")[2].partition("?")
    return "@" not in place and all(re.match(r"[\w.-]+=", p) for p in query.split("&") if p)


@functools.lru_cache(maxsize=64)  # the log filter asks on every line
def _split(url: str) -> tuple[str, tuple[str, ...]]:
    """(``url`` as shown, the secrets it holds, longest first)."""
    parsed, unencoded_at = _read(url)
    if parsed is None:
        return _split_unparsed(url)
    secrets = [str(parsed.password)] if parsed.password else []
    if unencoded_at:  # the pieces SQLAlchemy's own reading would show as host or database
        secrets += str(parsed.password).split("@")
    query = dict(parsed.query)
    for key, value in parsed.query.items():
        if secret_key(key):
            secrets += [v for v in (value if isinstance(value, tuple) else (value,)) if v]
            query[key] = _PLACEHOLDER
    if not secrets:
        return url, ()  # as the user wrote it
    shown = parsed.set(query=query).render_as_string(hide_password=True)
    return shown.replace(f"={_PLACEHOLDER}", f"={MASK}"), _longest_first(secrets)


def check_url(url: str) -> None:
    """Refuse (:class:`StorageError`) a URL whose password holds an unencoded ``@``: the
    driver would be given the password's tail as the host, and could only fail, showing it."""
    from loadersearch.errors import StorageError

    if _read(url)[1]:
        raise StorageError(
            f"the password in the storage URL {redact_url(url)} holds an unencoded '@', which "
            "ends it early (its tail would be taken for the host); write '@' as %40 there "
            "(and in a database name); urllib.parse.quote(password, safe='') encodes every "
            "special character."
        )


def _split_unparsed(url: str) -> tuple[str, tuple[str, ...]]:
    """:func:`_split` for a string SQLAlchemy cannot parse: everything between ``://`` and
    the last ``@`` is hidden, and the value of every secret-looking ``key=value``."""
    secrets: list[str] = []
    shown = url
    head, sep, rest = url.partition("://")
    if sep and "@" in rest:
        userinfo, _, after = rest.rpartition("@")
        secrets.append(userinfo.partition(":")[2] or userinfo)
        shown = f"{head}://{MASK}@{after}"

    def mask(match: re.Match[str]) -> str:
        value = match.group(3).strip("'\"")
        if value:
            secrets.append(value)
        return f"{match.group(1)}{match.group(2)}{MASK}"

    shown = _SECRET_PAIR.sub(mask, shown)
    return shown, _longest_first(s for s in secrets if s)


def _longest_first(secrets: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(secrets), key=len, reverse=True))


def redact_url(url: str) -> str:
    """``url`` with its password, and any secret query parameter (:func:`secret_key`),
    replaced by ``***``; safe to print, log and store. A URL without secrets is returned as
    written."""
    return _split(url)[0]


def _forms(secret: str) -> set[str]:
    return {secret, quote_plus(secret), quote(secret, safe="")}


def _mask_secret(text: str, secret: str) -> str:
    for form in sorted(_forms(secret), key=len, reverse=True):
        if len(form) >= _SHORT:
            text = text.replace(form, MASK)
        elif form:
            text = re.sub(rf"(?<![A-Za-z0-9]){re.escape(form)}(?![A-Za-z0-9])", MASK, text)
    return text


def scrub(text: str, url: str) -> str:
    """``text`` with ``url`` shown redacted and each of its secrets (as written and
    URL-encoded) replaced by ``***``."""
    shown, secrets = _split(url)
    text = text.replace(url, shown)
    for secret in secrets:
        text = _mask_secret(text, secret)
    return text


def scrub_known(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` scrubbed (:func:`scrub`) of every storage URL this process resolved and of
    ``$LOADERSEARCH_STORAGE``: for text whose URL is not known where it is shown."""
    env = os.environ if environ is None else environ
    for url in sorted({*_resolved, env.get(ENV_VAR) or ""} - {""}, key=len, reverse=True):
        text = scrub(text, url)
    return text


def has_secret(text: str, url: str) -> bool:
    """Whether ``text`` would show a secret of ``url``."""
    return scrub(text, url) != text.replace(url, redact_url(url))


def environ_without_storage(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default this process's) without ``$LOADERSEARCH_STORAGE``: the
    environment of the measuring processes, which never open the study, so that its password
    is not in their ``/proc/PID/environ``."""
    env = dict(os.environ if environ is None else environ)
    env.pop(ENV_VAR, None)
    return env


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


def safe_cause(url: str, cause: BaseException) -> BaseException | None:
    """``cause`` to chain to a :class:`StorageError`, or None when some exception in its chain
    would print a secret of ``url`` (in a --debug traceback)."""
    e: BaseException | None = cause
    seen = 0
    while e is not None and seen < 20:
        if has_secret(str(e), url) or has_secret(repr(e), url):
            return None
        e = e.__cause__ or e.__context__
        seen += 1
    return cause
