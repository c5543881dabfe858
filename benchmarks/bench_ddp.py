#!/usr/bin/env python
"""One rank against N ranks (DistributedDataParallel, gloo on this CPU): what the job gains.

Each scenario measures the same per-rank configuration with 1 rank (a single process, no DDP)
and with N ranks (``WorkloadSpec.gpus = N``: one process per rank, a barrier at every window
edge, the emulated step followed by a one-number all-reduce, as DDP keeps ranks in lockstep),
``--repeats`` times interleaved, and prints the job's steady rate and objective, the ratio
N ranks / 1 rank, each rank's data wait, and the fixed overhead (starting N interpreters).

Scenarios (emulated accelerator, batch 8 per rank at 416 px on the generated VOC-like data):

* ``slow-device``: 60 ms per image. One rank's loader needs ~17 img/s of decoding, far below
  what the cores deliver: the loader is not the limit, so N ranks should give ~N x.
* ``fast-device``: the default emulated device (4 + 7 ms per image, ~130 img/s per rank). One
  rank's loader with its workers keeps up, but N ranks' workers share the same cores: the CPU
  becomes the limit and the job gains less than N x. This is why the per-rank answer is not the
  single-GPU answer divided by N, and why it is measured with every rank running.

Run from the repository root:  .venv/bin/python benchmarks/bench_ddp.py [--ranks 2]
The load average is printed: on a busy machine the figures move.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from loadersearch import LoaderConfig
from loadersearch.measure import MeasurePlan, MeasureResult, measure
from loadersearch.workload import WorkloadSpec

SCENARIOS = {
    "slow-device": (0.0, 60.0),  # emulated a + b*batch ms
    "fast-device": WorkloadSpec().emulated_ms,
}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _row(label: str, r: MeasureResult) -> str:
    waits = (
        "/".join(f"{100 * rank['wait_fraction']:.0f}" for rank in r.ranks)
        if r.ranks
        else f"{100 * r.wait_fraction:.0f}"
    )
    return (
        f"{label:<8} {r.steady_rate:>9.1f} {r.objective:>10.1f} {waits + ' %':>11} "
        f"{r.cpu_util_mean or 0:>6.0f}% {r.overhead_s:>9.1f}"
    )


def scenario(name: str, args: argparse.Namespace, plan: MeasurePlan) -> dict[int, list]:
    ms = SCENARIOS[name]
    config = LoaderConfig(num_workers=args.num_workers, batch_size=args.batch_size)
    print(
        f"\n== {name}: emulated {ms[0]:g} + {ms[1]:g} ms/img, {config.label()} per rank, "
        f"{args.repeats} rounds interleaved =="
    )
    print(
        f"{'ranks':<8} {'steady':>9} {'objective':>10} {'data wait':>11} {'CPU':>7} "
        f"{'overhead':>9}"
    )
    results: dict[int, list[MeasureResult]] = {1: [], args.ranks: []}
    for _ in range(args.repeats):
        for ranks in results:
            spec = WorkloadSpec(
                kind="emulated",
                data=args.data,
                img_size=args.img_size,
                device="cpu",
                emulated_ms=ms,
                gpus=ranks,
            )
            r = measure(spec, config, plan)
            if not r.ok:
                print(f"{ranks:<8} {r.status} ({r.reason}): {r.message}")
                continue
            results[ranks].append(r)
            print(_row(str(ranks), r))
    one, many = (results[k] for k in (1, args.ranks))
    if one and many:
        steady = statistics.median(r.steady_rate for r in many) / statistics.median(
            r.steady_rate for r in one
        )
        objective = statistics.median(r.objective for r in many) / statistics.median(
            r.objective for r in one
        )
        print(
            f"{args.ranks} ranks / 1 rank (medians): steady rate x{steady:.2f}, "
            f"objective x{objective:.2f}"
        )
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--scenario", choices=(*SCENARIOS, "both"), default="both")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--data", default=None, help="dataset (default: the generated one)")
    p.add_argument("--num-workers", type=int, default=1, help="per rank")
    p.add_argument("--batch-size", type=int, default=8, help="per rank")
    p.add_argument("--img-size", type=int, default=416)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, default=8)
    args = p.parse_args()
    plan = MeasurePlan(
        epochs=args.epochs, steps=args.steps, windows_per_epoch=2, warmup_steps=4, timeout_s=300
    )
    t0 = time.monotonic()
    print(f"load average at start: {_load()} ({os.cpu_count()} CPUs)")
    names = list(SCENARIOS) if args.scenario == "both" else [args.scenario]
    ok = True
    for name in names:
        results = scenario(name, args, plan)
        ok &= all(results.values())
    print(f"\nload average at end: {_load()}; {time.monotonic() - t0:.0f} s in all")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
