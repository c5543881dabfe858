"""End-to-end studies on the emulated accelerator, with real measuring processes."""

from __future__ import annotations

import os

import optuna
import pytest
from helpers.studies import EmulatedStudy, run_cli
from optuna.trial import TrialState

from loadersearch.search import clearly_slower, noise_margin
from loadersearch.search._space_text import KNOBS


def _load(study: EmulatedStudy) -> optuna.Study:
    return optuna.load_study(study_name=study.name, storage=study.storage)


def test_a_small_study_creates_the_sqlite_database(emulated_study: EmulatedStudy) -> None:
    assert os.path.getsize(emulated_study.db_path) > 0
    assert "Paste into your training code" in emulated_study.first.output
    assert "DataLoader(dataset" in emulated_study.first.output
    assert "EMULATED" in emulated_study.first.output


def test_rerunning_with_more_trials_adds_exactly_the_difference(
    emulated_study: EmulatedStudy,
) -> None:
    study = _load(emulated_study)
    finished = study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert len(finished) == 8
    assert "resuming, 6 of 8 trials finished" in emulated_study.second.output


def test_trials_carry_the_five_parameters_and_the_measurement(
    emulated_study: EmulatedStudy,
) -> None:
    study = _load(emulated_study)
    trials = study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    seen = set().union(*(t.params for t in trials))
    assert seen == set(KNOBS) - {"start_method", "cache"}  # fixed unless --space ...
    for t in trials:
        if t.params["num_workers"] > 0:
            assert {"prefetch_factor", "persistent_workers"} <= set(t.params)
        else:
            assert "prefetch_factor" not in t.params
        for key in (
            "steady_rate",
            "start_cost_s",
            "wait_fraction",
            "window_cv",
            "host",
            "status",
            "emulated",
            "overhead_s",
            "peak_vram_bytes",
            "peak_rss_bytes",
            "cpu_util_mean",
            "gpu_util_mean",
            "nvml_peak_bytes",
        ):
            assert key in t.user_attrs, key
        assert t.user_attrs["emulated"] is True


def test_baselines_come_first_with_their_names(emulated_study: EmulatedStudy) -> None:
    study = _load(emulated_study)
    names = [study.trials[i].user_attrs.get("baseline") for i in range(3)]
    assert names == ["pytorch", "article", "ultralytics"]
    # (a baseline pruned while the machine was busy is queued once more, under its name)
    firsts = [t for t in study.trials if "requeued_from" not in t.user_attrs]
    assert sum(1 for t in firsts if t.user_attrs.get("baseline")) == 3


def test_no_trial_of_the_run_repeats_a_configuration(emulated_study: EmulatedStudy) -> None:
    study = _load(emulated_study)
    trials = study.get_trials(states=(TrialState.COMPLETE, TrialState.PRUNED))
    assert len(trials) == 8
    # A trial pruned while the machine was busy is measured once more on purpose
    # (requeued_from); no other trial repeats a configuration.
    configs = [t.user_attrs["config"] for t in trials if "requeued_from" not in t.user_attrs]
    assert len(set(configs)) == len(configs)
    assert not [t.number for t in trials if "repeat_of" in t.user_attrs]
    # (a requeued trial was proposed by the queue, not the sampler: it has no proposed_by)
    searched = [t for t in trials if not t.user_attrs.get("baseline")
                and "requeued_from" not in t.user_attrs]  # fmt: skip
    proposers = {t.user_attrs["proposed_by"] for t in searched}
    assert proposers <= {"structured", "random (repeat avoided)"}
    assert study.user_attrs["sampler"] == "structured"


def test_slow_trials_are_pruned_after_the_pruner_saw_enough_windows(
    emulated_study: EmulatedStudy,
) -> None:
    study = _load(emulated_study)
    pruned = study.get_trials(states=(TrialState.PRUNED,))
    # The batch-8 trials run at ~0.5x the batch-16 ones: pruned, unless the best trial's
    # windows spread so widely (a loaded machine) that its noise margin reaches ~0.5 as well.
    margin = noise_margin(0.05, study.best_trial.user_attrs.get("window_cv"))
    assert pruned or margin >= 0.4, ([(t.params, t.value) for t in study.trials], margin)
    for t in pruned:
        assert t.user_attrs["status"] == "pruned"
        assert 4 <= t.user_attrs["windows_done"] < 8
        # What it lost against: the best trial finished before it was pruned, window for
        # window. (Not the mean of its windows against the best value: the pruner ranks paired
        # windows, so one fast window does not save a trial; a clean clone's pruned trial had
        # windows 49.8, 98.3, 102.5, 84.5, 52.6, mean 77.5, above a best of 70.4.)
        before = [
            b for b in study.get_trials(states=(TrialState.COMPLETE,))
            if b.datetime_complete < t.datetime_complete
        ]  # fmt: skip
        best = max(before, key=lambda b: b.value)
        shared = sorted(set(t.intermediate_values) & set(best.intermediate_values))
        assert len(shared) >= 4
        assert clearly_slower(
            [t.intermediate_values[s] for s in shared],
            [best.intermediate_values[s] for s in shared],
            margin=noise_margin(0.05, best.user_attrs.get("window_cv")),
        ), (t.intermediate_values, best.number, best.intermediate_values)


def test_the_study_stores_its_spec_hardware_probe_and_confirmation(
    emulated_study: EmulatedStudy,
) -> None:
    attrs = _load(emulated_study).user_attrs
    assert attrs["spec"]["workload"]["kind"] == "emulated"
    assert attrs["hardware"]["cpu_count"] == os.cpu_count()
    assert attrs["probe"]["skipped"]  # no VRAM cap given: nothing to probe
    assert attrs["inflight_images"] > 1000  # the creator's queue bound (24 GiB here: ample)
    confirmation = attrs["confirmation"]
    assert confirmation["finished_trials"] == 8
    assert any(c.get("baseline") for c in confirmation["candidates"])
    assert {m["round"] for m in confirmation["measurements"]} == {0}


def test_a_different_spec_under_the_same_study_name_is_refused(
    emulated_study: EmulatedStudy, tiny_dataset: str
) -> None:
    before = os.stat(emulated_study.db_path).st_mtime_ns
    result = run_cli(
        ["run", "--workload", "emulated", "--data", tiny_dataset, "--img-size", "128",
         "--storage", emulated_study.storage, "--study", "e2e", "--trials", "9"]
    )  # fmt: skip
    assert result.exit_code == 2
    assert "already exists with a different spec" in result.output
    assert "img_size" in result.output
    assert os.stat(emulated_study.db_path).st_mtime_ns == before


def test_over_the_cap_trials_are_infeasible_not_failed(tiny_dataset: str, tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'cap.db'}"
    # 600 + 150*batch MiB: batch 8 needs 1.8 GiB and fits 2 GiB; batch 16 needs 3 GiB.
    result = run_cli(
        ["run", "--workload", "emulated", "--data", tiny_dataset, "--img-size", "64",
         "--vram-cap", "2GiB", "--no-probe", "--space", "batch_size=8:16:8",
         "--space", "num_workers=0:1", "--epochs", "1", "--steps", "2",
         "--windows-per-epoch", "2", "--warmup-epochs", "0", "--trials", "4",
         "--confirm-rounds", "0", "--storage", storage, "--study", "cap", "--seed", "0"]
    )  # fmt: skip
    study = optuna.load_study(study_name="cap", storage=storage)
    infeasible = [t for t in study.trials if t.user_attrs.get("status") == "infeasible"]
    assert len(infeasible) >= 3  # the baselines run at batch 16
    # With no feasible trial at all there is no answer: exit 3 (issue 10, fault 7).
    assert result.exit_code == (3 if len(infeasible) == 4 else 0), result.output
    for t in infeasible:
        assert t.state == TrialState.COMPLETE and t.value == 0.0
        assert t.user_attrs["infeasible_reason"] == "vram_cap"
        assert t.constraints == {"feasible": 1.0}
    assert not study.get_trials(states=(TrialState.FAIL,))


def test_the_probe_bounds_batch_sizes_by_the_emulated_cap(tiny_dataset: str, tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'probe.db'}"
    result = run_cli(
        ["run", "--workload", "emulated", "--data", tiny_dataset, "--img-size", "64",
         "--vram-cap", "3GiB", "--space", "batch_size=pow2:8:64", "--fix", "num_workers=0",
         "--epochs", "1", "--steps", "2", "--windows-per-epoch", "2", "--warmup-epochs", "0",
         "--trials", "1", "--confirm-rounds", "0", "--storage", storage, "--study", "probe"]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    probe = optuna.load_study(study_name="probe", storage=storage).user_attrs["probe"]
    # 600 + 150*batch MiB <= 3072 MiB -> batch <= 16.48: grow 8, 16 (fit), 32 (over).
    assert probe["max_batch"] == 16
    assert [(p["batch"], p["fits"]) for p in probe["probes"]] == [
        (8, True),
        (16, True),
        (32, False),
    ]
    assert "largest batch under the cap: 16" in result.output


def _own_connections(url: str) -> int:
    """This process's open connections to ``url``'s database: sockets to a server, or file
    descriptors on a SQLite file."""
    import psutil

    from loadersearch.storage import sqlite_path

    me = psutil.Process()
    path = sqlite_path(url)
    if path is not None:
        return sum(os.path.samefile(f.path, path) for f in me.open_files()
                   if os.path.exists(f.path))  # fmt: skip
    port = _server_port(url)
    return sum(1 for c in me.net_connections("tcp") if c.raddr and c.raddr.port == port)


def _server_port(url: str) -> int:
    import sqlalchemy

    parsed = sqlalchemy.engine.make_url(url)
    return parsed.port or (5432 if parsed.get_backend_name().startswith("postgres") else 3306)


@pytest.mark.slow
def test_joining_a_study_leaves_no_connection_open(storage_url, study_name) -> None:
    """A worker reads the study's spec (join_study), then runs it on a storage of its own:
    the connections of the first stayed open, idle, for the whole run (four connections per
    worker instead of two on the server: a Slurm array of 32 went past PostgreSQL's default
    max_connections, benchmarks/bench_shared_study.py)."""
    from loadersearch import Hardware
    from loadersearch.search._opening import create_or_resume_study
    from loadersearch.search._settings import Overrides, resolve_settings
    from loadersearch.search._study import join_study

    host = Hardware(cpu_count=2, physical_cores=2)
    overrides = Overrides(study={"name": study_name}, workload={"kind": "emulated"})
    settings = resolve_settings(None, overrides, hardware=host, storage=storage_url)
    study, _ = create_or_resume_study(settings, host, create=True)
    study._storage._backend.engine.dispose()
    before = _own_connections(storage_url)

    joined, _ = join_study(study_name, storage_url, trials=3, allow_mixed_hardware=False)

    assert joined.trials == 3
    assert _own_connections(storage_url) == before
