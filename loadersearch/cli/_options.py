"""Options several commands share, defined once so their names and help stay the same."""

from __future__ import annotations

import click

from loadersearch.config import parse_size

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


class SizeType(click.ParamType):
    """A size such as 6GiB, 6G or 6000MiB (see :func:`loadersearch.config.parse_size`)."""

    name = "SIZE"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class PairType(click.ParamType):
    """Two numbers separated by a comma, e.g. ``20,2``."""

    name = "A,B"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if isinstance(value, tuple):
            return value
        try:
            a, b = (float(x) for x in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not two numbers separated by a comma, e.g. 20,2", param, ctx)
        return (a, b)
