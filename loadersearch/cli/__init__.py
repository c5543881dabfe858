"""The ``loadersearch`` command line. Thin: each command parses, calls one library function and
renders the result. Commands live one per module in this package and must not import torch at
module level, so that ``loadersearch --help`` stays fast.
"""

from __future__ import annotations

import logging
import signal
import sys
import traceback
from typing import NoReturn

import click

from loadersearch.errors import Interrupted, LoaderSearchError

__all__ = ["DeclaredOption", "cli", "main"]


# The commands that measure (the others stop without measuring processes to stop).
MEASURING = frozenset({"run", "worker", "bench", "confirm", "diagnose"})


def _interrupted_line(interrupt: Interrupted, command: str | None = None) -> str:
    if command is not None and command not in MEASURING:
        return f"Interrupted ({interrupt.name})."
    line = f"Interrupted ({interrupt.name}): the measuring processes were stopped."
    if interrupt.requeued:
        numbers = ", ".join(str(n) for n in interrupt.requeued)
        line += (
            f" Trial {numbers} will be measured again with the same parameters: run the same "
            "command again to resume."
        )
    return line


def _stop(ctx: click.Context, e: BaseException, line: str, code: int) -> NoReturn:
    """Show ``line`` (after the traceback with --debug) and exit with ``code``, the same with
    or without --debug: a script's handling of a bad input must not change when someone
    debugs it. Both are scrubbed of the storage URL's secrets (a driver's error may quote
    them)."""
    from loadersearch.storage import scrub_known

    if ctx.obj and ctx.obj.get("debug"):
        click.echo(scrub_known("".join(traceback.format_exception(e))), err=True, nl=False)
    click.echo(scrub_known(line), err=True)
    ctx.exit(code)


class _Group(click.Group):
    """Turns user errors into one clear line and their exit code (2 for bad input); Ctrl-C and
    SIGTERM into one line and 130 / 143; --debug adds the traceback. Any other exception is a
    bug, raised as it is, unless its traceback would show a storage secret."""

    def invoke(self, ctx: click.Context):
        try:
            result = super().invoke(ctx)
            swallowed = Interrupted.pending()  # a signal lost in a GC callback still stops
            if swallowed is not None:
                raise swallowed
            return result
        except (click.exceptions.Exit, click.exceptions.Abort, click.ClickException):
            raise  # click's own: its usage errors and exits
        except LoaderSearchError as e:
            _stop(ctx, e, f"Error: {e}", e.exit_code)
        except KeyboardInterrupt as e:
            Interrupted.received.clear()  # raised through: said below
            interrupt = e if isinstance(e, Interrupted) else Interrupted()
            _stop(ctx, e, _interrupted_line(interrupt, ctx.invoked_subcommand),
                  interrupt.exit_code)  # fmt: skip
        except Exception as e:
            from loadersearch._limits import environment_error
            from loadersearch.storage import scrub_known

            # a full disk, too many open files: not a bug
            error = environment_error(e) if isinstance(e, OSError) else None
            if error is not None:
                _stop(ctx, e, f"Error: {error}", error.exit_code)
            text = "".join(traceback.format_exception(e))
            if scrub_known(text) == text:
                raise
            click.echo(scrub_known(text), err=True, nl=False)
            ctx.exit(1)


class _ScrubSecrets(logging.Filter):
    """Masks the storage URL's secrets in every log line (a driver's message, --debug)."""

    def filter(self, record: logging.LogRecord) -> bool:
        from loadersearch.storage import scrub_known

        message = record.getMessage()
        scrubbed = scrub_known(message)
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        if record.exc_info and not record.exc_text:  # the traceback the handler would add
            record.exc_text = scrub_known(logging.Formatter().formatException(record.exc_info))
        return True


def _install_signal_handlers(ctx: click.Context) -> None:
    """SIGTERM (Slurm, Kubernetes and systemd preemption) and Ctrl-C raise
    :class:`Interrupted`: the same clean-up, exit 143 / 130 with one line. (A second signal
    raises again: whoever insists wants out now; the measuring processes die with us.)"""

    def handler(signum: int, _frame) -> None:  # noqa: ANN001
        Interrupted.received.append(signum)
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
_SCRUB = _ScrubSecrets()


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
    for handler in logging.getLogger().handlers:
        if _SCRUB not in handler.filters:
            handler.addFilter(_SCRUB)
    optimize_log = logging.getLogger("optuna.study._optimize")  # Optuna's own, by name
    # Optuna's lines go to its own handler, not the root's: its trial failures quote errors
    optimize_log.addFilter(_SCRUB)
    if debug:
        optimize_log.removeFilter(_QUIET)
    else:
        optimize_log.addFilter(_QUIET)
    _install_signal_handlers(ctx)


# The commands, after ``cli`` exists. Imported as modules (not their commands by name) so
# that ``loadersearch.cli._report`` stays the module.
from loadersearch.cli import (  # noqa: E402
    _bench,
    _confirm,
    _dashboard,
    _diagnose,
    _make_dataset,
    _report,
    _run,
    _worker,
)
from loadersearch.cli._options import DeclaredOption  # noqa: E402  (tests/test_options.py)

for _command in (
    _make_dataset.make_dataset,
    _bench.bench,
    _diagnose.diagnose,
    _run.run,
    _worker.worker,
    _confirm.confirm,
    _report.report,
    _report.best,
    _dashboard.dashboard,
):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="loadersearch")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
