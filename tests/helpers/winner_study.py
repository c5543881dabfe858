"""A stored study of this host whose answer is known: two finished trials (a slower one, and
the winner), written through the real Optuna path (enqueue, ask, the space suggests, tell),
so that :func:`loadersearch.load_best` reads it as it reads a study ``loadersearch run``
made. For the tests of what reads a study's winner (the framework integrations), without a
measurement."""

from __future__ import annotations

import optuna

from loadersearch import LoaderConfig, fingerprint
from loadersearch.search import SearchSpace

SPACE = SearchSpace.from_dict(
    {
        "num_workers": [0, 4],
        "batch_size": [4, 32],
        "batch_step": 4,
        "prefetch_factor": [1, 8],
        "pin_memory": [False, True],
        "persistent_workers": [False, True],
    }
)


def make_winner_study(
    storage: str, name: str, winner: LoaderConfig, slower: LoaderConfig
) -> optuna.Study:
    """Study ``name`` in ``storage``, of this host's hardware: ``slower`` at 50 img/s, then
    ``winner`` at 90 img/s (unconfirmed: the best trial is the answer)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=storage, study_name=name, direction="maximize")
    study.set_user_attr(
        "spec",
        {"workload": {"kind": "train"}, "plan": {"epochs": 2}, "space": SPACE.to_dict()},
    )
    study.set_user_attr("hardware", fingerprint().to_dict())
    for config, value in ((slower, 50.0), (winner, 90.0)):
        study.enqueue_trial(SPACE.params_of(config))
        trial = study.ask()
        assert SPACE.suggest(trial) == config
        for step in range(4):
            trial.report(value, step)
        trial.set_user_attr("config", config.label())
        trial.set_user_attr("feasible", True)
        trial.set_user_attr("steady_rate", value)
        study.tell(trial, value)
    return study
