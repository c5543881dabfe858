"""``loadersearch report`` (the evidence) and ``loadersearch best`` (the answer, for scripts).
Both read the storage only; :func:`render_summary` is also the end of ``loadersearch run``."""

from __future__ import annotations

import json
import shlex

import click

from loadersearch.cli._options import storage_option, study_option
from loadersearch.report import Summary


def _hours(seconds: float) -> str:
    if abs(seconds) >= 3600:
        return f"{seconds / 3600:.1f} h"
    if abs(seconds) >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def dashboard_command(storage: str | None) -> str:
    from loadersearch.storage import DEFAULT_STORAGE, redact_url, resolve_storage_url

    url = resolve_storage_url(storage)
    if url == DEFAULT_STORAGE:
        return "loadersearch dashboard"
    return f"loadersearch dashboard --storage {shlex.quote(redact_url(url))}"


def render_summary(
    summary: Summary,
    *,
    storage: str | None,
    quiet: bool = False,
    elapsed_s: float | None = None,
    ran: int | None = None,
    probe: str | None = None,
) -> None:
    """The answer: winner, speedups, epoch time, the snippet and the dashboard command."""
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    label = " [bold red]EMULATED[/]" if summary.emulated else ""
    w = summary.winner
    if w is None:
        console.print(f"study {summary.study}: no feasible trial yet.{label}")
        return
    if quiet:
        for line in _answer(summary):
            console.print(line, soft_wrap=True, markup=False)
        return
    c = summary.counts
    console.print()
    console.print(f"[bold]Study {summary.study}[/]{label}: {summary.description}")
    head = (
        f"{c['complete'] + c['infeasible'] + c['pruned']} trials: {c['complete']} complete, "
        f"{c['pruned']} pruned, {c['infeasible']} infeasible"
        + (f", {c['failed']} failed" if c["failed"] else "")
    )
    if ran is not None:
        head += f"; {ran} run now"
    if elapsed_s is not None:
        head += f" in {_hours(elapsed_s)}"
    console.print(head)
    if probe:
        console.print(probe)
    if summary.pruning["saved_s"]:
        console.print(
            f"pruning saved about {_hours(summary.pruning['saved_s'])} of measuring "
            f"({summary.pruning['fraction']:.0%} of the trials' time)"
        )
    if w.confirmed:
        spread = f", spread {w.spread:.1%}" if w.spread is not None else ""
        rate = (
            f"{w.rate:.1f} img/s (median of {w.rounds} interleaved re-measurements, "
            f"{w.low:.1f}..{w.high:.1f}{spread})"
        )
    else:
        rate = f"{w.rate:.1f} img/s (best trial, not confirmed)"
    console.print(f"\n[bold green]Winner[/] (trial {w.trial}): {w.config.label()}: {rate}{label}")
    if w.epoch_time_s:
        console.print(
            f"projected epoch ({summary.dataset_images} images): {_hours(w.epoch_time_s)}; "
            f"{summary.epochs_planned} epochs: {_hours(w.epoch_time_s * summary.epochs_planned)}"
        )
    if summary.baselines:
        table = Table(title="Against the baselines", title_justify="left")
        for col in (
            "baseline",
            "config",
            "img/s",
            "from",
            "speedup",
            f"saved / {summary.epochs_planned} ep",
        ):
            table.add_column(col)
        for b in summary.baselines:
            table.add_row(
                b.name,
                b.label,
                f"{b.rate:.1f}" if b.rate else "-",
                b.source,
                f"{b.speedup:.2f}x" if b.speedup else "-",
                _hours(b.saved_s) if b.saved_s is not None else "-",
            )
        console.print(table)
        console.print(
            "[dim]The baseline among the finalists was re-measured with the winner; the "
            "others' rates are their trial values.[/]"
        )
    if summary.gpus > 1:
        console.print(
            f"\nPaste into your training script (each of the {summary.gpus} ranks builds this "
            "loader), and launch it with torchrun:"
        )
    else:
        console.print("\nPaste into your training code:")
    for line in _answer(summary):
        console.print(f"  {line}", soft_wrap=True, markup=False)
    console.print(f"\nOpen the study: {dashboard_command(storage)}")


def _answer(summary: Summary) -> list[str]:
    """The winner's lines to paste: one ``DataLoader(...)``, or for a DDP job the sampler, the
    per-rank loader and the torchrun command."""
    assert summary.winner is not None
    if summary.gpus > 1:
        from loadersearch.measure.ranks import paste_lines

        return paste_lines(summary.winner.config, summary.gpus)
    return [summary.winner.config.snippet()]


@click.command("report")
@study_option()
@storage_option
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    help="Write plots (HTML and PNG) to this directory.",
)
@click.option("--top", type=click.IntRange(min=1), default=15, help="Trials in the table.")
def report(study_name: str | None, storage: str | None, out_dir: str | None, top: int) -> None:
    """The ranked trials, parameter importance, the answer, and plots (with --out)."""
    from rich.console import Console
    from rich.table import Table

    from loadersearch.report import importances, open_study, summarize, write_plots

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
            (r["reason"] or "") if r["state"] != "complete" else "",
        )
    console.print(table)
    values, evaluator = importances(study)
    if values:
        console.print(f"Parameter importance ({evaluator}):")
        for name, value in values.items():
            console.print(f"  {name:<20} {value:6.3f}")
    else:
        console.print("Parameter importance: not enough complete trials yet.")
    render_summary(summary, storage=storage)
    if out_dir:
        written = write_plots(study, out_dir)
        console.print(f"\nPlots: {', '.join(written) if written else 'none (too few trials)'}")


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
        if summary.gpus > 1:  # Python lines; the launch command as a comment
            sampler, loader, launch = _answer(summary)
            click.echo(f"{sampler}\n{loader}{note}\n# launch: {launch}")
        else:
            click.echo(w.config.snippet() + note)
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
                    "spread": w.spread,
                    "trial": w.trial,
                    "emulated": summary.emulated,
                    "ranks": summary.gpus,  # the loader settings are per rank
                },
                indent=2,
            )
        )
