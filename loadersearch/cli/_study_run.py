"""The sequence ``run``, ``worker`` and ``confirm`` share: the host lock checked, the study
run with its progress shown, its answer printed."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from loadersearch._hardware import Hardware
    from loadersearch.search import StudySettings


def run_and_render(
    settings: StudySettings,
    *,
    quiet: bool,
    no_wait: bool = False,
    hardware: Hardware | None = None,
    notes: bool = True,
    publish: bool = True,
    **run: Any,
) -> None:
    """Run the study of ``settings`` (:func:`~loadersearch.search._study.run_study`, with
    ``run``'s keyword arguments) under a progress display, then print its answer.

    ``no_wait``: refuse now when the host is busy (later trials queue for it as usual);
    ``notes``: each trial this process finishes is noted in optuna-dashboard; ``publish``: so
    is the study's answer (a worker leaves that to the run that confirms)."""
    from loadersearch._hardware import fingerprint
    from loadersearch._hostlock import measurement_lock
    from loadersearch.report import make_progress, render_summary, summarize, trial_hooks
    from loadersearch.report import publish as publish_note
    from loadersearch.search import run_study

    if no_wait:
        with measurement_lock(wait=False):
            pass
    progress = make_progress(quiet=quiet, target=settings.trials)
    hooks = trial_hooks(settings.storage) if notes else {}
    started = time.monotonic()
    try:
        outcome = run_study(
            settings, progress=progress, hardware=hardware or fingerprint(), **hooks, **run
        )
    finally:
        progress.close()
    elapsed = time.monotonic() - started
    if publish:  # the study's note in optuna-dashboard, current after every run
        publish_note(outcome.study)
    reconfirm = run.get("reconfirm", False)  # no trial ran, and the probe is the study's
    render_summary(
        summarize(outcome.study),
        storage=settings.storage,
        quiet=quiet,
        elapsed_s=elapsed,
        ran=0 if reconfirm else outcome.ran,
        probe=None if reconfirm else outcome.probe.describe(),
    )
