"""The faults a study meets in practice (issue 10), each reproduced end to end with real CLI
processes and real measurements: nothing lost, nothing invented, nothing touched that isn't
ours. (A full disk is in test_full_disk.py; read-only commands and foreign studies in
tests/cli/test_readonly.py.)"""

from __future__ import annotations

import shutil
import signal
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner
from helpers.cliproc import CATCHABLE, FAST, cli_env, finish, load, start_cli
from helpers.procs import alive, measurement_processes
from helpers.wait import wait_for
from optuna.trial import TrialState

from loadersearch.cli import cli

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
BASELINES = ["article", "pytorch", "ultralytics"]


@pytest.fixture
def env(tmp_path):
    return cli_env(tmp_path)


def _run_args(
    url: str, name: str, data: str, trials: int, options: list[str] = CATCHABLE
) -> list[str]:
    """A ``run``; its measurements long enough to stop it in one unless ``options`` is FAST."""
    return ["run", "--study", name, "--storage", url, "--trials", str(trials), "--data", data,
            *options]  # fmt: skip


def _baselines(study: optuna.Study) -> list[str]:
    return sorted(t.user_attrs["baseline"] for t in study.trials if t.user_attrs.get("baseline"))


# --------------------------------------------------------------- 1. concurrent study creation


def test_four_runs_starting_one_study_at_once_create_it_once_and_share_its_budget(
    tmp_path, study_name, tiny_dataset, env
):
    # The file is new: its schema is created by four processes at once, too. (The same start
    # on PostgreSQL and MariaDB, with an injected measurement instead of four measuring runs:
    # tests/search/test_concurrent_start.py.)
    storage_url = f"sqlite:///{tmp_path / 'study.db'}"
    total = 5
    # Nothing dies here: a 30 s grace, so that four processes on two busy cores, whose
    # heartbeats can lag the fixture's 3 s, never fail (and requeue) each other's trials.
    env = {**env, "LOADERSEARCH_HEARTBEAT": "1,30"}
    runs = [
        start_cli(_run_args(storage_url, study_name, tiny_dataset, total, FAST), env, "node-a")
        for _ in range(4)
    ]
    for run in runs:
        code, out = finish(run, timeout=600)
        assert code == 0, out
    study = load(storage_url, study_name)
    assert _baselines(study) == BASELINES  # each baseline once, not once per run
    assert len([t for t in study.trials if t.state in FINISHED]) == total
    assert not [t for t in study.trials if t.state in (TrialState.WAITING, TrialState.RUNNING)]
    assert sum(not t.user_attrs.get("baseline") for t in study.trials) == total - 3  # sampled


# --------------------------------------------------------------- 2, 3. interrupted trials


def _stop_mid_trial(url, name, data, env, sig: int) -> tuple[int, str, optuna.trial.FrozenTrial]:
    """Start a run, send ``sig`` while it measures its first trial (a baseline); returns the
    exit code, the output and the trial as it was when stopped."""
    run = start_cli(_run_args(url, name, data, 4), env, "node-a")

    def measuring():
        running = [t for t in load(url, name).trials if t.state == TrialState.RUNNING and t.params]
        return running and measurement_processes(run.pid) and running[0]

    trial = wait_for(measuring, what="a trial being measured")
    pids = [p.pid for p in measurement_processes(run.pid)]
    run.send_signal(sig)
    code, out = finish(run)
    wait_for(lambda: not alive(pids), what="the measuring processes gone")
    return code, out, trial


@pytest.mark.parametrize(("sig", "code", "name"), [(signal.SIGINT, 130, "Ctrl-C"),
                                                   (signal.SIGTERM, 143, "SIGTERM")])  # fmt: skip
def test_an_interrupted_baseline_is_measured_again_on_resume(
    tmp_path, study_name, tiny_dataset, env, sig, code, name
):
    url = f"sqlite:///{tmp_path / 'study.db'}"
    exit_code, out, stopped = _stop_mid_trial(url, study_name, tiny_dataset, env, sig)
    assert exit_code == code, out
    [line] = [ln for ln in out.splitlines() if ln.startswith("Interrupted")]
    assert f"Interrupted ({name})" in line
    assert f"Trial {stopped.number} will be measured again with the same parameters" in line
    assert "Traceback" not in out and "failed with" not in out

    study = load(url, study_name)
    failed = study.trials[stopped.number]
    assert failed.state == TrialState.FAIL and failed.user_attrs["status"] == "interrupted"
    [retry] = [t for t in study.trials if t.user_attrs.get("retry_of") == stopped.number]
    assert retry.state == TrialState.WAITING
    assert retry.user_attrs["baseline"] == stopped.user_attrs["baseline"]
    assert retry.system_attrs["fixed_params"] == stopped.params
    if sig != signal.SIGINT:
        # What the resume meets is the same after either signal (the states just checked): one
        # resume, after Ctrl-C, shows that it measures the retry.
        return

    code, out = finish(start_cli(_run_args(url, study_name, tiny_dataset, 4), env, "node-a"))
    assert code == 0, out
    study = load(url, study_name)
    assert len([t for t in study.trials if t.state in FINISHED]) == 4
    rerun = study.trials[retry.number]
    assert rerun.state == TrialState.COMPLETE and rerun.params == stopped.params
    from loadersearch.report import summarize

    rows = {b.name: b for b in summarize(study).baselines}
    assert rows[stopped.user_attrs["baseline"]].source == "trial"  # not "failed"
    assert all(b.rate for b in rows.values())


def test_a_run_killed_outright_is_resumed_on_the_same_host_without_waiting_for_it(
    tmp_path, study_name, tiny_dataset
):
    # Heartbeats go stale only after an hour here: only knowing the dead pid can reclaim
    # the trial, and the resume would wait out the hour otherwise (and time out).
    env = cli_env(tmp_path, LOADERSEARCH_HEARTBEAT="1,3600")
    url = f"sqlite:///{tmp_path / 'study.db'}"
    run = start_cli(_run_args(url, study_name, tiny_dataset, 4), env, "node-a")

    def measuring():
        # A trial whose configuration is stored (a trial just created has no params yet: read
        # then, it would not be the trial the measuring process below measures).
        running = [t for t in load(url, study_name).trials
                   if t.state == TrialState.RUNNING and t.params]  # fmt: skip
        return running and measurement_processes(run.pid) and running[0]

    dead = wait_for(measuring, what="a trial being measured")
    run.send_signal(signal.SIGKILL)  # power cut: no clean-up at all
    finish(run)
    assert load(url, study_name).trials[dead.number].state == TrialState.RUNNING

    code, out = finish(start_cli(_run_args(url, study_name, tiny_dataset, 4), env, "node-a"))
    assert code == 0, out
    study = load(url, study_name)
    reclaimed = study.trials[dead.number]
    assert reclaimed.state == TrialState.FAIL
    assert (
        f"its process {dead.user_attrs['pid']} on node-a is gone" in reclaimed.user_attrs["reason"]
    )
    [rerun] = [t for t in study.trials if t.user_attrs.get("retry_of") == dead.number]
    assert rerun.state in FINISHED and rerun.params == dead.params
    assert len([t for t in study.trials if t.state in FINISHED]) == 4


# --------------------------------------------------------------- 7. nothing feasible


def test_a_run_where_every_trial_is_infeasible_exits_3_with_the_reason(tiny_dataset, tmp_path):
    # Every read waits 5 s, every trial may take 3 s: each one times out. (A VRAM cap that not
    # even the smallest emulated batch fits under is refused before a study exists:
    # test_messages.)
    result = CliRunner().invoke(
        cli, ["run", *FAST, "--data", tiny_dataset, "--emulated-io-ms", "5000", "--timeout", "3",
              "--no-baselines", "--fix", "batch_size=8", "--space", "num_workers=0:1",
              "--trials", "2", "--storage", f"sqlite:///{tmp_path / 's.db'}", "--study", "cap"]
    )  # fmt: skip
    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    [line] = [ln for ln in result.output.splitlines() if ln.startswith("Error")]
    assert "every configuration of study 'cap' was infeasible here (2 of 2 trials: timeout)" in (
        line
    )
    assert "raise --timeout" in line


# --------------------------------------------------------------- 8. advice that works


def _voc_with_a_box_outside_its_image(src: str, dst: Path) -> Path:
    shutil.copytree(src, dst)
    xml = dst / "Annotations" / "000003.xml"
    text = xml.read_text()
    start = text.index("<xmax>") + len("<xmax>")
    xml.write_text(text[:start] + "9999" + text[text.index("</xmax>") :])
    return xml


def test_the_advice_after_a_bad_label_works_as_written(tiny_voc, tmp_path):
    data = tmp_path / "voc"
    xml = _voc_with_a_box_outside_its_image(tiny_voc, data)
    db = tmp_path / "s.db"
    base = ["run", *FAST, "--data", str(data), "--storage", f"sqlite:///{db}", "--study", "voc"]
    runner = CliRunner()
    first = runner.invoke(cli, [*base, "--trials", "4"])
    assert first.exit_code == 2
    assert "000003.xml" in first.output and "--skip-bad-samples" in first.output
    assert not db.exists()  # the whole dataset was checked first: no study, no trial

    skipping = runner.invoke(cli, [*base, "--trials", "4", "--skip-bad-samples"])
    assert skipping.exit_code == 0, skipping.output  # the suggested command works
    xml.write_text(Path(tiny_voc, "Annotations", "000003.xml").read_text())  # fixed
    fixed = runner.invoke(cli, [*base, "--trials", "5"])
    assert fixed.exit_code == 0, fixed.output  # the same study, resumed: not "different spec"
    study = optuna.load_study(study_name="voc", storage=f"sqlite:///{db}")
    assert _baselines(study) == BASELINES
    assert len([t for t in study.trials if t.state in FINISHED]) == 5


def test_a_baseline_stopped_by_a_bad_image_is_measured_again_once_it_is_fixed(
    tiny_dataset, tmp_path
):
    data = tmp_path / "data"
    shutil.copytree(tiny_dataset, data)
    image = data / "images" / "000002.jpg"
    good = image.read_bytes()
    image.write_bytes(good[:3000])  # truncated: its header is fine, decoding fails
    db = tmp_path / "s.db"
    args = ["run", *FAST, "--data", str(data), "--storage", f"sqlite:///{db}", "--study", "img",
            "--trials", "4"]  # fmt: skip
    stopped = CliRunner().invoke(cli, args)
    assert stopped.exit_code == 2
    assert "000002.jpg" in stopped.output and "run the same command again" in stopped.output
    image.write_bytes(good)
    resumed = CliRunner().invoke(cli, args)
    assert resumed.exit_code == 0, resumed.output
    study = optuna.load_study(study_name="img", storage=f"sqlite:///{db}")
    from loadersearch.report import summarize

    assert all(b.rate and b.source == "trial" for b in summarize(study).baselines)
