"""The optimize loop's bookkeeping of interrupted and dead trials (search/_budget.py), on a
real SQLite study with a stand-in objective."""

from __future__ import annotations

import subprocess
import sys

import optuna
import pytest
from optuna.trial import TrialState

from loadersearch.errors import Interrupted
from loadersearch.search import _budget as budget
from loadersearch.storage import open_storage


@pytest.fixture
def study(tmp_path, monkeypatch) -> optuna.Study:
    monkeypatch.setenv("LOADERSEARCH_HOST", "node-a")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}", heartbeat_interval=1,
                           grace_period=3600)  # fmt: skip
    return optuna.create_study(study_name="s", storage=storage, direction="maximize")


def test_an_interrupted_trial_is_failed_and_queued_again_with_its_baseline(study):
    study.enqueue_trial({"x": 3}, user_attrs={"baseline": "pytorch"})

    def objective(trial):
        trial.suggest_int("x", 0, 9)
        raise Interrupted()

    with pytest.raises(Interrupted) as info:
        budget.optimize_to_total(study, objective, 2)
    assert info.value.requeued == [0]
    stopped, retry = study.trials
    assert stopped.state == TrialState.FAIL and stopped.user_attrs["status"] == "interrupted"
    assert stopped.user_attrs["reason"] == "interrupted by Ctrl-C"
    assert retry.state == TrialState.WAITING and retry.user_attrs["baseline"] == "pytorch"
    assert retry.system_attrs["fixed_params"] == {"x": 3}
    assert retry.system_attrs["failed_trial"] == 0
    seen = []
    budget.optimize_to_total(study, lambda t: seen.append(t.suggest_int("x", 0, 9)) or 1.0, 2)
    assert seen[0] == 3  # the retry ran first, with the same parameters


def _running_trial(study, pid: int, host: str = "node-a") -> optuna.trial.FrozenTrial:
    trial = study.ask()
    trial.suggest_int("x", 0, 9)
    trial.set_user_attr("host", host)
    trial.set_user_attr("pid", pid)
    study._storage.set_trial_system_attr(trial._trial_id, budget.PROCESS_ATTR,
                                         budget._process_key())  # fmt: skip
    return study._storage.get_trial(trial._trial_id)


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # study.ask: a stand-in trial
def test_only_this_host_s_trials_whose_process_is_gone_are_reclaimed(study):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    alive = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    try:
        dead = _running_trial(study, int(gone.stdout))
        living = _running_trial(study, alive.pid)
        elsewhere = _running_trial(study, int(gone.stdout), host="node-b")
        assert budget.reclaim_dead_trials(study) == [dead.number]
        assert budget.reclaim_dead_trials(study) == []  # once only
    finally:
        alive.stdin.close()
        alive.wait()
    states = {t.number: t.state for t in study.trials}
    assert states[dead.number] == TrialState.FAIL
    assert states[living.number] == states[elsewhere.number] == TrialState.RUNNING
    [retry] = [t for t in study.trials if t.system_attrs.get("failed_trial") == dead.number]
    assert retry.state == TrialState.WAITING and retry.system_attrs["fixed_params"] == dead.params


@pytest.mark.filterwarnings("ignore:Heartbeat of storage")  # study.ask: a stand-in trial
def test_a_trial_left_running_before_it_said_where_is_reclaimed_once_it_is_old(study, monkeypatch):
    # A disk that filled between Optuna's creating a trial and its first attribute left it
    # RUNNING with no host, pid or heartbeat: nothing ended it, and every later run waited on
    # it ("the rest of the budget is running on other workers") for ever.
    orphan = study.ask()
    orphan.suggest_int("x", 0, 9)
    assert budget.reclaim_dead_trials(study) == []  # just begun: its process may set them now
    monkeypatch.setattr(budget, "ORPHAN_AFTER_S", 0.0)
    assert budget.reclaim_dead_trials(study) == [orphan.number]
    stopped = study._storage.get_trial(orphan._trial_id)
    assert (
        stopped.state == TrialState.FAIL and "before it recorded" in stopped.user_attrs["reason"]
    )
    [retry] = [t for t in study.trials if t.system_attrs.get("failed_trial") == orphan.number]
    assert retry.state == TrialState.WAITING and retry.system_attrs["fixed_params"] == {
        "x": stopped.params["x"]
    }


def _failed_by_another_worker(study, trial) -> None:
    """What a worker that took ``trial`` for dead does: fail it and queue it again."""
    other = optuna.load_study(study_name=study.study_name, storage=study._storage)
    other._storage.set_trial_state_values(trial._trial_id, state=TrialState.FAIL)
    budget.requeue(other, other._storage.get_trial(trial._trial_id), "heartbeat stale")


@pytest.mark.parametrize("ends", ["returns", "is pruned"])
def test_a_trial_failed_by_another_worker_meanwhile_does_not_stop_the_run(study, ends, caplog):
    # CI: a busy host delayed a trial's heartbeat past the grace period, another run failed it,
    # and this run stopped with "Cannot tell a FAIL trial" when its measurement ended.
    seen = []

    def objective(trial):
        seen.append(trial.suggest_int("x", 0, 9))
        if len(seen) == 1:
            _failed_by_another_worker(study, trial)
            if ends == "is pruned":
                raise optuna.TrialPruned()
        return 1.0

    assert budget.optimize_to_total(study, objective, 1) == 2
    first, retry = study.trials
    assert first.state == TrialState.FAIL and retry.state == TrialState.COMPLETE
    assert seen[1] == seen[0]  # the retry measured the same configuration
    assert "failed by another worker" in caplog.text


def test_an_interrupt_still_gets_through_when_another_worker_failed_the_trial(study):
    def objective(trial):
        trial.suggest_int("x", 0, 9)
        _failed_by_another_worker(study, trial)
        raise Interrupted()

    with pytest.raises(Interrupted):
        budget.optimize_to_total(study, objective, 1)


def test_a_signal_python_swallowed_still_stops_the_run_after_the_trial(study):
    # CI: SIGINT landed inside SQLAlchemy's garbage-collection callback, where Python only
    # prints "Exception ignored": the run went on and exited 0. The handler's record stops it.
    import signal

    def objective(trial):
        trial.suggest_int("x", 0, 9)
        Interrupted.received.append(signal.SIGTERM)  # what the handler did before raising
        return 1.0

    with pytest.raises(Interrupted) as info:
        budget.optimize_to_total(study, objective, 3)
    assert info.value.signum == signal.SIGTERM and not Interrupted.received
    assert [t.state for t in study.trials] == [TrialState.COMPLETE]  # the measured trial kept
