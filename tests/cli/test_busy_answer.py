"""On a machine kept busy by other processes (two real CPU burners outside the run), the answer
never contradicts its own table: every baseline is re-measured in the winner's interleaved
rounds, the winner is the best of them, and busy confirmation rounds make it inconclusive,
printed and stored."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers.cliproc import FAST, cli_env

from loadersearch.report import open_study, summarize


def test_a_run_beside_a_cpu_hog_never_answers_against_its_own_table(tmp_path, burners):
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    fast = [a for a in FAST if a != "--quiet"]
    i = fast.index("--confirm-rounds")
    fast[i + 1] = "2"
    env = cli_env(
        tmp_path, LOADERSEARCH_BUSY_SHARE="0.5", LOADERSEARCH_QUIET_WAIT_S="2"
    )
    done = subprocess.run(
        [sys.executable, "-m", "loadersearch", "run", *fast, "--trials", "4",
         "--space", "num_workers=0:1", "--space", "batch_size=8:16:8",
         "--storage", url, "--study", "busy"],
        env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    summary = summarize(open_study(url, "busy"))
    w = summary.winner
    assert w is not None and w.confirmed
    for b in summary.baselines:
        if b.rate:  # measured: re-measured beside the winner, never quoted from its trial
            assert b.source == "confirmation", b
            assert b.rate <= w.rate, (b, w)
            assert b.speedup is None or b.speedup >= 1.0
    confirmation = open_study(url, "busy").user_attrs["confirmation"]
    if any(m["busy_host"] for m in confirmation["measurements"]):
        assert w.inconclusive
        assert "Inconclusive" in done.stdout
    best = subprocess.run(
        [sys.executable, "-m", "loadersearch", "best", "--storage", url, "--study", "busy"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert json.loads(best.stdout)["inconclusive"] is w.inconclusive
