"""The confirmation's race: a finalist the rounds left cannot make the winner is measured no
further, and the rounds stop once only the leader is left. Injected measurements (the real
ones are in the slow lane: tests/cli/test_busy_answer.py)."""

from __future__ import annotations

import random
from io import StringIO
from types import SimpleNamespace

import optuna
import pytest
from rich.console import Console

from loadersearch import LoaderConfig
from loadersearch.measure import OK, MeasureResult
from loadersearch.report import (
    Importance,
    baselines_not_separated,
    finalists_not_separated,
    not_separated,
    render_summary,
    study_note,
    summarize,
    write_report,
)
from loadersearch.search._confirm import (
    confirm_study,
    race_noise,
    race_survivors,
    remeasure_interleaved,
)
from loadersearch.search._race import common_drift_of

optuna.logging.set_verbosity(optuna.logging.WARNING)
A, B, C = (LoaderConfig(num_workers=w, batch_size=8) for w in (0, 1, 2))


def test_with_two_rounds_left_and_no_noise_bound_no_rival_is_out():
    # however slow its first round, two more high ones would give it the highest median
    values = {A: [100.0], B: [10.0]}
    assert race_survivors(values, [A, B], done=1, rounds=3) == [A, B]


def test_a_rival_whose_best_of_two_is_below_the_leaders_worst_is_out_before_round_3():
    values = {A: [100.0, 96.0], B: [95.0, 90.0], C: [97.0, 80.0]}
    # B: best 95 < A's worst 96, out; C: 97 >= 96, a high third round could still win it
    assert race_survivors(values, [A, B, C], done=2, rounds=3) == [A, C]


def test_the_noise_bound_drops_a_rival_beaten_beyond_it_after_one_round():
    values = {A: [100.0], B: [70.0], C: [85.0]}
    # noise 10%: B's best case 77 < A's worst 90, out; C's 93.5 >= 90, in
    assert race_survivors(values, [A, B, C], done=1, rounds=3, noise=0.10) == [A, C]


def test_a_rival_whose_measurement_failed_is_not_bounded_by_the_noise():
    values = {A: [100.0], B: [0.0]}  # a failure is no rate: its next one could be anything
    assert race_survivors(values, [A, B], done=1, rounds=3, noise=0.10) == [A, B]


def test_no_round_left_ends_the_race():
    assert race_survivors({A: [1.0], B: [2.0]}, [A, B], done=3, rounds=3) == []


def test_the_noise_is_the_largest_ratio_between_two_measurements_of_one_configuration():
    values = {A: [100.0], B: [50.0, 0.0], C: [80.0]}  # B's failed measurement (0) is no rate
    trial_values = {A: 110.0, B: None, C: 96.0}
    assert race_noise(values, trial_values, floor=0.1) == pytest.approx(0.2)  # C: 96 / 80
    assert race_noise(values, {A: 101.0, B: None, C: None}, floor=0.1) == 0.1  # the floor
    assert race_noise({A: [100.0], B: [50.0]}, {A: None, B: None}, floor=0.1) is None


def test_a_drift_common_to_every_finalist_since_its_trial_is_no_noise():
    # Every trial value 15% above round 1 (the machine is slower now, for all alike): the
    # ratios go, the floor is left; without the drift taken out they would be 15%.
    values = {A: [100.0], B: [80.0], C: [60.0]}
    trial_values = {A: 115.0, B: 92.0, C: 69.0}
    assert race_noise(values, trial_values, floor=0.1) == pytest.approx(0.1)
    assert race_noise(values, trial_values, floor=0.1, common_drift=False) == pytest.approx(0.15)
    # What one finalist differs from the common drift still widens it: C's trial 30% above
    # its round against a median drift of 15%.
    trial_values[C] = 78.0
    assert race_noise(values, trial_values, floor=0.1) == pytest.approx(78 / 69 - 1)


def test_two_finalists_cannot_tell_a_drift_from_the_noise():
    values = {A: [100.0], B: [80.0], C: [60.0]}
    trial_values = {A: 115.0, B: 92.0, C: None}  # two ratios only: the trial values as they are
    assert common_drift_of(values, trial_values) is None
    assert race_noise(values, trial_values, floor=0.1) == pytest.approx(0.15)


def _winner(values: dict[LoaderConfig, list[float]]) -> LoaderConfig:
    import statistics

    return max(values, key=lambda c: statistics.median(values[c]))


def test_without_a_noise_bound_the_race_names_the_winner_the_whole_budget_would():
    # Any measurements at all: the exact rule drops only a rival that no value of the rounds
    # left could make the winner, so the winner is the full budget's, in fewer measurements.
    rng = random.Random(7)
    configs = [LoaderConfig(num_workers=w, batch_size=8) for w in range(5)]
    saved = 0
    for _ in range(300):
        rates = {c: [rng.uniform(20, 120) for _ in range(3)] for c in configs}

        def measure(config, rates=rates, calls={}):  # noqa: B006 - a counter per draw
            n = calls[config] = calls.get(config, -1) + 1
            return MeasureResult(config=config, status=OK, objective=rates[config][n])

        full = remeasure_interleaved(configs, measure, rounds=3)
        raced = remeasure_interleaved(
            configs,
            lambda c, rates=rates, seen={}: _replay(rates, seen, c),
            rounds=3,
            survivors=lambda done, values, active: race_survivors(
                values, active, done=done, rounds=3
            ),
        )
        assert _winner(raced) == _winner(full)
        saved += 15 - sum(len(v) for v in raced.values())
    assert saved > 0  # the rule does drop rivals


def _replay(rates, seen, config):
    n = seen[config] = seen.get(config, -1) + 1
    return MeasureResult(config=config, status=OK, objective=rates[config][n])


def _trial(value: float | None, baseline: str | None = None, *, pruned=False, **params):
    from optuna.distributions import CategoricalDistribution, IntDistribution
    from optuna.trial import TrialState

    dists = {
        "num_workers": IntDistribution(0, 4),
        "batch_size": IntDistribution(8, 32, step=8),
        "pin_memory": CategoricalDistribution([False, True]),
        "prefetch_factor": IntDistribution(1, 8),
        "persistent_workers": CategoricalDistribution([False, True]),
    }
    params = {"pin_memory": False, **params}
    if params.get("num_workers", 0) > 0:
        params.setdefault("prefetch_factor", 2)
        params.setdefault("persistent_workers", False)
    return optuna.trial.create_trial(
        params=params,
        distributions={k: dists[k] for k in params},
        value=value,
        user_attrs={"feasible": True, **({"baseline": baseline} if baseline else {})},
        # Optuna keeps a pruned trial's last reported value as its value
        **({"state": TrialState.PRUNED, "intermediate_values": {0: value}} if pruned else {}),
    )


def _confirm(
    rates: dict[str, list[tuple[float, bool]]], *trials, rounds: int = 3, progress=None
):
    """confirm_study on a study of ``trials``, each finalist measuring ``rates[label]`` in
    turn: (images/s, busy)."""
    study = optuna.create_study(direction="maximize")
    for t in trials:
        study.add_trial(t)
    calls: list[str] = []

    def measure(config: LoaderConfig) -> MeasureResult:
        label = config.label()
        rate, busy = rates[label][sum(c == label for c in calls)]
        calls.append(label)
        return MeasureResult(config=config, status=OK, objective=rate, busy_host=busy)

    objective = SimpleNamespace(
        measure=measure,
        host="h",
        space=SimpleNamespace(fixed=lambda: {}),
        plan=SimpleNamespace(precision=0.05),
    )
    return study, confirm_study(study, objective, rounds=rounds, progress=progress), calls


def test_a_baseline_beaten_beyond_the_noise_is_measured_once_and_the_race_stops_early(
    monkeypatch,
):
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, confirmation, calls = _confirm(
        {
            "w2 b16 pf2": [(100.0, False), (98.0, False)],
            "w1 b16 pf2": [(97.0, False), (94.0, False)],  # best 97 < the leader's worst 98
            "w0 b16": [(50.0, False)],  # PyTorch's defaults: half the rate, beyond any noise
        },
        _trial(104.0, num_workers=2, batch_size=16),
        _trial(99.0, num_workers=1, batch_size=16),
        _trial(52.0, baseline="pytorch", num_workers=0, batch_size=16),
    )
    assert calls == ["w2 b16 pf2", "w1 b16 pf2", "w0 b16", "w2 b16 pf2", "w1 b16 pf2"]
    by_label = {c["label"]: c for c in confirmation["candidates"]}
    assert by_label["w0 b16"]["out_after"] == 1 and by_label["w0 b16"]["n"] == 1
    assert by_label["w1 b16 pf2"]["out_after"] == 2
    assert by_label["w2 b16 pf2"]["out_after"] is None and by_label["w2 b16 pf2"]["n"] == 2
    assert confirmation["race_noise"] == pytest.approx(0.1)  # the floor: 2 x precision
    assert confirmation["skipped"] == 4 and confirmation["rounds_done"] == 2
    assert confirmation["winner"] == 0

    from loadersearch.report import cost, finalist_cells, summarize, winner_evidence

    summary = summarize(study)
    assert "median of 2 interleaved re-measurements" in winner_evidence(summary.winner)
    cells = {f.label: finalist_cells(f) for f in summary.finalists}
    assert cells["w0 b16"][3] == "50.0 (of 1: out)" and cells["w0 b16"][5] == "-"
    assert cells["w2 b16 pf2"][3] == "99.0"
    assert "5 confirmation measurements; 4 of its rounds not needed" in cost(summary)


def test_a_machine_slower_than_during_the_trials_is_said_and_stored_and_no_noise(monkeypatch):
    # Every finalist 15% below its trial (the machine changed, for all alike): the race's bound
    # is its 10% floor, so the baseline at 0.75x the leader is out after round 1, where the
    # trials' 15% would have kept it (its best case 0.75 x 1.15 against the leader's 0.85).
    from loadersearch.search import Progress

    class Notices(Progress):
        def __init__(self) -> None:
            self.said: list[str] = []

        def notice(self, text: str) -> None:
            self.said.append(text)

    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    progress = Notices()
    study, confirmation, calls = _confirm(
        {
            "w2 b16 pf2": [(100.0, False), (99.0, False), (101.0, False)],
            "w1 b16 pf2": [(98.0, False), (97.0, False), (100.0, False)],
            "w0 b16": [(75.0, False), (76.0, False), (74.0, False)],
        },
        _trial(115.0, num_workers=2, batch_size=16),
        _trial(112.7, num_workers=1, batch_size=16),
        _trial(86.3, baseline="pytorch", num_workers=0, batch_size=16),
        progress=progress,
    )
    assert confirmation["trial_drift"] == pytest.approx(1.15, abs=0.001)
    assert confirmation["race_noise"] == pytest.approx(0.1)
    assert calls.count("w0 b16") == 1
    assert any("13% below their trials" in text for text in progress.said), progress.said
    from loadersearch.report import cost, summarize

    assert "the finalists 13% below their trials" in cost(summarize(study))


def test_a_pruned_baselines_last_window_is_no_measurement_to_set_the_noise_by(monkeypatch):
    # The pruned baseline's value (its last window, 40) against its round (75) would make the
    # noise 88% and keep it; it is left out: the bound is the floor, and 75 < 0.82 x 100 is out.
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    _, confirmation, calls = _confirm(
        {
            "w2 b16 pf2": [(100.0, False), (99.0, False), (101.0, False)],
            "w1 b16 pf2": [(98.0, False), (97.0, False), (100.0, False)],
            "w0 b16": [(75.0, False), (76.0, False), (74.0, False)],
        },
        _trial(102.0, num_workers=2, batch_size=16),
        _trial(99.0, num_workers=1, batch_size=16),
        _trial(40.0, baseline="pytorch", pruned=True, num_workers=0, batch_size=16),
    )
    assert confirmation["race_noise"] == pytest.approx(0.1)
    assert calls.count("w0 b16") == 1
    assert confirmation["trial_drift"] is None  # two complete trials only: no drift told


def test_a_baseline_the_rounds_do_not_separate_from_the_winner_is_said_to_be_in_the_noise(
    monkeypatch,
):
    # Stop 43's fresh clone: the winner 39.0..48.7 img/s, Ultralytics' rule 33.9..43.5 in the
    # same rounds, quoted at 1.08x: a speedup within the noise, said so in every view.
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, confirmation, _ = _confirm(
        {
            "w2 b16 pf8": [(43.6, False), (39.0, False), (48.7, False)],
            # its trial 47.2, its rounds 34-35: the race allows ~35% noise after round 1
            "w3 b16 pf8": [(34.1, False), (35.4, False), (35.0, False)],
            "w1 b16 pf4": [(33.9, False), (40.3, False), (43.5, False)],
            "w0 b16": [(20.0, False), (21.0, False), (20.5, False)],  # clear of the winner
        },
        _trial(44.0, num_workers=2, batch_size=16, prefetch_factor=8),
        _trial(47.2, num_workers=3, batch_size=16, prefetch_factor=8),
        _trial(33.4, baseline="ultralytics", num_workers=1, batch_size=16, prefetch_factor=4),
        _trial(21.0, baseline="pytorch", num_workers=0, batch_size=16),
    )
    study.set_user_attr(  # the baselines as a study stores them
        "baselines",
        [
            {"name": "ultralytics", "rule": "min(8, CPUs)", "config": LoaderConfig(
                num_workers=1, batch_size=16, prefetch_factor=4).to_dict()},
            {"name": "pytorch", "rule": "PyTorch's defaults", "config": LoaderConfig(
                num_workers=0, batch_size=16).to_dict()},
        ],
    )  # fmt: skip
    summary = summarize(study)
    said = baselines_not_separated(summary)
    assert said is not None
    assert "from ultralytics (w1 b16 pf4: 33.9..43.5" in said and "pytorch" not in said
    assert "(39.0..48.7 img/s)" in said and ", 1.08x)" in said  # 43.6 / 40.3
    out = StringIO()
    render_summary(summary, storage=None, console=Console(file=out, width=200))
    assert "Within the noise: the rounds do not separate the winner" in out.getvalue()
    note = study_note(summary, Importance(values={}, trials=[]))  # the dashboard's note
    assert "Within the noise: the rounds do not separate the winner" in note


def test_after_a_busy_round_kept_the_race_drops_only_what_no_measurement_could_save(
    monkeypatch,
):
    # The quiet budget is 0: the busy first round is kept, the answer is inconclusive, and the
    # noise bound is off: the slow baseline is measured in every round.
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    _, confirmation, calls = _confirm(
        {
            "w2 b16 pf2": [(100.0, True), (98.0, False), (99.0, False)],
            "w0 b16": [(50.0, True), (49.0, False), (51.0, False)],
        },
        _trial(104.0, num_workers=2, batch_size=16),
        _trial(52.0, baseline="pytorch", num_workers=0, batch_size=16),
    )
    assert confirmation["inconclusive"] is True and confirmation["race_noise"] is None
    # after round 2 the exact rule drops the baseline (51 can't beat 98): the race is decided
    assert calls == ["w2 b16 pf2", "w0 b16"] * 2
    assert confirmation["skipped"] == 2


def test_a_baseline_ahead_in_the_race_is_the_answer_however_its_trial_went(monkeypatch):
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, confirmation, _ = _confirm(
        {
            "w4 b16 pf2": [(30.0, False), (31.0, False), (29.0, False)],
            "w0 b16": [(45.0, False), (46.0, False), (44.0, False)],
        },
        _trial(60.0, num_workers=4, batch_size=16),  # lucky in its trial
        _trial(50.0, baseline="pytorch", num_workers=0, batch_size=16),
    )
    # the trial values widen the noise (60 / 30 - 1 = 100%): nobody is out after round 1
    assert confirmation["race_noise"] == pytest.approx(1.0)
    assert confirmation["winner"] == 1
    from loadersearch.report import summarize

    assert summarize(study).winner.config == LoaderConfig(num_workers=0, batch_size=16)


def test_finalists_the_rounds_do_not_separate_are_said_with_the_knobs_they_differ_in(
    monkeypatch, tmp_path
):
    # The quick start on the emulated device: prefetch 5 and 6 at w1 b32 persistent measure
    # alike (132.1..132.6 against 132.0..132.7); the answer names the knob it cannot choose,
    # and a finalist clear of the winner (w2 b16 pf8, 120-121) is not named.
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, _, _ = _confirm(
        {
            "w1 b32 pf5": [(132.6, False), (132.1, False), (132.6, False)],
            "w1 b32 pf6": [(132.0, False), (132.7, False), (132.3, False)],
            "w2 b16 pf8": [(121.0, False), (120.0, False), (120.5, False)],
        },
        _trial(132.3, num_workers=1, batch_size=32, prefetch_factor=5),
        _trial(132.2, num_workers=1, batch_size=32, prefetch_factor=6),
        _trial(122.0, num_workers=2, batch_size=16, prefetch_factor=8),
    )
    summary = summarize(study)
    said = finalists_not_separated(summary)
    assert said is not None and summary.winner.config.prefetch_factor == 5
    assert "(132.1..132.6 img/s) from w1 b32 pf6 (132.0..132.7; prefetch_factor 6 against " \
        "the winner's 5)" in said
    assert "w2 b16" not in said
    assert "num_workers" not in said and "batch_size" not in said
    out = StringIO()
    render_summary(summary, storage=None, console=Console(file=out, width=300))
    assert "Finalists within the noise" in out.getvalue()
    note = study_note(summary, Importance(values={}, trials=[]))  # the dashboard's note
    assert "Finalists within the noise" in note
    index = write_report(study, str(tmp_path))[0]  # the report page
    with open(index, encoding="utf-8") as f:
        assert 'id="finalists-alike">Finalists within the noise' in f.read()


def test_no_finalist_is_said_to_be_within_the_noise_when_the_rounds_separate_them(
    monkeypatch,
):
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, _, _ = _confirm(
        {
            "w1 b32 pf5": [(132.6, False), (132.1, False), (132.6, False)],
            "w1 b32 pf6": [(128.0, False), (129.7, False), (130.3, False)],
        },
        _trial(132.3, num_workers=1, batch_size=32, prefetch_factor=5),
        _trial(132.2, num_workers=1, batch_size=32, prefetch_factor=6),
    )
    assert finalists_not_separated(summarize(study)) is None


def test_a_finalist_without_workers_is_told_apart_by_its_worker_count_alone(monkeypatch):
    # prefetch, persistence and the start method exist only with workers: not listed
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, _, _ = _confirm(
        {
            "w0 b16": [(100.0, False), (99.0, False), (101.0, False)],
            "w1 b16 pf8 persist": [(99.5, False), (100.5, False), (98.0, False)],
        },
        _trial(101.0, num_workers=0, batch_size=16),
        _trial(100.0, num_workers=1, batch_size=16, prefetch_factor=8, persistent_workers=True),
    )
    said = finalists_not_separated(summarize(study))
    assert said is not None and "num_workers 1 against the winner's 0)" in said
    assert "prefetch_factor" not in said and "persistent_workers" not in said
    assert "start_method" not in said


def test_a_finalist_measured_to_the_end_below_the_winners_lowest_is_not_named(monkeypatch):
    # Two rounds: round 1 keeps the rival (within the 10% floor), round 2 ends the race with
    # its best (131.0) below the winner's lowest (132.1): measured to the end, yet separated.
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, confirmation, calls = _confirm(
        {
            "w1 b32 pf5": [(132.6, False), (132.1, False)],
            "w1 b32 pf6": [(130.0, False), (131.0, False)],
        },
        _trial(132.3, num_workers=1, batch_size=32, prefetch_factor=5),
        _trial(132.2, num_workers=1, batch_size=32, prefetch_factor=6),
        rounds=2,
    )
    assert calls.count("w1 b32 pf6") == 2  # in the race to the end
    summary = summarize(study)
    assert [f.out_after for f in summary.finalists] == [None, None]
    assert finalists_not_separated(summary) is None and not_separated(summary) == []


def test_a_failed_measurement_of_the_winner_makes_no_finalist_its_equal(monkeypatch):
    # A failure is stored as 0: the winner's lowest would be 0, which every rate reaches.
    monkeypatch.setenv("LOADERSEARCH_QUIET_WAIT_S", "0")
    study, _, _ = _confirm(
        {
            "w1 b32 pf5": [(150.0, False), (0.0, False), (150.0, False)],
            "w2 b16 pf5": [(140.0, False), (141.0, False), (139.0, False)],
        },
        _trial(150.0, num_workers=1, batch_size=32, prefetch_factor=5),
        _trial(141.0, num_workers=2, batch_size=16, prefetch_factor=5),
    )
    summary = summarize(study)
    assert summary.winner.config.num_workers == 1 and summary.winner.low == 0
    assert [f.out_after for f in summary.finalists] == [None, None]  # both to the end
    assert not_separated(summary) == [] and finalists_not_separated(summary) is None
