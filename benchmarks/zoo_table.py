#!/usr/bin/env python
"""The landscape zoo's summary, from the sets' replay JSON (docs/benchmarks/landscape-zoo*.json,
as ``zoo_replay.py`` writes them): the table of docs/benchmarks.md (one row per landscape:
the default, TPE and random search at budgets 6, 14 and 40, median / 10th percentile) and the
counts against issue 23's targets, per set and in all.

    .venv/bin/python benchmarks/zoo_table.py                  # the counts and the misses
    .venv/bin/python benchmarks/zoo_table.py \
        --after-baselines docs/benchmarks/baseline-cost-all.json  # and with that bar at 6
    .venv/bin/python benchmarks/zoo_table.py --update docs/benchmarks.md \\
        --label fifteenth="held out (stop 37), then seen"    # rewrite the table's rows

``--update`` keeps each row's label (``*held out (stop 33):*``, ``*seen:*``) as the page has
it and takes every figure from the JSON; a landscape the page lacks gets its set's
``--label``. Nothing is replayed: run ``zoo_replay.py`` first.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from zoo_replay import STEMS, TARGET_BUDGET, TARGET_MEDIAN, TARGET_P10, int_budgets, verdicts

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "docs" / "benchmarks"
DEFAULT, TPE, RANDOM = "loadersearch (structured)", "loadersearch (tpe)", "random search"
AFTER_BASELINES = "random search after the baselines"  # baseline_cost.py's method (it imports it)
TABLE_BUDGETS = (6, 14, 40)
HEADER = "| landscape | default (structured): budget 6 · 14 · 40 | TPE | random search |"
ROW = re.compile(r"^\| (?:\*(?P<label>[^*]+):\* )?(?P<name>[\w.-]+)(?P<tag> \([^)]*\))? \|")


def load(folder: Path) -> dict[str, tuple[str, dict[str, Any]]]:
    """Landscape -> (its set, its methods' summaries), every set whose JSON is in ``folder``."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for which, stem in STEMS.items():
        path = folder / f"{stem}.json"
        if which == "all" or not path.exists():
            continue
        data = json.loads(path.read_text())
        for land, by_method in data["summary"].items():
            out[land] = (which, int_budgets(by_method))
    return out


def cells(by_method: dict[str, Any], method: str) -> str:
    s = by_method.get(method)
    if s is None:
        return "-"
    return " · ".join(f"{100 * s['budgets'][b]['median']:.0f}/{100 * s['budgets'][b]['p10']:.0f}"
                      for b in TABLE_BUDGETS)  # fmt: skip


def after_baselines(path: Path) -> dict[str, dict[int, dict[str, float]]]:
    """Landscape -> budget -> random search's median and 10th percentile replayed after the
    three baselines, from ``baseline_cost.py --out`` (its budgets only)."""
    data = json.loads(path.read_text())
    return {land: {int(b): {k: cell[k] for k in ("median", "p10")}
                   for b, cell in s[AFTER_BASELINES]["budgets"].items()}
            for land, s in data["summary"].items()}  # fmt: skip


def counts(
    zoo: dict[str, tuple[str, dict[str, Any]]],
    after: dict[str, dict[int, dict[str, float]]] | None = None,
) -> dict[str, Any]:
    """Per set and in all: the landscapes, those where the default meets each budget-14
    target, and every target (``every``); with ``after`` (:func:`after_baselines`) also
    every target where random search at ``after``'s budgets is replayed after the baselines,
    as the default spends its first three trials (``every_after``; a landscape ``after``
    lacks keeps the page's random search)."""
    by_set: dict[str, dict[str, int]] = {}
    misses: dict[str, list[str]] = {}
    for land, (which, by_method) in zoo.items():
        if DEFAULT not in by_method:
            continue
        s14 = by_method[DEFAULT]["budgets"][TARGET_BUDGET]
        missed = verdicts({land: by_method}, DEFAULT)[land]
        row = by_set.setdefault(which, {"landscapes": 0, "median": 0, "p10": 0, "every": 0,
                                        "every_after": 0})  # fmt: skip
        row["landscapes"] += 1
        row["median"] += s14["median"] >= TARGET_MEDIAN
        row["p10"] += s14["p10"] >= TARGET_P10
        row["every"] += not missed
        if after is not None:
            theirs = by_method.get(RANDOM, {"budgets": {}})
            bar = {**theirs, "budgets": {**theirs["budgets"], **after.get(land, {})}}
            row["every_after"] += not verdicts({land: {**by_method, RANDOM: bar}}, DEFAULT)[land]
        if missed:
            misses[land] = missed
    keys = ("landscapes", "median", "p10", "every", "every_after")
    total = {k: sum(r[k] for r in by_set.values()) for k in keys}
    return {"sets": by_set, "total": total, "misses": misses, "methods": at_target(zoo)}


def at_target(zoo: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, tuple[int, int]]:
    """Method -> (landscapes on which it meets the budget-14 targets alone: median >= 97%
    and 10th percentile >= 93%; landscapes it was replayed on), every method of the JSON. How
    demanding those two targets are: a method that meets them nowhere is no bar to clear."""
    out: dict[str, list[int]] = {}
    for _, by_method in zoo.values():
        for method, s in by_method.items():
            cell = s["budgets"][TARGET_BUDGET]
            row = out.setdefault(method, [0, 0])
            row[0] += cell["median"] >= TARGET_MEDIAN and cell["p10"] >= TARGET_P10
            row[1] += 1
    return {m: (met, n) for m, (met, n) in out.items()}


def update(page: Path, zoo: dict[str, tuple[str, dict[str, Any]]], labels: dict[str, str]) -> int:
    lines = page.read_text().splitlines()
    try:
        start = lines.index(HEADER)
    except ValueError:
        sys.exit(f"{page}: no zoo table (its header {HEADER!r}) to update")
    end = start + 2
    while end < len(lines) and lines[end].startswith("| "):
        end += 1
    old: dict[str, str] = {}  # landscape -> its row's prefix, label and tag included
    for line in lines[start + 2 : end]:
        m = ROW.match(line)
        if m:
            old[m["name"]] = line[: m.end("tag") if m["tag"] else m.end("name")]
    rows = []
    for land, (which, by_method) in zoo.items():
        if DEFAULT not in by_method:
            continue
        if land in old:
            prefix = old[land]
        else:
            label = labels.get(which)
            prefix = f"| *{label}:* {land}" if label else f"| {land}"
        rows.append(f"{prefix} | {cells(by_method, DEFAULT)} | {cells(by_method, TPE)} | "
                    f"{cells(by_method, RANDOM)} |")  # fmt: skip
    page.write_text("\n".join([*lines[: start + 2], *rows, *lines[end:]]) + "\n")
    return len(rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--from", dest="folder", type=Path, default=DOCS,
                   help="the folder of the sets' JSON (default: docs/benchmarks)")  # fmt: skip
    p.add_argument("--update", type=Path, metavar="PAGE", help="rewrite PAGE's zoo table")
    p.add_argument("--label", action="append", default=[], metavar="SET=LABEL",
                   help="the label of a set's new rows (e.g. sixteenth='held out (stop 37)')")
    p.add_argument("--after-baselines", type=Path, metavar="JSON",
                   help="baseline_cost.py's --out: also count every target with random search "
                   "at its budgets replayed after the three baselines (as the default spends "
                   "its first trials)")  # fmt: skip
    args = p.parse_args(argv)
    zoo = load(args.folder)
    if not zoo:
        sys.exit(f"no replay JSON in {args.folder}: run benchmarks/zoo_replay.py first")
    after = None
    if args.after_baselines:
        try:
            after = after_baselines(args.after_baselines)
        except (OSError, ValueError, KeyError) as exc:
            sys.exit(f"{args.after_baselines}: not baseline_cost.py's --out JSON ({exc})")
    got = counts(zoo, after)
    extra = ", with random search after the baselines on {}" if after is not None else ""
    for which, r in got["sets"].items():
        print(f"{which:12s} {r['landscapes']:3d} landscapes: median >= 97% at 14 on "
              f"{r['median']}, p10 >= 93% on {r['p10']}, every target on {r['every']}"
              + extra.format(r["every_after"]))  # fmt: skip
    t = got["total"]
    print(f"{'all':12s} {t['landscapes']:3d} landscapes: median >= 97% at 14 on {t['median']}, "
          f"p10 >= 93% on {t['p10']}, every target on {t['every']}"
          + extra.format(t["every_after"]))  # fmt: skip
    met = ", ".join(f"{m} on {k} of {n}" for m, (k, n) in got["methods"].items())
    print(f"median >= 97% and p10 >= 93% at 14, by method: {met}")
    print("\nmisses:")
    for land, missed in got["misses"].items():
        print(f"  {land}: {'; '.join(missed)}")
    if args.update:
        labels = dict(item.split("=", 1) for item in args.label)
        n = update(args.update, zoo, labels)
        print(f"\n{args.update}: {n} rows")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
