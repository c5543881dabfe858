"""``loadersearch dashboard``: optuna-dashboard on the study storage."""

from __future__ import annotations

import click

from loadersearch.cli._options import storage_option


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
    """Open the studies in optuna-dashboard (Ctrl-C stops it)."""
    from optuna_dashboard import run_server

    from loadersearch.storage import (
        open_artifact_store,
        open_existing_storage,
        redact_url,
        resolve_storage_url,
    )

    url = resolve_storage_url(storage)
    rdb = open_existing_storage(url)
    # The trials' window pictures (artifacts), where the storage has a folder for them.
    store = open_artifact_store(url)
    shown = "localhost" if host in ("127.0.0.1", "0.0.0.0") else host
    click.echo(f"optuna-dashboard on {redact_url(url)}: http://{shown}:{port}/ (Ctrl-C stops it)")
    run_server(rdb, host=host, port=port, artifact_store=store)
