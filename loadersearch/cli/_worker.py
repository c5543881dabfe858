"""``loadersearch worker``: join an existing study from another machine (or the same one
later) and run its trials until the study holds its total. Reads the study's specification
from the storage and never creates or changes it."""

from __future__ import annotations

import sys
from typing import Any

import click

from loadersearch.cli._options import (
    allow_mixed_hardware_option,
    no_wait_option,
    option,
    pipeline_trust,
    pipeline_trust_options,
    storage_option,
    study_option,
)
from loadersearch.search import StudySettings


@click.command("worker")
@study_option("Name of the study to join.", required=True)
@storage_option
@option(
    StudySettings,
    "trials",
    help="Finished trials the study should hold in total, over all machines (default: the "
    "total it was started with).",
)
@allow_mixed_hardware_option
@pipeline_trust_options
@no_wait_option
@click.option("--quiet", "-q", is_flag=True, help="Only the summary.")
def worker(
    study_name: str,
    storage: str | None,
    trials: int | None,
    allow_mixed_hardware: bool,
    no_wait: bool,
    quiet: bool,
    **trust: Any,
) -> None:
    """Join an existing study and run its trials (one budget shared by every machine).

    Start the study once with `loadersearch run --study NAME --storage URL --trials N`, then
    start `loadersearch worker --study NAME --storage URL` on every other machine (e.g. in a
    Slurm array). A trial cut short by a dead machine is re-run by a worker once its
    heartbeat is stale.

    A study of your own pipeline stores it as references (module:name and arguments): the
    worker shows them, and imports them only from modules under the working directory or a
    --pipeline-path directory (--trust-pipeline: from anywhere but the standard library).
    """
    from loadersearch.search import join_study

    settings, notes = join_study(
        study_name,
        storage,
        trials=trials,
        allow_mixed_hardware=allow_mixed_hardware,
        trust=pipeline_trust(trust),
        show=lambda line: click.echo(line, err=True),  # shown before anything is imported
    )
    for note in notes:
        click.echo(f"Warning: {note}", err=True)

    from loadersearch.cli._study_run import run_and_render

    # The study exists (join_study checked) and the settings are its own: run_study loads it,
    # checks the hardware, and creates nothing. It notes its own trials in the dashboard; the
    # study's note is the confirming run's.
    run_and_render(
        settings, quiet=quiet, no_wait=no_wait, publish=False, create=False, confirm=False
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(worker())
