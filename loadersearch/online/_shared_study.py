"""Offline and online tuning share a study: its best configurations seed the online race, and
the online result goes back to it as a trial labelled ``online``.

A study of other hardware is not used (its throughputs say nothing of this machine): the
AutoLoader logs why and climbs its own worker ladder instead, and writes nothing back. A
missing study is the same: training never stops for want of a study.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.errors import LoaderSearchError

if TYPE_CHECKING:
    from loadersearch.online._report import OnlineReport

_logger = logging.getLogger(__name__)

SEEDS = 4  # stored configurations raced
ONLINE_ATTR = "online"  # trial user attribute marking an online result


def seeds_from_study(
    name: str, storage: str | None, fit: Callable[[LoaderConfig], LoaderConfig]
) -> tuple[list[LoaderConfig], tuple[str, str] | None]:
    """Up to :data:`SEEDS` distinct configurations of study ``name``, best first (the
    confirmed winner, then the best trials, online ones included), each made fit for this
    loader by ``fit`` (your batch size and fixed knobs), and where to write back (storage URL,
    study name); none of either when the study is missing or of other hardware. The study is
    read read-only here; :func:`record_online` opens it for writing when there is a result."""
    from loadersearch._hardware import check_compatible, fingerprint
    from loadersearch.report import open_study, space_fixed, summarize
    from loadersearch.search import feasible_complete, trial_config
    from loadersearch.storage import resolve_storage_url

    try:
        study = open_study(storage, name)
        check_compatible(study.user_attrs.get("hardware"), fingerprint(), allow_mixed=False)
    except LoaderSearchError as e:
        _logger.warning("AutoLoader: not using study %r (%s); tuning from scratch.", name, e)
        return [], None
    configs: list[LoaderConfig] = []
    winner = summarize(study).winner
    if winner is not None:
        configs.append(winner.config)
    fixed = space_fixed(study)
    for trial in feasible_complete(study, include_online=True):
        try:
            configs.append(trial_config(trial, fixed))
        except (ValueError, TypeError):  # a trial of a knob this version does not know
            continue
    seeds = list(dict.fromkeys(fit(c) for c in configs))[:SEEDS]
    if not seeds:
        _logger.warning(
            "AutoLoader: study %r has no finished trial yet; tuning from scratch.", name
        )
    return seeds, (resolve_storage_url(storage), name)


def record_online(target: tuple[str, str], report: OnlineReport) -> None:
    """Add the online result to ``study`` as a COMPLETE trial labelled ``online``: its value
    the images/s of your real loop (not the study's projected full epoch: the note says so),
    its parameters those of the chosen configuration that the study's space holds."""
    import optuna

    from loadersearch.search import CONSTRAINT, SearchSpace, stored_spec
    from loadersearch.storage import open_storage, scrub

    try:
        study = optuna.load_study(
            study_name=target[1], storage=open_storage(target[0], heartbeat=False)
        )
    except Exception as e:  # noqa: BLE001 - a storage hiccup must not stop the training
        _logger.warning(
            "AutoLoader: could not open the study to write the result: %s",
            scrub(str(e), target[0]),  # a driver's error may quote the URL's password
        )
        return
    config = report.config
    stored_space = stored_spec(study.user_attrs, "space")
    params: dict[str, Any] = {}
    distributions: dict[str, Any] = {}
    if stored_space:
        space = SearchSpace.from_dict(stored_space)
        dists = space.distributions()
        for key, value in space.params_of(config).items():
            dist = dists.get(key)
            if dist is not None and _holds(dist, value):
                params[key], distributions[key] = value, dist
    attrs = {
        ONLINE_ATTR: True,
        "label": "online",
        "config": config.to_dict(),
        "online_note": (
            "measured online by AutoLoader in a real training loop: images/s of that loop "
            "(its own step), not the study's projected full epoch"
        ),
        "steady_rate": round(report.images_per_s, 3),
        **{f"online_{k}": v for k, v in report.to_dict().items() if k not in ("config",)},
    }
    trial = optuna.trial.create_trial(
        state=optuna.trial.TrialState.COMPLETE,
        value=report.images_per_s,
        params=params,
        distributions=distributions,
        user_attrs=attrs,
        constraints={CONSTRAINT: 0.0},
    )
    try:
        study.add_trial(trial)
    except Exception as e:  # noqa: BLE001 - a storage hiccup must not stop the training
        _logger.warning(
            "AutoLoader: could not write the online result to the study: %s",
            scrub(str(e), target[0]),
        )


def _holds(dist: Any, value: Any) -> bool:
    try:
        return bool(dist._contains(dist.to_internal_repr(value)))
    except (ValueError, TypeError):
        return False
