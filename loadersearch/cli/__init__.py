"""The ``loadersearch`` command line. Thin: each command parses, calls one library function and
renders the result. Commands live one per module in this package and must not import torch at
module level, so that ``loadersearch --help`` stays fast.
"""

from __future__ import annotations

import importlib
import logging
import sys

import click

from loadersearch.errors import LoaderSearchError

# (module, command attribute). A module that is not there yet is simply not listed.
_COMMANDS = [
    ("loadersearch.cli.make_dataset", "make_dataset"),
    ("loadersearch.cli.bench", "bench"),
    ("loadersearch.cli.run", "run"),
    ("loadersearch.cli.worker", "worker"),
    ("loadersearch.cli.report", "report"),
    ("loadersearch.cli.report", "best"),
    ("loadersearch.cli.dashboard", "dashboard"),
]


class _Group(click.Group):
    """Turns user errors into one clear line and exit code 2; --debug shows the traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LoaderSearchError as e:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(f"Error: {e}", err=True)
            ctx.exit(2)
        except KeyboardInterrupt:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo("Interrupted.", err=True)
            ctx.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show full tracebacks and debug logs.")
@click.version_option(package_name="loadersearch")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Find the DataLoader settings that keep your GPU fed.

    loadersearch measures real YOLOv4-tiny training throughput (images/s) for DataLoader
    configurations (num_workers, batch_size, pin_memory, prefetch_factor,
    persistent_workers) and searches them with Optuna under a GPU memory cap. Results go
    to an Optuna database that optuna-dashboard reads.

    \b
    Typical use:
      loadersearch run --trials 40       search on the built-in dataset
      loadersearch dashboard             look at the study in optuna-dashboard
      loadersearch best --format python  paste the winner into your training code
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


for _module, _attr in _COMMANDS:
    try:
        _mod = importlib.import_module(_module)
    except ModuleNotFoundError as _e:
        if _e.name != _module:
            raise
        continue
    cli.add_command(getattr(_mod, _attr))


def main() -> None:
    cli(prog_name="loadersearch")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
