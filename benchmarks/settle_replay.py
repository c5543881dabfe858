#!/usr/bin/env python
"""Does settling early (``--trials`` as a cap, issue 26) cost answer quality? On every landscape
of the zoo, the fair way (each measurement a fresh draw from the point's truth and noise),
the default search replayed (a) to its full budget of 40 trials and (b) stopped once settled
(:mod:`loadersearch.search._settle`), the same seeds: median and 10th percentile of the
answer's quality (its truth / the optimum), and the trials the settled runs used.

    .venv/bin/python benchmarks/make_zoo.py                             # the tables
    nice .venv/bin/python benchmarks/settle_replay.py --seeds 20 [--set all]

Prints the table and writes it as Markdown and JSON with --out DIR.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from bench_tabular.replay import loadersearch_methods, percentile, replay_seed, setup
from zoo_replay import _STATE, STEMS, _init, landscapes

CAP = 40


def _job(task: tuple[str, str, int, bool]) -> dict[str, Any]:
    name, sampler, seed, settle = task
    if name not in _STATE:
        _STATE[name] = setup(_STATE["paths"][name])
    s = _STATE[name]
    [method] = loadersearch_methods([sampler])
    [row] = replay_seed(method, s["table"], s["space"], workload=s["workload"], plan=s["plan"],
                        hardware=s["hardware"], seed=seed, budgets=[CAP], gpu=s["gpu"],
                        fair=True, settle=settle)  # fmt: skip
    return {**row, "landscape": name, "settle": settle}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--set", default="all", choices=tuple(STEMS))
    parser.add_argument("--sampler", default="structured")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    paths = landscapes(args.set)
    tasks = [(name, args.sampler, seed, settle) for name in paths
             for seed in range(args.seeds) for settle in (False, True)]  # fmt: skip
    started = time.monotonic()
    with multiprocessing.Pool(args.jobs, initializer=_init, initargs=(paths,)) as pool:
        rows = pool.map(_job, tasks, chunksize=4)
    table: dict[str, dict[str, Any]] = {}
    for name in paths:
        cell: dict[str, Any] = {}
        for settle in (False, True):
            sel = [r for r in rows if r["landscape"] == name and r["settle"] is settle]
            q = sorted(r["quality"] for r in sel)
            cell["settled" if settle else "full"] = {
                "median": statistics.median(q), "p10": percentile(q, 10),
                "trials": statistics.fmean(r["trials"] for r in sel),
            }  # fmt: skip
        table[name] = cell
    print(f"{args.sampler}, {args.seeds} seeds, cap {CAP}, fair replay "
          f"({time.monotonic() - started:.0f} s)")  # fmt: skip
    head = (f"{'landscape':<26} {'full med/p10':>13} {'settled med/p10':>16} {'trials':>7} "
            f"{'ok':>4}")
    print(head)
    lines = ["| landscape | full budget: median / p10 | settled: median / p10 | trials used "
             "(mean of 40) | within 1 point |", "|---|---:|---:|---:|---|"]  # fmt: skip
    misses = 0
    for name, cell in table.items():
        f, s = cell["full"], cell["settled"]
        ok = s["median"] >= f["median"] - 0.01 and s["p10"] >= f["p10"] - 0.01
        misses += not ok
        print(f"{name:<26} {100 * f['median']:>6.1f}/{100 * f['p10']:<6.1f} "
              f"{100 * s['median']:>8.1f}/{100 * s['p10']:<7.1f} {s['trials']:>7.1f} "
              f"{'yes' if ok else 'NO':>4}")  # fmt: skip
        lines.append(f"| {name} | {100 * f['median']:.1f} / {100 * f['p10']:.1f} | "
                     f"{100 * s['median']:.1f} / {100 * s['p10']:.1f} | {s['trials']:.1f} | "
                     f"{'yes' if ok else '**no**'} |")  # fmt: skip
    mean_trials = statistics.fmean(c["settled"]["trials"] for c in table.values())
    print(f"settled runs used {mean_trials:.1f} of {CAP} trials on average; "
          f"{misses} of {len(table)} landscapes lose more than 1 point")  # fmt: skip
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "settle-replay.json").write_text(json.dumps(
            {"sampler": args.sampler, "seeds": args.seeds, "cap": CAP, "table": table}, indent=2))
        head = [
            f"# Settling early on the landscape zoo ({args.sampler}, {args.seeds} seeds, fair "
            "replay)", "",
            f"`benchmarks/settle_replay.py --seeds {args.seeds} --set {args.set}`: each "
            f"landscape replayed to the full budget of {CAP} trials and, with the same seeds, "
            "stopped once settled (loadersearch.search._settle: after at least 14 trials, 16 in "
            "a row that measured nothing above the best before them, and on a host of 4+ CPUs "
            "once the deepest prefetch was measured). Quality = the answer's truth / "
            f"the optimum, in %. Settled runs used {mean_trials:.1f} of {CAP} trials on "
            f"average; {misses} of {len(table)} landscapes lose more than 1 point (median or "
            "10th percentile). `heldout-*` were not looked at while choosing the rule.", "",
        ]  # fmt: skip
        (args.out / "settle-replay.md").write_text("\n".join(head + lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
