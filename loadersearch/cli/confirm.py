"""``loadersearch confirm``: measure a stored study's finalists again, interleaved, and update
its answer, the notes in optuna-dashboard and what ``report`` and ``best`` show. Runs no trial.
For a quiet moment after a busy run, or on the machine that will train."""

from __future__ import annotations

import sys
import time

import click

from loadersearch.cli._options import allow_mixed_hardware_option, storage_option, study_option


@click.command("confirm")
@study_option("Name of the study to confirm again.", required=True)
@storage_option
@allow_mixed_hardware_option
@click.option("--quiet", "-q", is_flag=True, help="Only the answer.")
def confirm(study_name: str, storage: str | None, allow_mixed_hardware: bool, quiet: bool) -> None:
    """Re-measure a study's finalists and update its answer (no new trial).

    The top configurations and every measured baseline are measured again in interleaved
    rounds (as many as the study was started with), waiting for a quiet machine when others
    keep it busy. The new confirmation replaces the stored one only once it is complete:
    Ctrl-C keeps the old answer.
    """
    from loadersearch.errors import StudyError
    from loadersearch.search.confirm import feasible_complete
    from loadersearch.search.study import join_study, run_study

    settings, notes = join_study(
        study_name, storage, trials=None, allow_mixed_hardware=allow_mixed_hardware
    )
    for note in notes:
        click.echo(f"Warning: {note}", err=True)
    if settings.confirm_rounds < 1:
        raise StudyError(
            f"study {study_name!r} was started with --confirm-rounds 0: it has no confirmation "
            "to measure again. Resume it with `loadersearch run --confirm-rounds 3 ...`."
        )

    from loadersearch.cli._progress import make_progress
    from loadersearch.cli.report import render_summary
    from loadersearch.hardware import fingerprint
    from loadersearch.report import open_study, publish, summarize

    if not feasible_complete(open_study(settings.storage, study_name)):
        raise StudyError(
            f"study {study_name!r} has no finished feasible trial: nothing to confirm. Run its "
            f"trials first (`loadersearch worker --study {study_name} --storage URL`)."
        )
    progress = make_progress(quiet=quiet, target=settings.trials)
    started = time.monotonic()
    try:
        outcome = run_study(
            settings,
            create=False,
            confirm=True,
            reconfirm=True,
            progress=progress,
            hardware=fingerprint(),
        )
    finally:
        progress.close()
    publish(outcome.study)
    render_summary(
        summarize(outcome.study),
        storage=settings.storage,
        quiet=quiet,
        elapsed_s=time.monotonic() - started,
        ran=0,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(confirm())
