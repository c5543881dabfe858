"""The configuration ``loadersearch diagnose`` diagnoses when given a study: its confirmed
winner, with the workload it was measured on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from loadersearch._loader_config import LoaderConfig
from loadersearch.errors import StudyError
from loadersearch.report._reading import open_study

if TYPE_CHECKING:
    from loadersearch.diagnose import Target


def winner_target(study_name: str | None, storage: str | None) -> Target:
    """What ``loadersearch diagnose`` diagnoses by default: the study's confirmed winner and its
    workload; PyTorch's defaults (and no study) when
    there is no study and none was named. A named study without a feasible trial is refused
    (:class:`~loadersearch.errors.StudyError`)."""
    from loadersearch.diagnose import Target
    from loadersearch.report._summary import summarize
    from loadersearch.search import stored_spec

    try:
        study = open_study(storage, study_name)
    except StudyError:
        if study_name is not None or storage is not None:
            raise
        return Target(
            LoaderConfig(),
            "no study to take a winner from: diagnosing PyTorch's defaults (w0 b16); give "
            "--num-workers/--batch-size/... or --study for another configuration",
        )
    summary = summarize(study)
    if summary.winner is None:
        raise StudyError(
            f"study {summary.study!r} has no feasible trial yet: run `loadersearch run` first, "
            "or give the configuration (--num-workers, --batch-size, ...)."
        )
    return Target(
        summary.winner.config,
        f"diagnosing the winner of study {summary.study!r}: {summary.winner.config.label()} "
        "(PyTorch's defaults beside it are stored in the study for `loadersearch report`)",
        study,
        stored_spec(study.user_attrs, "workload"),
    )
