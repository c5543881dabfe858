#!/usr/bin/env python
"""How far can one measurement be trusted? Two checks of the measurement engine on this machine.

1. ``repeat``: measure the same configuration N times (default: the emulated workload, 2
   workers, batch 16) and print the coefficient of variation of the objective and the fixed
   cost of each measurement (the fork of a measuring process from the run's fork server,
   the workload's build; the first measurement also pays the server's start).
2. ``wait``: with the emulated accelerator at a rate the CPU loader can barely reach (the
   default ``emulated_ms``), the measured data-wait fraction for num_workers 0, 1, 2: it must
   fall as workers are added.

Run from the repository root:  .venv/bin/python benchmarks/bench_repeatability.py [--mode both]
The load average is printed: on a busy machine the spread is larger.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from loadersearch import LoaderConfig
from loadersearch.measure import MeasurePlan, coefficient_of_variation, measure, serving
from loadersearch.workload import WorkloadSpec


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def repeat(args: argparse.Namespace, plan: MeasurePlan) -> bool:
    spec = WorkloadSpec(kind=args.workload, data=args.data, img_size=args.img_size)
    config = LoaderConfig(num_workers=args.num_workers, batch_size=args.batch_size)
    print(f"\n== repeat: {args.repeats} x {config.label()}, {args.workload} workload ==")
    print(
        f"{'run':>3} {'objective':>10} {'steady':>9} {'start s':>8} {'win CV':>7} "
        f"{'wait':>5} {'overhead s':>10} {'wall s':>7}"
    )
    results = []
    for i in range(args.repeats):
        r = measure(spec, config, plan)
        if not r.ok:
            print(f"{i:>3} {r.status} ({r.reason}): {r.message}")
            return False
        results.append(r)
        print(
            f"{i:>3} {r.objective:>10.1f} {r.steady_rate:>9.1f} {r.start_cost_s:>8.3f} "
            f"{100 * r.window_cv:>6.1f}% {100 * r.wait_fraction:>4.0f}% "
            f"{r.overhead_s:>10.2f} {r.wall_s:>7.2f}"
        )
    objectives = [r.objective for r in results]
    overheads = [r.overhead_s for r in results]
    print(
        f"objective: mean {statistics.mean(objectives):.1f} img/s, "
        f"CV {100 * coefficient_of_variation(objectives):.1f} %  ({results[0].device})"
    )
    print(
        f"steady rate CV {100 * coefficient_of_variation([r.steady_rate for r in results]):.1f}"
        f" %, start cost mean {statistics.mean(r.start_cost_s for r in results):.3f} s"
    )
    # The measurements share one fork server, as a run's trials do: the first pays the
    # server's start (Python, torch, the dataset index), every later one only its fork.
    forked = overheads[1:] or overheads
    print(
        f"fixed cost per measurement (fork server): median {statistics.median(forked):.3f} s "
        f"(min {min(forked):.3f}, max {max(forked):.3f}; target <= 0.3 s); the first, with "
        f"the server's start: {overheads[0]:.2f} s; "
        f"wall mean {statistics.mean(r.wall_s for r in results):.2f} s"
    )
    return True


def wait_table(args: argparse.Namespace, plan: MeasurePlan) -> bool:
    spec = WorkloadSpec(kind="emulated", data=args.data, img_size=args.img_size)
    print(
        f"\n== data wait vs num_workers: emulated {spec.emulated_ms[0]:g} + "
        f"{spec.emulated_ms[1]:g} ms/img, batch {args.batch_size} =="
    )
    print(f"{'workers':>7} {'wait':>6} {'steady':>9} {'objective':>10} {'CPU':>6}")
    waits = []
    for workers in (0, 1, 2):
        r = measure(spec, LoaderConfig(num_workers=workers, batch_size=args.batch_size), plan)
        if not r.ok:
            print(f"{workers:>7} {r.status} ({r.reason}): {r.message}")
            return False
        waits.append(r.wait_fraction)
        cpu = f"{r.cpu_util_mean:.0f}%" if r.cpu_util_mean is not None else "n/a"
        print(
            f"{workers:>7} {100 * r.wait_fraction:>5.1f}% {r.steady_rate:>9.1f} "
            f"{r.objective:>10.1f} {cpu:>6}"
        )
    falls = all(a > b for a, b in zip(waits, waits[1:], strict=False))
    print("data-wait fraction falls as workers are added: " + ("yes" if falls else "NO"))
    return falls


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--mode", choices=("repeat", "wait", "both"), default="both")
    p.add_argument("--workload", choices=("train", "loader", "emulated"), default="emulated")
    p.add_argument("--data", default=None, help="dataset (default: the embedded one)")
    p.add_argument("--num-workers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--img-size", type=int, default=None)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--epochs", type=int, default=MeasurePlan.epochs)
    p.add_argument("--steps", type=int, default=MeasurePlan.steps)
    args = p.parse_args()
    plan = MeasurePlan(epochs=args.epochs, steps=args.steps)
    t0 = time.monotonic()
    print(f"load average at start: {_load()} ({os.cpu_count()} CPUs)")
    ok = True
    with serving():  # one fork server for every measurement, as a run has
        if args.mode in ("repeat", "both"):
            ok &= repeat(args, plan)
        if args.mode in ("wait", "both"):
            ok &= wait_table(args, plan)
    print(f"\nload average at end: {_load()}; {time.monotonic() - t0:.0f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
