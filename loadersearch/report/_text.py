"""The answer of a study as text: what ``loadersearch run``, ``worker``, ``confirm`` and
``report`` print at their end, and :meth:`loadersearch.TuneResult.report`."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from loadersearch.report._answer import answer_lines
from loadersearch.report._format import (
    baseline_cells,
    baseline_header,
    baselines_source,
    cache_line,
    duration,
    epoch_time,
    machine_load,
    settled_line,
    skipped_lines,
    winner_evidence,
    winner_title,
)
from loadersearch.report._separation import (
    baselines_not_separated,
    finalists_not_separated,
    inconclusive_note,
)
from loadersearch.report._summary import Summary

if TYPE_CHECKING:
    from rich.console import Console


def dashboard_command(storage: str | None) -> str:
    """A command that opens the study and works as printed: a URL that came from
    ``$LOADERSEARCH_STORAGE`` is referred to by the variable (its password is never shown)."""
    import os

    from loadersearch.storage import DEFAULT_STORAGE, ENV_VAR, redact_url, resolve_storage_url

    url = resolve_storage_url(storage)
    if url == DEFAULT_STORAGE:
        return "loadersearch dashboard"
    if url == os.environ.get(ENV_VAR):
        return f'loadersearch dashboard --storage "${ENV_VAR}"'
    shown = redact_url(url)
    command = f"loadersearch dashboard --storage {shlex.quote(shown)}"
    if shown != url:  # a password given on the command line: it is not printed
        command += f"  (put the password in place of ***, or set ${ENV_VAR} to the URL)"
    return command


def render_summary(
    summary: Summary,
    *,
    storage: str | None,
    quiet: bool = False,
    elapsed_s: float | None = None,
    ran: int | None = None,
    probe: str | None = None,
    console: Console | None = None,
) -> None:
    """The answer: winner, speedups, epoch time, the snippet and the dashboard command
    (on ``console``, default stdout)."""
    from rich.console import Console

    console = console or Console(highlight=False)
    label = " [bold red]EMULATED[/]" if summary.emulated else ""
    w = summary.winner
    if w is None:
        console.print(f"study {summary.study}: no feasible trial yet.{label}")
        return
    if quiet:
        for line in answer_lines(summary):
            console.print(line, soft_wrap=True, markup=False)
        return
    console.print()
    console.print(f"[bold]Study {summary.study}[/]{label}: {summary.description}")
    console.print(_counts_line(summary, ran, elapsed_s))
    settled = settled_line(summary)
    if settled:
        console.print(settled[0].upper() + settled[1:], soft_wrap=True)
    if probe:
        console.print(probe)
    if summary.pruning["saved_s"]:
        console.print(
            f"pruning saved about {duration(summary.pruning['saved_s'])} of measuring "
            f"({summary.pruning['fraction']:.0%} of the trials' time)"
        )
    load = machine_load(summary)
    if load:
        console.print(f"machine: {load}")
    if summary.cpu_budget:
        console.print(f"CPU budget: {summary.cpu_budget}", soft_wrap=True, markup=False)
    if summary.memory_bound:
        console.print(summary.memory_bound, soft_wrap=True, markup=False)
    # (an unconfirmed winner's evidence says so: "best trial, not confirmed")
    title = winner_title(w) if w.confirmed and w.inconclusive else "Winner"
    colour = "green" if title == "Winner" else "yellow"
    console.print(
        f"\n[bold {colour}]{title}[/] (trial {w.trial}): {w.config.label()}: "
        f"{winner_evidence(w)}{label}"
    )
    caveat = inconclusive_note(w)
    if caveat:
        console.print(f"[bold yellow]{caveat}[/]", soft_wrap=True)
    epoch = epoch_time(summary)
    if epoch:
        console.print(epoch)
    cached = cache_line(summary)
    if cached:
        console.print(cached, soft_wrap=True)
    for line in skipped_lines(summary, names=10):
        console.print(line, soft_wrap=True, markup=False)
    if summary.baselines:
        _print_baselines(summary, console)
    alike = finalists_not_separated(summary)
    if alike:
        console.print(alike, soft_wrap=True, markup=False)
    if summary.cache is not None and summary.cache.mode != "none":
        console.print(
            f"\nThe winner reads its images from the {summary.cache.mode} cache: the line below "
            "is as fast only with a dataset that does the same (docs/caches.md)."
        )
    if summary.gpus > 1:
        console.print(
            f"\nPaste into your training script (each of the {summary.gpus} ranks builds this "
            "loader), and launch it with torchrun:"
        )
    else:
        console.print("\nPaste into your training code:")
    for line in answer_lines(summary):
        console.print(f"  {line}", soft_wrap=True, markup=False)
    console.print(f"\nOpen the study: {dashboard_command(storage)}")


def _queued_hint(summary: Summary) -> str:
    """What measures the queued trials (baselines, retries of interrupted ones): the same
    command while the budget has room; once the budget is reached, a larger one."""
    queued, budget = summary.counts["queued"], summary.budget
    if budget is not None and summary.finished >= budget:
        return (f"queued, not measured: the budget of {budget} trials is reached (run again "
                f"with --trials {summary.finished + queued} to measure them)")  # fmt: skip
    return "queued (run the same command to measure)"


def _counts_line(summary: Summary, ran: int | None, elapsed_s: float | None) -> str:
    """``40 trials: 30 complete, 8 pruned, 2 infeasible; 12 run now in 3 min``."""
    c = summary.counts
    head = (
        f"{c['complete'] + c['infeasible'] + c['pruned']} trials: {c['complete']} complete, "
        f"{c['pruned']} pruned, {c['infeasible']} infeasible"
        + (f", {c['failed']} failed" if c["failed"] else "")
        + (f", {c['queued']} {_queued_hint(summary)}" if c["queued"] else "")
    )
    if ran is not None:
        head += f"; {ran} run now"
    if elapsed_s is not None:
        head += f" in {duration(elapsed_s)}"
    return head


def _print_baselines(summary: Summary, console: Console) -> None:
    """The table of the winner against each baseline, and where the baselines' figures are from."""
    from rich.table import Table

    table = Table(title="Against the baselines", title_justify="left")
    for col in baseline_header(summary.epochs_planned):
        table.add_column(col)
    for b in summary.baselines:
        table.add_row(*baseline_cells(b))
    console.print(table)
    console.print(f"[dim]{baselines_source(summary)}[/]")
    close = baselines_not_separated(summary)
    if close:
        console.print(close)
