"""``loadersearch report`` (the evidence) and ``loadersearch best`` (the answer, for scripts).
Both read the storage only; :func:`render_summary` is also the end of ``loadersearch run``."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

import click

from loadersearch.cli._options import storage_option, study_option
from loadersearch.report import (
    Summary,
    answer_lines,
    answer_python,
    baseline_cells,
    baseline_header,
    baselines_source,
    cache_line,
    duration,
    epoch_time,
    inconclusive_note,
    machine_load,
    phase_line,
    phase_rows,
    settled_line,
    skipped_lines,
    winner_evidence,
    winner_title,
)

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
    from rich.table import Table

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
    c = summary.counts
    console.print()
    console.print(f"[bold]Study {summary.study}[/]{label}: {summary.description}")
    head = (
        f"{c['complete'] + c['infeasible'] + c['pruned']} trials: {c['complete']} complete, "
        f"{c['pruned']} pruned, {c['infeasible']} infeasible"
        + (f", {c['failed']} failed" if c["failed"] else "")
        + (f", {c['queued']} queued (run the same command to measure)" if c["queued"] else "")
    )
    if ran is not None:
        head += f"; {ran} run now"
    if elapsed_s is not None:
        head += f" in {duration(elapsed_s)}"
    console.print(head)
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
    title = "Winner" if w.confirmed and not w.inconclusive else winner_title(w)
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
        table = Table(title="Against the baselines", title_justify="left")
        for col in baseline_header(summary.epochs_planned):
            table.add_column(col)
        for b in summary.baselines:
            table.add_row(*baseline_cells(b))
        console.print(table)
        console.print(f"[dim]{baselines_source(summary)}[/]")
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


def _row_note(row: dict) -> str:
    """The trial table's note column."""
    if row.get("online"):
        return "online"
    if row["state"] == "queued":
        retry = row.get("retry_of")
        return f"retry of trial {retry}" if retry is not None else "enqueued"
    if row["state"] != "complete":
        return row["reason"] or ""
    return _busy_note(row)


def _busy_note(row: dict) -> str:
    """A complete trial measured on a busy machine: its value may be low."""
    if row.get("unreliable"):
        return "busy machine: unreliable"
    if row.get("remeasured"):
        return "re-measured (busy machine)"
    return "busy machine" if row.get("busy_host") else ""


@click.command("report")
@study_option()
@storage_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write the report page (index.html, readable offline) and its plots (HTML and PNG) "
    "to this directory.",
)
@click.option("--top", type=click.IntRange(min=1), default=15, help="Trials in the table.")
@click.option(
    "--machines",
    "by_machine",
    is_flag=True,
    help="Instead of one study: every study in the storage (a database several machines "
    "share), one row per hardware class (GPU model and count, CPUs) with its best "
    "configuration, the winners' num_workers, the speedup over the rules of thumb (the "
    "article's 2 x cores, Ultralytics') and the studies behind it: the measured version of "
    "the article's hardware table. --study PATTERN (e.g. 'yolov4-tiny-*') keeps the studies "
    "whose names match.",
)
@click.option("--json", "as_json", is_flag=True, help="With --machines: the rows as JSON.")
def report(
    study_name: str | None,
    storage: str | None,
    out_dir: str | None,
    top: int,
    by_machine: bool,
    as_json: bool,
) -> None:
    """The ranked trials, parameter importance, the answer, and a report page (with --out)."""
    from rich.console import Console
    from rich.table import Table

    from loadersearch.report import importances, open_study, summarize, write_report

    if by_machine:
        if out_dir:
            raise click.UsageError("--machines prints a table: drop --out.")
        render_machines(storage, as_json, study_name)
        return
    if as_json:
        raise click.UsageError("--json goes with --machines (for one study: loadersearch best).")

    study = open_study(storage, study_name)
    summary = summarize(study)
    console = Console(highlight=False)
    table = Table(title=f"Trials of {summary.study}, best first", title_justify="left")
    for col in ("#", "state", "img/s", "config", "baseline", "wait", "cv", "note"):
        table.add_column(col)
    for r in summary.rows[:top]:
        table.add_row(
            str(r["trial"]),
            r["state"],
            f"{r['value']:.1f}" if r["value"] is not None else "-",
            r["config"],
            r["baseline"] or "",
            f"{r['wait_fraction']:.0%}" if r["wait_fraction"] is not None else "",
            f"{r['window_cv']:.2f}" if r["window_cv"] is not None else "",
            _row_note(r),
        )
    console.print(table)
    rows = phase_rows(summary)
    if rows:
        phases = Table(title="Where the trials' time went", title_justify="left")
        for col in ("phase", "time", "share"):
            phases.add_column(col)
        for row in rows:
            phases.add_row(*row)
        console.print(phases)
        console.print(phase_line(summary))
    importance = importances(study)
    if importance.values:
        console.print(f"Parameter importance, {importance.describe()}", soft_wrap=True)
        console.print(importance.verdict(), soft_wrap=True)
        for name, value in importance.values.items():
            interval = importance.interval_text(name)
            console.print(
                f"  {name:<20} {value:6.3f}" + (f"  (90%: {interval})" if interval else "")
            )
    else:
        console.print(f"Parameter importance: not enough trials yet ({importance.describe()})")
    render_summary(summary, storage=storage)
    if out_dir:
        written = write_report(study, out_dir)
        console.print(f"\nReport: {written[0]} (plots beside it: {len(written) - 1} files)")


def render_machines(storage: str | None, as_json: bool, pattern: str | None = None) -> None:
    """The hardware table of ``storage`` (``report --machines``), of the studies whose names
    match ``pattern`` (a glob) when given."""
    from rich.console import Console
    from rich.table import Table

    from loadersearch.report import machines

    rows, skipped = machines(storage, pattern)
    if as_json:
        click.echo(
            json.dumps({"machines": [r.to_dict() for r in rows], "skipped": skipped}, indent=2)
        )
        return
    console = Console(highlight=False)
    if not rows:
        console.print("No study in this storage has a feasible answer yet.")
    else:
        table = Table(
            title="Best DataLoader settings by hardware class, as measured",
            title_justify="left",
        )
        for col in ("GPU", "CPUs", "best configuration", "workers", "vs rules of thumb",
                    "studies"):  # fmt: skip
            table.add_column(col)
        for r in rows:
            speedup = f"{r.speedup:.2f}x" if r.speedup is not None else "-"
            studies = str(len(r.studies)) + (f" ({r.emulated} emulated)" if r.emulated else "")
            table.add_row(r.gpu, r.cpus, r.best.best, r.workers, speedup, studies)
        console.print(table)
        console.print(
            "[dim]workers: the winners' num_workers over the class's studies; vs rules of "
            "thumb: the median over its studies of the winner's speedup over the better of "
            "the article's (2 x physical cores) and Ultralytics' rules.[/]"
        )
    for line in skipped:
        console.print(f"[dim]left out: {line}[/]")


@click.command("best")
@study_option()
@storage_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["json", "python", "env"]),
    default="json",
    show_default=True,
)
def best(study_name: str | None, storage: str | None, fmt: str) -> None:
    """The confirmed winner, for scripts: JSON, a DataLoader(...) line, or env lines."""
    from loadersearch.report import env_lines, open_study, summarize

    summary = summarize(open_study(storage, study_name))
    w = summary.winner
    if w is None:
        from loadersearch.errors import StudyError

        raise StudyError(f"study {summary.study!r} has no feasible trial yet.")
    if fmt == "python":
        note = "  # EMULATED accelerator result" if summary.emulated else ""
        click.echo(answer_python(summary, note))
    elif fmt == "env":
        click.echo("\n".join(env_lines(w.config)))
    else:
        click.echo(
            json.dumps(
                {
                    "study": summary.study,
                    "config": w.config.to_dict(),
                    "dataloader_kwargs": w.config.dataloader_kwargs(),
                    "images_per_s": w.rate,
                    "confirmed": w.confirmed,
                    "inconclusive": w.inconclusive,
                    "settled": summary.settled,
                    "spread": w.spread,
                    "trial": w.trial,
                    "emulated": summary.emulated,
                    "ranks": summary.gpus,  # the loader settings are per rank
                },
                indent=2,
            )
        )
