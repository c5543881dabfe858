#!/usr/bin/env python
"""Replay search methods against the measured table (benchmarks/data/tabular-grid.json.gz):
how close does each method's answer come to the true optimum, at which budget, over many seeds.

    .venv/bin/python benchmarks/tabular_replay.py                  # 50 seeds, ~20 min on 2 cores
    .venv/bin/python benchmarks/tabular_replay.py --seeds 5 --methods structured,random
    .venv/bin/python benchmarks/tabular_replay.py --table my-grid.json.gz --fair

Any table in the documented format replays (a grid measured on your machine with
benchmarks/tabular_grid.py, a model of benchmarks/data/zoo/). A trial's measurement is one of
the point's measured repeats, drawn at random (its windows feed the real pruner), or with
``--fair`` a fresh draw from the point's truth and noise; the answer's quality is its true
value (its truth, or the mean of its repeats) over the true optimum. Methods: loadersearch
with each sampler (the whole pipeline: baselines first, Wilcoxon pruning, the interleaved
confirmation), loadersearch's sampler before issue 12 (``tpe-before``), and random search
(Optuna's RandomSampler, no pruning, best trial). Writes results (markdown, JSON, plot) to
--out and prints the table.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_tabular.replay import (
    RANDOM,
    Method,
    loadersearch_methods,
    replay_seed,
    setup,
    summarise,
)
from bench_tabular.report import DEFAULT_METHOD, write_report

HERE = Path(__file__).resolve().parent
REPORT_BUDGETS = (10, 14, 20, 40)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--table", type=Path, default=HERE / "data" / "tabular-grid.json.gz")
    p.add_argument("--out", type=Path, default=HERE.parent / "docs" / "benchmarks")
    p.add_argument("--seeds", type=int, default=50)
    p.add_argument("--methods", default="gp,structured,tpe,random,tpe-before",
                   help="loadersearch samplers (random search is always added)")  # fmt: skip
    p.add_argument("--max-budget", type=int, default=40)
    p.add_argument(
        "--fair",
        action="store_true",
        help="draw every measurement afresh from "
        "the point's truth and noise (issue 23) instead of one of its stored repeats",
    )
    p.add_argument("--jobs", type=int, default=2, help="processes")
    p.add_argument("--render", type=Path, metavar="JSON", help="only re-write the table and "
                   "plot of an earlier run's tabular-benchmark.json into --out")  # fmt: skip
    return p.parse_args(argv)


_STATE: dict[str, Any] = {}


def _worker_init() -> None:
    """Each replay process computes with one thread (GPSampler's torch would otherwise start
    one per core in every process of the pool) and takes the measurement lock, as every
    replayed trial does, in a directory of its own (the processes must not wait on each
    other)."""
    import torch

    torch.set_num_threads(1)
    os.environ["LOADERSEARCH_LOCK_DIR"] = tempfile.mkdtemp(prefix="ls-replay-")


def _job(task: tuple[Method, int, list[int]]) -> list[dict[str, Any]]:
    method, seed, budgets = task
    s = _STATE
    return replay_seed(method, s["table"], s["space"], workload=s["workload"], plan=s["plan"],
                       hardware=s["hardware"], seed=seed, budgets=budgets, gpu=s["gpu"],
                       fair=s["fair"])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    if args.render:
        import json

        from bench_tabular.report import render

        data = json.loads(args.render.read_text())
        data["summary"] = {m: {**s, "budgets": {int(b): v for b, v in s["budgets"].items()}}
                           for m, s in data["summary"].items()}  # fmt: skip
        paths = render(data, args.out)
        print(paths["markdown"].read_text())
        return 0
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    logging.getLogger("loadersearch").setLevel(logging.WARNING)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    _STATE.update(setup(args.table), fair=args.fair)
    methods = loadersearch_methods([m for m in args.methods.split(",") if m]) + [RANDOM]
    budgets = sorted({*range(4, args.max_budget + 1, 2), *REPORT_BUDGETS})
    budgets = [b for b in budgets if b <= args.max_budget]
    tasks = [(m, seed, budgets) for m in methods for seed in range(args.seeds)]
    t0 = time.time()
    rows: list[dict[str, Any]] = []
    with multiprocessing.get_context("fork").Pool(args.jobs, initializer=_worker_init) as pool:
        for i, got in enumerate(pool.imap_unordered(_job, tasks), 1):
            rows.extend(got)
            if i % 10 == 0 or i == len(tasks):
                logging.info("%d/%d runs replayed (%.0f s)", i, len(tasks), time.time() - t0)
    # The default sampler first, then the others as given, random search last.
    names = [m.name for m in methods]
    names.sort(key=lambda n: (n != DEFAULT_METHOD, n == RANDOM.name))
    summary = summarise(rows, order=names)
    paths = write_report(
        summary, rows, _STATE["table"], space=_STATE["space"], seeds=args.seeds,
        report_budgets=[b for b in REPORT_BUDGETS if b <= args.max_budget],
        out=args.out, replay_s=time.time() - t0,
    )  # fmt: skip
    print(paths["markdown"].read_text())
    print(f"results: {', '.join(str(p) for p in paths.values())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
