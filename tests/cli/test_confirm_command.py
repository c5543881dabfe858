"""``loadersearch confirm``: the finalists of a stored study measured again, no new trial; a
missing, empty or foreign study refused in one line."""

from __future__ import annotations

import re
import subprocess
import sys

import optuna
from helpers.cliproc import FAST, cli_env

from loadersearch.report import open_study


def _cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "loadersearch", *args],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _one_line_error(done: subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = [ln for ln in done.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_confirm_measures_the_finalists_again_and_runs_no_trial(tmp_path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    env = cli_env(tmp_path)
    fast = list(FAST)
    fast[fast.index("--confirm-rounds") + 1] = "1"
    done = _cli(["run", *fast, "--trials", "3", "--space", "num_workers=0:1",
                 "--storage", url, "--study", "c"], env)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    before = open_study(url, "c")
    first = before.user_attrs["confirmation"]

    done = _cli(["confirm", "--storage", url, "--study", "c"], env)
    assert done.returncode == 0, done.stdout + done.stderr
    after = open_study(url, "c")
    again = after.user_attrs["confirmation"]
    assert len(after.trials) == len(before.trials)  # no trial run
    assert again["time"] > first["time"]
    assert [c["label"] for c in again["candidates"]] == [c["label"] for c in first["candidates"]]
    # (on a busy machine the answer is headlined "Inconclusive winner (busy machine)")
    headline = r"^(Winner|Inconclusive winner \(busy machine\)) \(trial \d+\)"
    assert re.search(headline, done.stdout, re.M), done.stdout
    assert "confirming" in done.stdout + done.stderr


def test_confirm_refuses_a_missing_a_foreign_and_an_unconfirmable_study(tmp_path):
    url = f"sqlite:///{tmp_path / 'f.db'}"
    env = cli_env(tmp_path)
    optuna.create_study(study_name="plain", storage=url, direction="maximize")
    _one_line_error(_cli(["confirm", "--storage", url, "--study", "nope"], env), "'nope'")
    _one_line_error(_cli(["confirm", "--storage", url, "--study", "plain"], env), "'plain'")

    no_rounds = ["run", *FAST, "--trials", "1", "--storage", url, "--study", "norounds",
                 "--no-baselines", "--fix", "num_workers=0", "--fix", "batch_size=8"]  # fmt: skip
    done = _cli(no_rounds, env)
    assert done.returncode == 0, done.stdout + done.stderr
    _one_line_error(
        _cli(["confirm", "--storage", url, "--study", "norounds"], env), "--confirm-rounds 0"
    )
    # every trial past its time limit (5 s a sample, 3 s allowed): nothing feasible to confirm
    fast = list(FAST)
    fast[fast.index("--confirm-rounds") + 1] = "1"
    done = _cli(["run", *fast, "--trials", "1", "--storage", url, "--study", "none",
                 "--no-baselines", "--emulated-io-ms", "5000", "--timeout", "3"], env)  # fmt: skip
    assert done.returncode == 3, done.stdout + done.stderr
    _one_line_error(
        _cli(["confirm", "--storage", url, "--study", "none"], env), "no finished feasible"
    )
