"""benchmarks/baseline_cost.py: random search replayed as the pages replay it reproduces their
figures, and again with the three baselines first, beside the default's committed figures."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from loadersearch.search import baselines

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import baseline_cost  # noqa: E402
import zoo_replay  # noqa: E402
from zoo_table import DEFAULT, DOCS, RANDOM, load  # noqa: E402

# the measured table: the default's median at budget 6 trails random search's on its page
LANDSCAPE = "measured-2core"


def test_random_search_reproduces_the_page_and_is_replayed_after_the_baselines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    committed = load(DOCS)
    assert LANDSCAPE in baseline_cost.trailing(committed, (6,))
    out = tmp_path / "cost.json"
    assert baseline_cost.main(["--landscapes", LANDSCAPE, "--budgets", "6",
                               "--out", str(out)]) == 0  # fmt: skip
    got = json.loads(out.read_text())["summary"][LANDSCAPE]
    page = committed[LANDSCAPE][1]
    for stat in ("median", "p10"):  # the same draws as the page's
        assert got[RANDOM]["budgets"]["6"][stat] == pytest.approx(
            page[RANDOM]["budgets"][6][stat], abs=1e-9)  # fmt: skip
    assert got[f"{DEFAULT} (page)"]["budgets"]["6"] == page[DEFAULT]["budgets"][6]
    runs = got[baseline_cost.AFTER_BASELINES]["runs"]["6"]
    assert [seed for seed, _, _ in runs] == list(range(50))
    # its answers: the best of three baselines and three random trials, a baseline on many
    # seeds (random search itself answers none of them on these seeds)
    s = zoo_replay.setup(zoo_replay.landscapes("design")[LANDSCAPE])
    rules = {b.config.label() for b in baselines(s["space"], s["hardware"], gpu=s["gpu"])}
    assert len(rules) == 3
    assert sum(answer in rules for _, answer, _ in runs) >= 10
    assert not any(answer in rules for _, answer, _ in got[RANDOM]["runs"]["6"])
    text = capsys.readouterr().out
    assert f"| {LANDSCAPE} | 6 |" in text
    assert "of 1 landscapes (median)" in text
