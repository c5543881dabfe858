"""``loadersearch report`` (the evidence) and ``loadersearch best`` (the answer, for scripts).
Both read the storage only; the answer is :func:`loadersearch.report.render_summary`, as at
the end of ``loadersearch run``."""

from __future__ import annotations

import json

import click

from loadersearch.cli._options import storage_option, study_option
from loadersearch.report import answer_python, phase_line, phase_rows, render_summary


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
@click.option(
    "--top", type=click.IntRange(min=1), default=15, show_default=True,
    help="Trials in the ranked table, best first.",
)  # fmt: skip
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
        from loadersearch._limits import naming

        try:
            written = write_report(study, out_dir)
        except OSError as e:
            raise naming(e, out_dir) from None
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
    from loadersearch.report import env_lines, not_separated, open_study, summarize
    from loadersearch.search import baseline_names

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
                    "low": w.low,  # its lowest and highest re-measurement (confirmed)
                    "high": w.high,
                    "trial": w.trial,
                    "emulated": summary.emulated,
                    "ranks": summary.gpus,  # the loader settings are per rank
                    # finalists (baselines among them) the confirmation could not separate
                    # from it: as good on this machine
                    "within_noise": [
                        {"config": f.config, "low": f.low, "high": f.high,
                         "baselines": baseline_names(f.baseline) if f.baseline else []}
                        for f in not_separated(summary)
                    ],  # fmt: skip
                },
                indent=2,
            )
        )
