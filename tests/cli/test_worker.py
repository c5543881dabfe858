"""End to end: ``loadersearch run`` and ``loadersearch worker`` processes sharing one study, with
the emulated workload on the tiny dataset. Two hosts sharing a budget, and the refusals, on a
SQLite file and on the PostgreSQL test server when one is set; what does not depend on the
storage (a host's lock, the hardware check, a killed worker) on a SQLite file only."""

from __future__ import annotations

import signal
import subprocess
import time

import optuna
import psutil
import pytest
from helpers.cliproc import CATCHABLE, cli_env
from helpers.cliproc import FAST as CLI_FAST
from helpers.cliproc import finish as _finish
from helpers.cliproc import load as _study
from helpers.cliproc import start_cli as _cli
from helpers.wait import wait_for
from optuna.trial import TrialState

from loadersearch.storage import open_storage

FAST = [*CLI_FAST, "--no-baselines"]
# a study whose measurements last long enough to kill a worker in one (helpers.cliproc)
SLOWER = [*CATCHABLE, "--no-baselines"]
FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


@pytest.fixture
def env(tmp_path):
    """Environment of the CLI processes: a private lock directory, fast heartbeats."""
    return cli_env(tmp_path)


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A SQLite file, for the tests whose behaviour does not depend on the storage: the lock
    of a host, the hardware check, a killed worker's trial (failed by its heartbeat and run
    again on each backend in tests/storage/test_storage.py)."""
    return f"sqlite:///{tmp_path / 'study.db'}"


def _create(url, name, data, env, trials: int, host: str = "node-a", options=FAST) -> None:
    code, out = _finish(
        _cli(
            [
                "run",
                "--study",
                name,
                "--storage",
                url,
                "--trials",
                str(trials),
                "--data",
                data,
                *options,
            ],
            env,
            host,
        )  # fmt: skip
    )
    assert code == 0, out


def test_two_workers_on_two_hosts_share_one_budget_exactly(
    shared_url, study_name, tiny_dataset, env, monkeypatch
):
    from loadersearch import measurement_lock

    total = 6
    started = time.monotonic()
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", env["LOADERSEARCH_LOCK_DIR"])
    monkeypatch.setenv("LOADERSEARCH_HOST", "node-a")
    # node-a's first trial waits for its host's lock until node-b has started one of its own:
    # left to race, node-b, still importing torch on a loaded machine, can find every one of
    # the study's fast trials taken by node-a.
    with measurement_lock(wait=False):
        first = _cli(
            ["run", "--study", study_name, "--storage", shared_url, "--trials", str(total),
             "--data", tiny_dataset, *FAST], env, "node-a",
        )  # fmt: skip
        wait_for(lambda: _study(shared_url, study_name).trials, what="the study's first trial")
        second = _cli(["worker", "--study", study_name, "--storage", shared_url], env, "node-b")
        wait_for(
            lambda: any(
                t.user_attrs.get("host") == "node-b" for t in _study(shared_url, study_name).trials
            ),
            what="a trial of node-b",
        )
    for proc in (first, second):
        code, out = _finish(proc)
        assert code == 0, out
    elapsed = time.monotonic() - started
    trials = _study(shared_url, study_name).trials
    finished = [t for t in trials if t.state in FINISHED]
    assert len(finished) == total
    assert len({t.number for t in trials}) == len(trials)
    assert {t.user_attrs["host"] for t in finished} == {"node-a", "node-b"}
    print(f"two workers, {total} trials: {elapsed:.1f} s")


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL a CLI process and its measuring children: a machine that lost power."""
    tree = [psutil.Process(proc.pid), *psutil.Process(proc.pid).children(recursive=True)]
    for p in tree:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    proc.communicate()


def test_a_killed_worker_s_trial_is_re_run_by_a_new_worker_and_counts_stay_exact(
    sqlite_url, study_name, tiny_dataset, env
):
    total = 3
    _create(sqlite_url, study_name, tiny_dataset, env, trials=1, options=SLOWER)
    victim = _cli(
        ["worker", "--study", study_name, "--storage", sqlite_url, "--trials", str(total)],
        env,
        "node-a",
    )

    def running():
        return [t for t in _study(sqlite_url, study_name).trials if t.state == TrialState.RUNNING]

    wait_for(running, what="a running trial")
    [dead] = running()
    _kill_tree(victim)
    code, out = _finish(
        _cli(
            ["worker", "--study", study_name, "--storage", sqlite_url, "--trials", str(total)],
            env,
            "node-b",
        )  # fmt: skip
    )
    assert code == 0, out
    trials = _study(sqlite_url, study_name).trials
    assert len([t for t in trials if t.state in FINISHED]) == total
    failed = trials[dead.number]
    assert failed.state == TrialState.FAIL
    [rerun] = [t for t in trials if t.system_attrs.get("failed_trial") == dead.number]
    assert rerun.state in FINISHED and rerun.params == failed.params
    assert rerun.user_attrs["host"] == "node-b"


def test_a_different_hardware_class_is_refused_unless_allowed_and_then_recorded(
    sqlite_url, study_name, tiny_dataset, env
):
    _create(sqlite_url, study_name, tiny_dataset, env, trials=1)
    study = _study(sqlite_url, study_name)
    creator = study.user_attrs["hardware"]
    study.set_user_attr("hardware", {**creator, "gpu_model": "NVIDIA H100", "gpu_count": 8})
    join = ["worker", "--study", study_name, "--storage", sqlite_url, "--trials", "2"]
    code, out = _finish(_cli(join, env, "node-b"))
    assert code == 2
    assert "gpu_model: study NVIDIA H100, this host none" in out
    assert "gpu_count" in out and "--allow-mixed-hardware" in out
    assert len(_study(sqlite_url, study_name).trials) == 1  # nothing measured
    code, out = _finish(_cli([*join, "--allow-mixed-hardware"], env, "node-b"))
    assert code == 0, out
    joined = _study(sqlite_url, study_name).trials[-1]
    assert joined.state in FINISHED and joined.user_attrs["host"] == "node-b"
    assert any(d.startswith("gpu_model:") for d in joined.user_attrs["hardware_differences"])


def test_a_worker_refuses_a_study_that_does_not_exist_listing_those_that_do(
    shared_url, study_name, env
):
    optuna.create_study(study_name=study_name, storage=open_storage(shared_url))
    code, out = _finish(
        _cli(["worker", "--study", f"{study_name}-typo", "--storage", shared_url], env, "n")
    )
    assert code == 2
    assert f"no study named '{study_name}-typo'" in out and study_name in out
    assert "Traceback" not in out


def test_a_worker_refuses_a_plain_optuna_study_at_once_without_asking_for_trials(
    shared_url, study_name, env
):
    # Issue 22, 8: it first asked for --trials N, then refused the study once given one.
    storage = open_storage(shared_url)
    optuna.create_study(study_name=study_name, storage=storage, direction="maximize")
    code, out = _finish(_cli(["worker", "--study", study_name, "--storage", shared_url], env, "n"))
    assert code == 2, out
    assert f"study '{study_name}' was not created by loadersearch (no loadersearch spec" in out
    assert "--trials" not in out and "Traceback" not in out


def _blocked_on_a_lock(pid: int) -> bool:
    """Whether ``pid`` or one of its descendants waits for a file lock (``/proc/locks`` lists
    a waiter as ``N: -> FLOCK ADVISORY WRITE PID ...``)."""
    try:
        tree = {pid} | {c.pid for c in psutil.Process(pid).children(recursive=True)}
    except psutil.NoSuchProcess:
        return False
    with open("/proc/locks") as f:
        for line in f:
            parts = line.split()
            if "->" in parts:
                at = parts.index("->")
                if len(parts) > at + 4 and parts[at + 4].isdigit() and int(parts[at + 4]) in tree:
                    return True
    return False


def test_a_second_run_on_the_same_host_does_not_measure_while_the_first_does(
    sqlite_url, study_name, tiny_dataset, env, monkeypatch
):
    from loadersearch import measurement_lock

    _create(sqlite_url, study_name, tiny_dataset, env, trials=1)
    join = ["worker", "--study", study_name, "--storage", sqlite_url, "--trials", "2"]
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", env["LOADERSEARCH_LOCK_DIR"])
    monkeypatch.setenv("LOADERSEARCH_HOST", "node-a")
    with measurement_lock(wait=False):  # a measurement in progress on node-a
        code, out = _finish(_cli([*join, "--no-wait"], env, "node-a"))
        assert code == 2 and "another loadersearch measurement is running" in out
        waiting = _cli(join, env, "node-a")
        # The worker starts its trial, then waits for the host's lock before measuring.
        wait_for(lambda: len(_study(sqlite_url, study_name).trials) == 2, what="the waiting trial")
        # ... and blocks on the lock (not merely on its way to it: released before it got
        # there, it would not wait at all and say nothing).
        wait_for(lambda: _blocked_on_a_lock(waiting.pid), what="the worker blocked on the lock")
        assert waiting.poll() is None  # still waiting
        later = _study(sqlite_url, study_name).trials[1:]
        assert later, "the waiting worker created no trial"
        assert all(t.state == TrialState.RUNNING and not t.user_attrs.get("status") for t in later)
    code, out = _finish(waiting)
    assert code == 0, out
    assert "waiting for it" in out
    assert len([t for t in _study(sqlite_url, study_name).trials if t.state in FINISHED]) == 2
