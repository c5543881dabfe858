"""Four processes starting one study at once, on each storage backend: the study is created
once, its baselines queued once, and the budget shared exactly. The measurement is injected
(an instant one), so what runs is the study's own start (the study lock, open_study, the
baselines, the shared budget) in four real processes against a real database; the same start
with real measuring ``loadersearch run`` processes is tests/cli/test_faults.py (on SQLite)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers.cliproc import load
from optuna.trial import TrialState

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
BASELINES = ["article", "pytorch", "ultralytics"]

# One process: ready, then (once the test says go) the study of quick_settings on the URL.
START = """
import dataclasses, pathlib, sys
from helpers.studies import HOST, quick_settings, steady_measure
from loadersearch.search import run_study

url, name, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
settings = quick_settings(pathlib.Path("."), trials=trials)
settings = dataclasses.replace(settings, storage=url, study_name=name)
print("ready", flush=True)
sys.stdin.readline()  # all four start together, not each as soon as its imports are done
run_study(settings, measure_fn=steady_measure(), hardware=HOST)
"""


@pytest.mark.slow  # four processes, each importing torch and running a study
def test_four_processes_starting_one_study_at_once_create_it_once_and_share_its_budget(
    storage_url, study_name, tmp_path
):
    total = 5
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "LOADERSEARCH_LOCK_DIR": str(tmp_path / "locks"),
    }
    argv = [sys.executable, "-c", START, storage_url, study_name, str(total)]
    pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.STDOUT}
    procs = [subprocess.Popen(argv, env=env, text=True, **pipes) for _ in range(4)]
    try:
        for p in procs:
            line = p.stdout.readline()  # blocks until the process is ready (or has died)
            assert line.strip() == "ready", line + p.stdout.read()
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        for p in procs:
            out, _ = p.communicate(timeout=300)
            assert p.returncode == 0, out
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    study = load(storage_url, study_name)
    baselines = sorted(t.user_attrs["baseline"] for t in study.trials
                       if t.user_attrs.get("baseline"))  # fmt: skip
    assert baselines == BASELINES  # each baseline once, not once per process
    assert len([t for t in study.trials if t.state in FINISHED]) == total
    assert not [t for t in study.trials if t.state in (TrialState.WAITING, TrialState.RUNNING)]
    # A process that asked for a trial as another finished the budget fails it unmeasured
    # ("surplus": optimize_to_total); every other trial is a baseline or one of the sampled.
    surplus = [t for t in study.trials if "surplus" in t.user_attrs]
    assert all(t.state == TrialState.FAIL for t in surplus)
    spare = {t.number for t in surplus}
    sampled = [t for t in study.trials
               if not t.user_attrs.get("baseline") and t.number not in spare]  # fmt: skip
    assert len(sampled) == total - 3
