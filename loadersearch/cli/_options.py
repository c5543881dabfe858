"""Options several commands share, defined once so their names and help stay the same."""

from __future__ import annotations

import click

storage_option = click.option(
    "--storage",
    help="Optuna storage URL (default $LOADERSEARCH_STORAGE or "
    "sqlite:///studies/loadersearch.db); postgresql+psycopg://USER@HOST/DB or "
    "mysql+pymysql://... for a study shared by several machines.",
)


def study_option(help: str = "Study name (default: the only one in the storage).", **kw):
    return click.option("--study", "study_name", help=help, **kw)


allow_mixed_hardware_option = click.option(
    "--allow-mixed-hardware",
    is_flag=True,
    help="Join a study created on another hardware class (GPU model, GPU or CPU count) "
    "anyway; each trial records its host and the differences.",
)

no_wait_option = click.option(
    "--no-wait",
    is_flag=True,
    help="Exit at once if another loadersearch measurement is running on this host, "
    "instead of waiting for it.",
)
