#!/usr/bin/env python
"""What a shorter measurement plan costs in trust: measure the same configurations with the
default CPU plan and with shorter epochs, interleaved (A1 B1 A2 B2 ...), and print for each
configuration and plan the median images/s, the spread of the repeats, the precision each
measurement reached, its wall time and its measured epochs' time.

A plan is cheaper without costing trust when its median stays within the repeats' spread of
the default's and its spread is not wider. Run from the repository root on an idle machine:

    .venv/bin/python benchmarks/bench_plan_cost.py [--repeats 4] [--limits 8,4]
        [--configs w4-b16-pf8-persist,w2-b32-pf4-persist,w1-b16-pf2] [--json PATH]

The workload is the quick start's: YOLOv4-tiny training on this machine's device at its
default size on the built-in dataset (generated when missing). ``--limits`` are the plan's
``epoch_limit_s`` values (seconds a sized epoch may take at the warm-up's rate); the epochs
added for the precision get the same limit (``extend_limit_s``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time

from loadersearch import LoaderConfig, WorkloadSpec, fingerprint
from loadersearch.measure import OK, measure, prepare
from loadersearch.search import default_plan
from loadersearch.workload import default_dataset

DEFAULT_CONFIGS = "w4-b16-pf8-persist,w2-b32-pf4-persist,w1-b16-pf2"


def parse_config(text: str) -> LoaderConfig:
    """``w4-b16-pf8-persist[-pin]`` -> LoaderConfig."""
    knobs = {"num_workers": 0, "batch_size": 16, "prefetch_factor": None,
             "persistent_workers": False, "pin_memory": False}  # fmt: skip
    for part in text.split("-"):
        if part == "persist":
            knobs["persistent_workers"] = True
        elif part == "pin":
            knobs["pin_memory"] = True
        elif part.startswith("pf"):
            knobs["prefetch_factor"] = int(part[2:])
        elif part.startswith("w"):
            knobs["num_workers"] = int(part[1:])
        elif part.startswith("b"):
            knobs["batch_size"] = int(part[1:])
        else:
            raise SystemExit(f"bench_plan_cost: {part!r} in {text!r} is not w/b/pf/persist/pin")
    if not knobs["num_workers"]:
        knobs["prefetch_factor"], knobs["persistent_workers"] = None, False
    return LoaderConfig(**knobs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--limits", default="8,4", help="epoch_limit_s values, default first")
    parser.add_argument("--configs", default=DEFAULT_CONFIGS)
    parser.add_argument("--json", help="write the measurements to this file")
    args = parser.parse_args(argv)
    limits = [float(x) for x in args.limits.split(",")]
    configs = [parse_config(c) for c in args.configs.split(",")]
    workload = WorkloadSpec(kind="train", data=default_dataset())
    workload = prepare(workload, None, fingerprint()).workload
    base = default_plan(small=True)
    plans = {
        lim: dataclasses.replace(base, epoch_limit_s=lim, extend_limit_s=lim) for lim in limits
    }
    load_before = os.getloadavg()
    started = time.monotonic()
    rows: list[dict] = []
    for rep in range(args.repeats):
        for config in configs:
            for lim, plan in plans.items():
                r = measure(workload, config, plan, prepared=True)
                row = {
                    "repeat": rep, "config": config.label(), "limit_s": lim, "status": r.status,
                    "objective": r.objective, "precision": r.precision, "wall_s": r.wall_s,
                    "epoch_steps": r.epoch_steps, "measured_s": r.phases.get("planned", 0.0)
                    + r.phases.get("extra", 0.0), "outside_share": r.outside_share,
                }  # fmt: skip
                rows.append(row)
                print(f"  {rep} {row['config']:<24} limit {lim:g} s: {r.objective:6.1f} img/s "
                      f"({r.status}), {r.epoch_steps} steps/epoch, wall {r.wall_s:5.1f} s, "
                      f"precision {r.precision or 0:.3f}",
                      file=sys.stderr, flush=True)  # fmt: skip
    wall = time.monotonic() - started
    print(f"# Plan cost: {args.repeats} interleaved repeats, load average "
          f"{load_before[0]:.2f} -> {os.getloadavg()[0]:.2f}, {wall / 60:.1f} min\n")  # fmt: skip
    print("| configuration | epoch limit | median img/s | min..max | spread | precision (median) "
          "| steps/epoch | wall s (mean) | measured s (mean) |")  # fmt: skip
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for config in configs:
        for lim in limits:
            sel = [r for r in rows if r["config"] == config.label() and r["limit_s"] == lim]
            vals = [r["objective"] for r in sel if r["status"] == OK]
            if not vals:
                print(f"| {config.label()} | {lim:g} s | failed | | | | | | |")
                continue
            med = statistics.median(vals)
            prec = statistics.median([r["precision"] or 0.0 for r in sel])
            print(f"| {config.label()} | {lim:g} s | {med:.1f} | {min(vals):.1f}..{max(vals):.1f} "
                  f"| {(max(vals) - min(vals)) / med:.1%} | {prec:.1%} "
                  f"| {sel[0]['epoch_steps']} | {statistics.fmean(r['wall_s'] for r in sel):.1f} "
                  f"| {statistics.fmean(r['measured_s'] for r in sel):.1f} |")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"load_before": load_before, "wall_s": wall, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
