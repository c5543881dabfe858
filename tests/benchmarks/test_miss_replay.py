"""benchmarks/miss_replay.py: the quick screen of a change to the default search replays the
committed pages' figures exactly while the search is unchanged (same seeds, same budgets up
to 14), and compares a run with an earlier one."""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import miss_replay  # noqa: E402
from zoo_table import DEFAULT, DOCS, load  # noqa: E402

# a landscape that misses a budget-14 target, of the set replayed with the search as it is
# (stop 43's confirmation race; the other sets' pages are of the race before it)
LANDSCAPE = "twentyfifth-2662"


def test_the_screen_reproduces_the_committed_replay_and_compares_with_a_control(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "control.json"
    assert miss_replay.main(["--landscapes", LANDSCAPE, "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    got = written["summary"][LANDSCAPE][DEFAULT]["budgets"]
    # each seed's quality, for pooling runs over other seeds: the same median
    seeds = written["qualities"][LANDSCAPE]["14"]
    assert len(seeds) == 50
    assert statistics.median(seeds) == pytest.approx(got["14"]["median"])
    committed = load(DOCS)[LANDSCAPE][1][DEFAULT]["budgets"]
    for budget in (6, 10, 14):  # the zoo replay's budgets up to 14: the same draws
        for stat in ("median", "p10"):
            assert got[str(budget)][stat] == pytest.approx(committed[budget][stat], abs=1e-9)
    text = capsys.readouterr().out
    assert "budget-14 targets met on 0 of 1 landscapes (committed: 0)" in text

    # a run against the control: the same figures on both sides
    assert miss_replay.main(["--budgets", "6,10,14", "--against", str(out), "--seeds", "50"]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith(f"| {LANDSCAPE} |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert cells[0::2] == cells[1::2]  # now == earlier run, budget by budget
    assert "(earlier run: 0)" in text


def test_without_noise_the_walk_is_its_design_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """--trial-noise 0 --confirm-noise 0: every measurement is the point's truth, so every
    seed takes the same walk to the same answer (the miss that is left is the design's);
    the noise scale is the default's again afterwards."""
    from bench_tabular import replay

    args = ["--landscapes", LANDSCAPE, "--seeds", "3", "--budgets", "6,14",
            "--trial-noise", "0", "--confirm-noise", "0", "--jobs", "1"]  # fmt: skip
    assert miss_replay.main(args) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith(f"| {LANDSCAPE} |"))
    now = [c.strip() for c in row.strip("|").split("|")][1::2]
    for cell in now:  # median == 10th percentile: the seeds agree
        median, p10 = cell.split("/")
        assert median == p10, row
    assert now[1] == "94.2/94.2"  # stop 50's trace: w10 b64 at budget 14, the optimum w9
    assert replay.NOISE_SCALE == {replay.TRIALS: 1.0, replay.CONFIRMATION: 1.0}
