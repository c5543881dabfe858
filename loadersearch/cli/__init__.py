"""The ``loadersearch`` command line. Thin: each command parses, calls one library function and
renders the result. Commands live one per module in this package and must not import torch at
module level, so that ``loadersearch --help`` stays fast.
"""

from __future__ import annotations

import importlib
import logging
import signal
import sys

import click

from loadersearch.errors import Interrupted, LoaderSearchError

# (module, command attribute). A module that is not there yet is simply not listed.
_COMMANDS = [
    ("loadersearch.cli.make_dataset", "make_dataset"),
    ("loadersearch.cli.bench", "bench"),
    ("loadersearch.cli.diagnose", "diagnose"),
    ("loadersearch.cli.run", "run"),
    ("loadersearch.cli.worker", "worker"),
    ("loadersearch.cli.confirm", "confirm"),
    ("loadersearch.cli.report", "report"),
    ("loadersearch.cli.report", "best"),
    ("loadersearch.cli.dashboard", "dashboard"),
]


def _interrupted_line(interrupt: Interrupted) -> str:
    line = f"Interrupted ({interrupt.name}): the measuring processes were stopped."
    if interrupt.requeued:
        numbers = ", ".join(str(n) for n in interrupt.requeued)
        line += (
            f" Trial {numbers} will be measured again with the same parameters: run the same "
            "command again to resume."
        )
    return line


class _Group(click.Group):
    """Turns user errors into one clear line and their exit code (2 for bad input); Ctrl-C and
    SIGTERM into one line and 130 / 143; --debug shows the traceback."""

    def invoke(self, ctx: click.Context):
        def debug() -> bool:
            return bool(ctx.obj and ctx.obj.get("debug"))

        try:
            return super().invoke(ctx)
        except LoaderSearchError as e:
            if debug():
                raise
            click.echo(f"Error: {e}", err=True)
            ctx.exit(e.exit_code)
        except KeyboardInterrupt as e:
            if debug():
                raise
            interrupt = e if isinstance(e, Interrupted) else Interrupted()
            click.echo(_interrupted_line(interrupt), err=True)
            ctx.exit(interrupt.exit_code)
        except OSError as e:
            from loadersearch.limits import environment_error

            error = environment_error(e)  # a full disk, too many open files: not a bug
            if error is None or debug():
                raise
            click.echo(f"Error: {error}", err=True)
            ctx.exit(error.exit_code)


def _install_signal_handlers(ctx: click.Context) -> None:
    """SIGTERM (Slurm, Kubernetes and systemd preemption) and Ctrl-C raise
    :class:`Interrupted`: the same clean-up, exit 143 / 130 with one line. (A second signal
    raises again: whoever insists wants out now; the measuring processes die with us.)"""

    def handler(signum: int, _frame) -> None:  # noqa: ANN001
        raise Interrupted(signum)

    try:
        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
    except ValueError:  # not the main thread (an embedding application): leave signals alone
        return

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    ctx.call_on_close(restore)


class _QuietTrialFailures(logging.Filter):
    """Drops Optuna's "Trial N failed ... Traceback" warnings: loadersearch says what went
    wrong in one line; the warning is logged at debug level instead (shown with --debug)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if message.startswith("Trial ") and " failed with " in message:
            logging.getLogger("loadersearch.search").debug("%s", message, exc_info=record.exc_info)
            return False
        return True


_QUIET = _QuietTrialFailures()


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
    optimize_log = logging.getLogger("optuna.study._optimize")  # Optuna's own, by name
    if debug:
        optimize_log.removeFilter(_QUIET)
    else:
        optimize_log.addFilter(_QUIET)
    _install_signal_handlers(ctx)


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
