#!/usr/bin/env python
"""What the baselines cost at small budgets: random search replayed as the zoo's pages replay
it (every trial its own draw, no pruner, no confirmation) and again with the three baselines
first (PyTorch's defaults, the source article's rule and Ultralytics', as every loadersearch
study measures them: with a budget of 6 they are half of it), beside the default's committed
figures, on the landscapes where the default trails random search at a small budget.

    nice .venv/bin/python benchmarks/baseline_cost.py                  # ~5 min
    nice .venv/bin/python benchmarks/baseline_cost.py --landscapes peak-5 --budgets 6,10,14
    nice .venv/bin/python benchmarks/baseline_cost.py --out docs/benchmarks/baseline-cost.json
    nice .venv/bin/python benchmarks/baseline_cost.py --all --budgets 6 --skip-random --no-runs

Random search on the pages spends every trial on the space; the default (and TPE, which the
pages replay with the baselines too) spends three on the rules of thumb, whose figures the
report and optuna-dashboard show beside the answer. With the baselines first, random search
spends the default's trials as the default does, with the trials after the baselines drawn at
random (queued trials do not advance the sampler's stream: with the same seed they are
random search's first ones) and its best single measurement as the answer, where the default
confirms its finalists. The drop from random search to it is what measuring the baselines
costs random search; where the default still trails it, its walk (or its confirmation) did
worse than as many random trials.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path
from typing import Any

import zoo_replay
from bench_tabular.replay import RANDOM, Method, summarise
from zoo_table import AFTER_BASELINES, DEFAULT, DOCS, load
from zoo_table import RANDOM as RANDOM_NAME

WITH_BASELINES = Method(AFTER_BASELINES, None, pruner="none", baselines=True, confirm_rounds=0)
METHODS = {RANDOM.name: RANDOM, AFTER_BASELINES: WITH_BASELINES}


def _job(task: tuple[str, str, int, tuple[int, ...]]) -> list[dict[str, Any]]:
    name, method, seed, budgets = task
    return zoo_replay.replay_landscape(name, METHODS[method], seed, budgets)


def trailing(committed: dict[str, Any], budgets: tuple[int, ...]) -> list[str]:
    """The landscapes where the default's committed median or 10th percentile is below random
    search's at one of ``budgets``."""
    names = []
    for land, (_, by_method) in committed.items():
        d, r = by_method.get(DEFAULT), by_method.get(RANDOM_NAME)
        if d and r and any(b in d["budgets"] and b in r["budgets"]
                           and d["budgets"][b][k] < r["budgets"][b][k]
                           for b in budgets for k in ("median", "p10")):  # fmt: skip
            names.append(land)
    return sorted(names)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--landscapes", default="",
                   help="comma-separated names (default: where the default trails random "
                   "search at one of the budgets on the committed pages)")  # fmt: skip
    p.add_argument("--all", action="store_true", help="every landscape of every set")
    p.add_argument("--budgets", default="6,10", help="comma-separated trial budgets")
    p.add_argument("--skip-random", action="store_true",
                   help="replay only random search after the baselines (the pages' random "
                   "search is shown beside it all the same)")  # fmt: skip
    p.add_argument("--no-runs", action="store_true",
                   help="leave every seed's answer out of --out (a smaller file)")
    p.add_argument("--seeds", type=int, default=50)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--docs", type=Path, default=DOCS, help="the committed replays' JSON")
    p.add_argument("--out", type=Path, help="write the figures here (JSON)")
    args = p.parse_args(argv)
    budgets = tuple(sorted(int(b) for b in args.budgets.split(",") if b))
    committed = load(args.docs)
    paths = zoo_replay.every_landscape()
    if args.landscapes:
        names = args.landscapes.split(",")
    else:
        names = sorted(paths) if args.all else trailing(committed, budgets)
    methods = [AFTER_BASELINES] if args.skip_random else list(METHODS)
    unknown = [n for n in names if n not in paths]
    if unknown:
        p.error(f"unknown landscape {unknown[0]!r}")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    tasks = [(n, m, seed, budgets) for n in names for m in methods for seed in range(args.seeds)]
    t0 = time.time()
    rows = zoo_replay.run_pool(_job, tasks, {n: paths[n] for n in names}, jobs=args.jobs,
                               every=200)  # fmt: skip
    summary: dict[str, Any] = {}
    for n in names:
        mine = sorted((r for r in rows if r["landscape"] == n), key=lambda r: r["seed"])
        summary[n] = zoo_replay.int_budgets(summarise(mine, order=methods))
        for method in [] if args.no_runs else methods:  # every seed's answer, for a look
            summary[n][method]["runs"] = {
                b: [(r["seed"], r["answer"], round(r["quality"], 4)) for r in mine
                    if r["method"] == method and r["budget"] == b]
                for b in budgets
            }  # fmt: skip
        page = committed.get(n, ("", {}))[1]
        for method in (DEFAULT, RANDOM_NAME):  # the pages' figures at these budgets
            if method in page:
                summary[n][f"{method} (page)"] = {**page[method], "budgets": {
                    b: page[method]["budgets"][b] for b in budgets
                    if b in page[method]["budgets"]}}  # fmt: skip
    print(f"\nmedian / 10th percentile (% of the optimum), {args.seeds} seeds; the default's "
          "and random search's figures of the committed pages beside this run's")  # fmt: skip
    print("| landscape | budget | default (page) | random search (page) | random search "
          "| random search after the baselines |")  # fmt: skip
    above = {b: [0, 0, 0, 0] for b in budgets}  # the default at or above it: median, p10, of, both
    for n in names:
        s = summary[n]
        for b in budgets:
            cells = []
            for m in (f"{DEFAULT} (page)", f"{RANDOM_NAME} (page)", RANDOM.name, AFTER_BASELINES):
                x = s.get(m, {}).get("budgets", {}).get(b)
                cells.append(f"{100 * x['median']:.1f}/{100 * x['p10']:.1f}" if x else "-")
            print(f"| {n} | {b} | " + " | ".join(cells) + " |")
            d = s.get(f"{DEFAULT} (page)", {}).get("budgets", {}).get(b)
            rb = s[AFTER_BASELINES]["budgets"][b]
            if d:
                above[b][0] += d["median"] >= rb["median"]
                above[b][1] += d["p10"] >= rb["p10"]
                above[b][2] += 1
                above[b][3] += d["median"] >= rb["median"] and d["p10"] >= rb["p10"]
    for b in budgets:
        print(f"budget {b}: the default at or above random search after the baselines on "
              f"{above[b][0]} of {above[b][2]} landscapes (median), {above[b][1]} (10th "
              f"percentile), {above[b][3]} (both)")  # fmt: skip
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "seeds": args.seeds, "seed_offset": 0, "methods": methods,
            "budgets": list(budgets), "replay_s": time.time() - t0,
            "above": {str(b): v for b, v in above.items()}, "summary": summary,
        }, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
