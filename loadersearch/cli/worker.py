"""``loadersearch worker``: join an existing study from another machine (or the same one
later) and run its trials until the study holds its total. Reads the study's specification
from the storage and never creates or changes it."""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import click

from loadersearch.cli._options import (
    allow_mixed_hardware_option,
    no_wait_option,
    storage_option,
    study_option,
)

if TYPE_CHECKING:
    from loadersearch.spec import StudySettings


@click.command("worker")
@study_option("Name of the study to join.", required=True)
@storage_option
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=None,
    help="Finished trials the study should hold in total, over all machines (default: the "
    "total it was started with).",
)
@allow_mixed_hardware_option
@no_wait_option
@click.option("--quiet", "-q", is_flag=True, help="Only the summary.")
def worker(
    study_name: str,
    storage: str | None,
    trials: int | None,
    allow_mixed_hardware: bool,
    no_wait: bool,
    quiet: bool,
) -> None:
    """Join an existing study and run its trials (one budget shared by every machine).

    Start the study once with `loadersearch run --study NAME --storage URL --trials N`, then
    start `loadersearch worker --study NAME --storage URL` on every other machine (e.g. in a
    Slurm array). A trial cut short by a dead machine is re-run by a worker once its
    heartbeat is stale.
    """
    from loadersearch.search.study import run_study

    settings, notes = join_settings(
        study_name, storage, trials=trials, allow_mixed_hardware=allow_mixed_hardware
    )
    for note in notes:
        click.echo(f"Warning: {note}", err=True)

    from loadersearch.cli._progress import make_progress
    from loadersearch.cli.report import render_summary
    from loadersearch.hardware import fingerprint
    from loadersearch.hostlock import measurement_lock
    from loadersearch.report import summarize

    if no_wait:  # refuse now if the host is busy; later trials queue for it as usual
        with measurement_lock(wait=False):
            pass
    progress = make_progress(quiet=quiet, target=settings.trials)
    started = time.monotonic()
    try:
        # The study exists (join_settings checked) and settings are its own, so run_study
        # loads it, checks its spec and the hardware, and creates nothing. (create=False would
        # rebuild the settings and enqueue baselines the creator chose not to run.)
        outcome = run_study(
            settings, create=True, confirm=False, progress=progress, hardware=fingerprint()
        )
    finally:
        progress.close()
    render_summary(
        summarize(outcome.study),
        storage=settings.storage,
        quiet=quiet,
        elapsed_s=time.monotonic() - started,
        ran=outcome.ran,
        probe=outcome.probe.describe(),
    )


def join_settings(
    study_name: str,
    storage: str | None,
    *,
    trials: int | None,
    allow_mixed_hardware: bool,
) -> tuple[StudySettings, list[str]]:
    """The settings stored in an existing study, for a worker joining it, and the storage
    warnings to show. Refuses, listing the studies there, when the study does not exist."""
    import optuna

    from loadersearch.errors import StudyError
    from loadersearch.hardware import host_name
    from loadersearch.search.study import settings_from_study
    from loadersearch.storage import (
        open_storage,
        redact_url,
        resolve_storage_url,
        storage_warnings,
        study_hosts,
    )

    url = resolve_storage_url(storage)
    rdb = open_storage(url, heartbeat=False)
    names = sorted(s.study_name for s in rdb.get_all_studies())
    if study_name not in names:
        listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") or "none"
        raise StudyError(
            f"no study named {study_name!r} in {redact_url(url)} (studies there: {listed}). "
            "A worker only joins a study: create it first with `loadersearch run --study "
            f"{study_name} --storage URL --trials N`, or check --storage."
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=rdb)
    total = trials or study.user_attrs.get("trials")
    if not total:
        raise click.UsageError(
            f"study {study_name!r} does not record its total number of trials; pass --trials N "
            "(the total over every machine)."
        )
    # A worker adds nothing to the study: the creator enqueued the baselines (or chose not
    # to) and stored the batch-size probe.
    settings = settings_from_study(
        study,
        trials=int(total),
        storage=url,
        allow_mixed_hardware=allow_mixed_hardware,
        baselines=False,
        probe=False,
    )
    hosts = [*study_hosts(rdb, study._study_id), host_name()]
    return settings, storage_warnings(url, hosts)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(worker())
