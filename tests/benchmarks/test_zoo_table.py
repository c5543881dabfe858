"""benchmarks/zoo_table.py: the zoo's counts against issue 23's targets and the rewrite of
docs/benchmarks.md's table, from a set's replay JSON (as zoo_replay.py writes it)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import zoo_table  # noqa: E402

BUDGETS = (6, 10, 14, 20, 40)


def summary(median: float, p10: float) -> dict[str, object]:
    """One method's cells: the same median and 10th percentile at every budget (JSON keys)."""
    return {"budgets": {str(b): {"median": median, "p10": p10} for b in BUDGETS}}


def write_set(folder: Path, stem: str, lands: dict[str, tuple[float, float]]) -> None:
    data = {"summary": {
        land: {zoo_table.DEFAULT: summary(*mine), zoo_table.TPE: summary(0.90, 0.80),
               zoo_table.RANDOM: summary(0.85, 0.70)}
        for land, mine in lands.items()
    }}  # fmt: skip
    (folder / f"{stem}.json").write_text(json.dumps(data))


def test_counts_and_misses_follow_the_targets(tmp_path: Path) -> None:
    write_set(tmp_path, "landscape-zoo-unseen", {
        "unseen-a": (0.99, 0.95),  # every target
        "unseen-b": (0.96, 0.95),  # median below 97% at 14
        "unseen-c": (0.98, 0.92),  # 10th percentile below 93% at 14
    })  # fmt: skip
    got = zoo_table.counts(zoo_table.load(tmp_path))
    assert got["sets"]["unseen"] == {"landscapes": 3, "median": 2, "p10": 2, "every": 1,
                                     "every_after": 0}  # fmt: skip
    assert got["total"]["every"] == 1
    assert set(got["misses"]) == {"unseen-b", "unseen-c"}
    assert got["misses"]["unseen-b"] == ["median 96.0% at 14"]
    # the budget-14 targets alone, per method: TPE (90/80) and random search (85/70) nowhere
    assert got["methods"] == {zoo_table.DEFAULT: (1, 3), zoo_table.TPE: (0, 3),
                              zoo_table.RANDOM: (0, 3)}  # fmt: skip


def test_every_target_with_random_search_after_the_baselines(tmp_path: Path) -> None:
    """``--after-baselines``: random search's figures at the budgets of baseline_cost.py's JSON
    replaced by its replay after the three baselines; the other budgets and a landscape the
    JSON lacks keep the page's."""
    write_set(tmp_path, "landscape-zoo-unseen", {"unseen-a": (0.99, 0.95),
                                                 "unseen-b": (0.99, 0.95)})  # fmt: skip
    page = json.loads((tmp_path / "landscape-zoo-unseen.json").read_text())
    for land in ("unseen-a", "unseen-b"):  # below random search's 85/70 at budget 6 only
        page["summary"][land][zoo_table.DEFAULT]["budgets"]["6"] = {"median": 0.80, "p10": 0.75}
        page["summary"][land][zoo_table.TPE]["budgets"]["6"] = {"median": 0.70, "p10": 0.60}
    (tmp_path / "landscape-zoo-unseen.json").write_text(json.dumps(page))
    cost = tmp_path / "cost.json"
    cost.write_text(json.dumps({"summary": {"unseen-a": {zoo_table.AFTER_BASELINES: {
        "budgets": {"6": {"median": 0.78, "p10": 0.60, "seeds": 50}}}}}}))  # fmt: skip
    zoo = zoo_table.load(tmp_path)
    got = zoo_table.counts(zoo, zoo_table.after_baselines(cost))
    assert got["total"]["every"] == 0  # the page's bar: 80 < 85 at 6 on both
    assert got["total"]["every_after"] == 1  # unseen-a: 80/75 >= 78/60; unseen-b: the page's
    assert set(got["misses"]) == {"unseen-a", "unseen-b"}  # the misses stay the page's
    cost.write_text(json.dumps({"summary": {"unseen-a": {zoo_table.AFTER_BASELINES: {
        "budgets": {"6": {"median": 0.81, "p10": 0.60}}}}}}))  # fmt: skip
    assert zoo_table.counts(zoo, zoo_table.after_baselines(cost))["total"]["every_after"] == 0


def test_update_keeps_each_row_s_label_and_labels_new_rows(tmp_path: Path) -> None:
    write_set(tmp_path, "landscape-zoo-unseen", {"unseen-a": (0.99, 0.95),
                                                 "unseen-new": (0.97, 0.93)})  # fmt: skip
    page = tmp_path / "page.md"
    page.write_text("\n".join([
        "before", zoo_table.HEADER, "|---|---|---|---|",
        "| *held out (stop 1):* unseen-a | 1/1 · 1/1 · 1/1 | - | - |",
        "| gone-from-the-json | 1/1 · 1/1 · 1/1 | - | - |",
        "", "after",
    ]))  # fmt: skip
    zoo = zoo_table.load(tmp_path)
    assert zoo_table.update(page, zoo, {"unseen": "held out (stop 2)"}) == 2
    lines = page.read_text().splitlines()
    assert lines[3] == ("| *held out (stop 1):* unseen-a | 99/95 · 99/95 · 99/95 | "
                        "90/80 · 90/80 · 90/80 | 85/70 · 85/70 · 85/70 |")  # fmt: skip
    assert lines[4].startswith("| *held out (stop 2):* unseen-new | 97/93 ·")
    assert lines[0] == "before" and lines[-1] == "after"
    assert not any("gone-from-the-json" in line for line in lines)


def test_make_zoo_writes_one_set_alone(tmp_path: Path) -> None:
    """``make_zoo.py --set NAME`` writes that set's tables, as the full run writes them, and
    no other set's (a new held-out set leaves the committed ones as they are)."""
    import gzip

    import make_zoo

    out, other = tmp_path / "twentysecond", tmp_path / "design"
    assert make_zoo.main(["--set", "twentysecond", "--twentysecond-out", str(out),
                          "--out", str(other)]) == 0  # fmt: skip
    written = sorted(p.name for p in out.glob("*.json.gz"))
    assert len(written) == 17 and "twentysecond-peak-4-8.json.gz" in written
    assert not other.exists()
    committed = ROOT / "benchmarks" / "data" / "zoo-twentysecond" / written[0]
    assert gzip.open(out / written[0]).read() == gzip.open(committed).read()
