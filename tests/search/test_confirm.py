"""The confirmation: finalists chosen from the study, re-measured interleaved, named by median."""

from __future__ import annotations

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution

from loadersearch import LoaderConfig
from loadersearch.measure import ERROR, OK, MeasureResult
from loadersearch.search._confirm import (
    finalists,
    remeasure_interleaved,
    trial_config,
)

optuna.logging.set_verbosity(optuna.logging.WARNING)
DISTS = {
    "num_workers": IntDistribution(0, 4),
    "batch_size": IntDistribution(8, 32, step=8),
    "pin_memory": CategoricalDistribution([False, True]),
    "prefetch_factor": IntDistribution(1, 8),
    "persistent_workers": CategoricalDistribution([False, True]),
}


def _trial(value: float, feasible: bool = True, baseline: str | None = None, **params):
    params = {"pin_memory": False, **params}
    if params.get("num_workers", 0) > 0:
        params.setdefault("prefetch_factor", 2)
        params.setdefault("persistent_workers", False)
    attrs = {"feasible": feasible, **({"baseline": baseline} if baseline else {})}
    return optuna.trial.create_trial(
        params=params,
        distributions={k: DISTS[k] for k in params},
        value=value,
        user_attrs=attrs,
    )


def _study(*trials) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for t in trials:
        study.add_trial(t)
    return study


def test_finalists_are_the_top_distinct_configurations_and_every_measured_baseline() -> None:
    study = _study(
        _trial(50.0, baseline="pytorch", num_workers=0, batch_size=16),
        _trial(90.0, num_workers=2, batch_size=16),
        _trial(95.0, num_workers=2, batch_size=16),  # the same configuration again
        _trial(80.0, num_workers=1, batch_size=8),
        _trial(70.0, num_workers=4, batch_size=32),
        _trial(0.0, feasible=False, num_workers=4, batch_size=32, prefetch_factor=8),
        _trial(60.0, baseline="ultralytics", num_workers=2, batch_size=16, prefetch_factor=4),
    )
    chosen = finalists(study, space_fixed={}, k=3)
    assert [c["label"] for c in chosen] == [
        "w2 b16 pf2",
        "w1 b8 pf2",
        "w4 b32 pf2",
        "w2 b16 pf4",  # the baselines, not among the top 3, best first
        "w0 b16",
    ]
    assert chosen[0]["trial"] == 2
    assert [c["baseline"] for c in chosen[3:]] == ["ultralytics", "pytorch"]


def test_where_the_top_share_one_batch_the_best_of_another_batch_within_reach_is_a_finalist():
    # The search walked the workers at batch 32: its near-duplicates fill the top 3, each the
    # largest of many noisy measurements; batch 16, measured twice, may be the better batch.
    plateau = [_trial(v, num_workers=w, batch_size=32) for w, v in ((4, 51.2), (3, 49.0),
               (2, 48.9), (1, 47.0))]  # fmt: skip
    study = _study(*plateau, _trial(44.0, num_workers=2, batch_size=16),
                   _trial(45.0, num_workers=3, batch_size=16), _trial(48.0, num_workers=1,
                   batch_size=8))  # fmt: skip
    chosen = finalists(study, space_fixed={}, k=3)
    assert [c["label"] for c in chosen] == ["w4 b32 pf2", "w3 b32 pf2", "w2 b32 pf2", "w1 b8 pf2"]
    # None within 15% of the best: the top 3 alone (48.0 -> 43.0, 15.6% below 51.2).
    study = _study(*plateau, _trial(43.0, num_workers=1, batch_size=8))
    assert [c["label"] for c in finalists(study, space_fixed={}, k=3)] == [
        "w4 b32 pf2", "w3 b32 pf2", "w2 b32 pf2"]  # fmt: skip
    # The top 3 already hold two batch sizes: nothing added.
    study = _study(*plateau[:2], _trial(48.0, num_workers=1, batch_size=8),
                   _trial(47.5, num_workers=2, batch_size=16))  # fmt: skip
    assert len(finalists(study, space_fixed={}, k=3)) == 3


def test_a_baseline_among_the_top_is_labelled_not_added_twice() -> None:
    study = _study(
        _trial(90.0, baseline="ultralytics", num_workers=2, batch_size=16),
        _trial(80.0, num_workers=1, batch_size=8),
    )
    chosen = finalists(study, space_fixed={}, k=3)
    assert len(chosen) == 2 and chosen[0]["baseline"] == "ultralytics"


def test_a_trial_without_workers_has_no_prefetch_or_persistence() -> None:
    t = _trial(10.0, num_workers=0, batch_size=8)
    fixed = {"prefetch_factor": 4, "persistent_workers": True}
    assert trial_config(t, fixed) == LoaderConfig(num_workers=0, batch_size=8)


def test_remeasurement_interleaves_configurations_and_counts_failures_as_zero() -> None:
    a, b = LoaderConfig(batch_size=8), LoaderConfig(num_workers=1, batch_size=8)
    order: list[str] = []
    rates = iter([10.0, 20.0, 12.0, None, 11.0, 22.0])

    def measure(config: LoaderConfig) -> MeasureResult:
        order.append(config.label())
        rate = next(rates)
        status = OK if rate is not None else ERROR
        return MeasureResult(config=config, status=status, objective=rate)

    seen = []
    values = remeasure_interleaved(
        [a, b], measure, rounds=3, on_result=lambda r, c, res: seen.append((r, c.label()))
    )
    assert order == ["w0 b8", "w1 b8 pf2"] * 3
    assert values == {a: [10.0, 12.0, 11.0], b: [20.0, 0.0, 22.0]}
    assert seen[0] == (0, "w0 b8") and seen[-1] == (2, "w1 b8 pf2")


def test_no_rounds_means_no_measurement() -> None:
    called = []
    values = remeasure_interleaved([LoaderConfig()], lambda c: called.append(c), rounds=0)
    assert values == {LoaderConfig(): []} and called == []


def _pruned_baseline(windows: list[float], baseline: str, **params):
    params = {"pin_memory": False, **params}
    if params.get("num_workers", 0) > 0:
        params.setdefault("prefetch_factor", 2)
        params.setdefault("persistent_workers", False)
    return optuna.trial.create_trial(
        params=params,
        distributions={k: DISTS[k] for k in params},
        state=optuna.trial.TrialState.PRUNED,
        intermediate_values=dict(enumerate(windows)),
        user_attrs={"feasible": True, "baseline": baseline},
    )


def test_a_pruned_baseline_is_remeasured_beside_the_finalists_not_quoted_from_its_windows():
    # The case: a pruned baseline's window mean (39.6 img/s, measured at a quiet
    # moment) was compared with the winner's confirmation (9.8 img/s, a busy one).
    study = _study(
        _trial(49.0, num_workers=4, batch_size=16),
        _pruned_baseline([40.0, 39.2], "ultralytics", num_workers=2, batch_size=16),
        _trial(0.0, feasible=False, baseline="article", num_workers=4, batch_size=32),
    )
    chosen = finalists(study, space_fixed={}, k=3)
    assert [c["baseline"] for c in chosen] == [None, "ultralytics"]
    assert chosen[1]["trial_value"] is None  # it has no value of its own to quote


def test_a_baseline_that_beats_the_named_winner_in_the_same_rounds_is_the_answer():
    from types import SimpleNamespace

    from loadersearch.search._confirm import confirm_study

    study = _study(
        _trial(60.0, num_workers=4, batch_size=16),  # lucky in its trial
        _trial(50.0, baseline="pytorch", num_workers=0, batch_size=16),
    )
    rates = {"w4 b16 pf2": 30.0, "w0 b16": 45.0}  # the same rounds: the baseline is faster

    def measure(config: LoaderConfig) -> MeasureResult:
        return MeasureResult(config=config, status=OK, objective=rates[config.label()])

    objective = SimpleNamespace(
        measure=measure, host="h", space=SimpleNamespace(fixed=lambda: {})
    )
    confirmation = confirm_study(study, objective, rounds=2)
    assert confirmation["winner"] == 1

    from loadersearch.report import summarize

    summary = summarize(study)
    assert summary.winner.config == LoaderConfig(num_workers=0, batch_size=16)


class _Scripted:
    """A quiet-wait whose answers are scripted (the real one reads the machine's load)."""

    def __init__(self, answers: list[bool]) -> None:
        self.answers = answers
        self.busy_rounds = 0

    def wait(self) -> bool:
        return self.answers.pop(0)


def _busy_first(rates: list[tuple[float, bool]]):
    it = iter(rates)

    def measure(config: LoaderConfig) -> MeasureResult:
        rate, busy = next(it)
        return MeasureResult(config=config, status=OK, objective=rate, busy_host=busy)

    return measure


def test_a_busy_round_is_measured_again_once_the_machine_is_quiet():
    a, b = LoaderConfig(batch_size=8), LoaderConfig(num_workers=1, batch_size=8)
    measure = _busy_first([(5.0, True), (9.0, False), (10.0, False), (20.0, False)])
    quiet = _Scripted([True])
    values = remeasure_interleaved([a, b], measure, rounds=1, quiet=quiet)
    assert values == {a: [10.0], b: [20.0]}  # the busy round's values are dropped
    assert quiet.busy_rounds == 0


def test_a_round_kept_busy_when_no_quiet_moment_comes_is_counted():
    a = LoaderConfig(batch_size=8)
    quiet = _Scripted([False])
    values = remeasure_interleaved([a], _busy_first([(5.0, True)]), rounds=1, quiet=quiet)
    assert values == {a: [5.0]} and quiet.busy_rounds == 1


_QUIET = """
import json, sys
from loadersearch.measure import _hostload
from loadersearch.search._confirm import QuietWait
if len(sys.argv) > 2:  # steal time's share that flags a span (a virtual machine has some)
    _hostload.STEAL_SHARE = float(sys.argv[2])
notes = []
quiet = QuietWait(float(sys.argv[1]), notes.append)
print(json.dumps({"quiet": quiet.wait(), "waited": quiet.waited_s, "notes": notes}))
"""


def _quiet_wait(limit_s: float, share: str, steal: str | None = None) -> dict:
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _QUIET, str(limit_s), *([steal] if steal else [])],
        env={**os.environ, "LOADERSEARCH_BUSY_SHARE": share},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_wait_for_quiet_gives_up_on_a_machine_kept_busy_and_says_so(burners):
    # Run in another process: the burners are this test's children, outside that process.
    out = _quiet_wait(4.0, "0.5")
    assert out["quiet"] is False and out["waited"] >= 4.0
    assert "waiting for a quieter moment" in out["notes"][0]
    assert "stayed busy" in out["notes"][-1]


@pytest.mark.slow
def test_the_wait_for_quiet_ends_at_the_first_quiet_span():
    # No machine is busier than all its CPUs, nor has all of their time stolen (CI's virtual
    # machine's spans had at least 10% steal: the wait went on for 20 s).
    out = _quiet_wait(60.0, "5", steal="2")
    assert out["quiet"] is True and out["waited"] <= 2.0


def test_an_inconclusive_confirmation_is_never_current():
    from loadersearch.search._confirm import confirmation_is_current

    study = _study(_trial(50.0, num_workers=0, batch_size=16))
    study.set_user_attr(
        "confirmation", {"rounds": 3, "finished_trials": 1, "inconclusive": False}
    )
    assert confirmation_is_current(study, 3)
    study.set_user_attr("confirmation", {"rounds": 3, "finished_trials": 1, "inconclusive": True})
    assert not confirmation_is_current(study, 3)
