"""``loadersearch confirm``: measure a stored study's finalists again, interleaved, and update
its answer, the notes in optuna-dashboard and what ``report`` and ``best`` show. Runs no trial.
For a quiet moment after a busy run, or on the machine that will train."""

from __future__ import annotations

import sys
from typing import Any

import click

from loadersearch.cli._options import (
    allow_mixed_hardware_option,
    pipeline_trust,
    pipeline_trust_options,
    storage_option,
    study_option,
)


@click.command("confirm")
@study_option("Name of the study to confirm again.", required=True)
@storage_option
@allow_mixed_hardware_option
@pipeline_trust_options
@click.option("--quiet", "-q", is_flag=True, help="Only the answer.")
def confirm(
    study_name: str, storage: str | None, allow_mixed_hardware: bool, quiet: bool, **trust: Any
) -> None:
    """Re-measure a study's finalists and update its answer (no new trial).

    The top configurations and every measured baseline are measured again in interleaved
    rounds (as many as the study was started with), waiting for a quiet machine when others
    keep it busy. The new confirmation replaces the stored one only once it is complete:
    Ctrl-C keeps the old answer. A study of your own pipeline is imported as `worker` imports
    it: only from modules under the working directory or a --pipeline-path directory.
    """
    from loadersearch.errors import StudyError
    from loadersearch.search import feasible_complete, join_study

    settings, notes = join_study(
        study_name,
        storage,
        trials=None,
        allow_mixed_hardware=allow_mixed_hardware,
        trust=pipeline_trust(trust),
        show=lambda line: click.echo(line, err=True),  # shown before anything is imported
    )
    for note in notes:
        click.echo(f"Warning: {note}", err=True)
    if settings.confirm_rounds < 1:
        raise StudyError(
            f"study {study_name!r} was started with --confirm-rounds 0: it has no confirmation "
            "to measure again. Resume it with `loadersearch run --confirm-rounds 3 ...`."
        )

    from loadersearch.cli._study_run import run_and_render
    from loadersearch.report import open_study

    if not feasible_complete(open_study(settings.storage, study_name)):
        raise StudyError(
            f"study {study_name!r} has no finished feasible trial: nothing to confirm. Run its "
            f"trials first (`loadersearch worker --study {study_name} --storage URL`)."
        )
    run_and_render(
        settings, quiet=quiet, notes=False, create=False, confirm=True, reconfirm=True
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(confirm())
