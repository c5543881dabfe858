"""``loadersearch dashboard``: optuna-dashboard on the study storage, opened read-only."""

from __future__ import annotations

import errno
import signal
import socket

import click

from loadersearch.cli._options import storage_option
from loadersearch.errors import LoaderSearchError


def _port_in_use(host: str, port: int) -> LoaderSearchError:
    return LoaderSearchError(
        f"port {port} on {host} is in use (another dashboard or server?); choose a free one "
        "with --port, e.g. --port 8081."
    )


def _check_port(host: str, port: int) -> None:
    """Refuse a busy port before the server starts (its own error is a traceback)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # The server sets SO_REUSEADDR as well: a port left in TIME_WAIT is free for both.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise _port_in_use(host, port) from None
            raise LoaderSearchError(f"cannot listen on {host}:{port}: {e.strerror}.") from None


@click.command("dashboard")
@storage_option
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on (0.0.0.0 exposes the studies to the network).",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8080, show_default=True)
def dashboard(storage: str | None, host: str, port: int) -> None:
    """Open the studies in optuna-dashboard (Ctrl-C stops it). The storage is opened read-only:
    the dashboard shows studies and changes nothing."""
    from optuna_dashboard import run_server

    from loadersearch.storage import (
        open_artifact_store,
        open_existing_storage,
        redact_url,
        resolve_storage_url,
    )

    url = resolve_storage_url(storage)
    rdb = open_existing_storage(url)
    _check_port(host, port)
    # The trials' window pictures (artifacts), where the storage has a folder for them.
    store = open_artifact_store(url, create=False)
    shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
    click.echo(f"optuna-dashboard on {redact_url(url)}: http://{shown}:{port}/ (Ctrl-C stops it)")
    # A server that only reads has nothing to clean up: SIGTERM ends it at once, as before
    # (raising inside the server could leave it waiting on the dashboard's worker threads).
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        run_server(rdb, host=host, port=port, artifact_store=store)
    except OSError as e:  # taken between the check and the server's own bind
        if e.errno == errno.EADDRINUSE:
            raise _port_in_use(host, port) from None
        raise
