"""Whether a stored study is one loadersearch created (:func:`foreign_study_problems`,
:func:`require_loadersearch_study`: an answer read from another tool's study would be
invented), and which stored options are not part of what a study measures
(:data:`NOT_IDENTITY`: a resume may change them without splitting the study).
"""

from __future__ import annotations

from typing import Any

from loadersearch.errors import SpecError
from loadersearch.search._space_text import KNOBS

# Workload fields that do not change what a trial measures: a resume may change them without
# splitting the study (e.g. --skip-bad-samples after a run stopped on a bad label).
# Options that do not change what a trial measures, only how: a study resumed with other values
# takes the run's. The precision and its time limit only decide how long a measurement goes on
# to pin the same figure down.
NOT_IDENTITY = {
    "workload": frozenset({"skip_bad_samples", "cache_dir"}),
    "plan": frozenset({"precision", "extend_limit_s"}),
}


def foreign_study_problems(study: Any) -> list[str]:
    """What an Optuna study lacks to be one loadersearch created (empty when it is one): its
    spec (workload, plan, space), a maximised objective, parameters among the five knobs."""
    import optuna

    problems = []
    spec = study.user_attrs.get("spec")
    if not isinstance(spec, dict):
        problems.append("no loadersearch spec (user attribute 'spec': workload, plan, space)")
    else:
        absent = [part for part in ("workload", "plan", "space") if part not in spec]
        if absent:
            problems.append(f"an incomplete spec (no {', '.join(absent)})")
    if list(study.directions) != [optuna.study.StudyDirection.MAXIMIZE]:
        directions = ", ".join(d.name.lower() for d in study.directions)
        problems.append(f"it {directions}s its objective (loadersearch maximises images/s)")
    params = set().union(*(t.params for t in study.get_trials(deepcopy=False)))
    other = sorted(params - set(KNOBS))
    if other:
        problems.append(f"parameters that are not DataLoader knobs ({', '.join(other[:5])})")
    return problems


def require_loadersearch_study(study: Any, url: str) -> None:
    """Refuse (:class:`SpecError`) a study loadersearch did not create, naming what it lacks:
    an answer read from another tool's study would be invented."""
    problems = foreign_study_problems(study)
    if problems:
        raise SpecError(
            f"study {study.study_name!r} in {url} was not created by loadersearch: "
            f"{'; '.join(problems)}. loadersearch reads only its own studies; name one with "
            "--study (optuna-dashboard shows any study)."
        )
