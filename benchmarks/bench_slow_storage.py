#!/usr/bin/env python
"""Slow storage and the article's remedies, measured: more workers, a larger prefetch_factor,
a RAM cache and a memmap cache, with and without an emulated storage latency.

Each configuration is measured ``--rounds`` times, interleaved (A B C ... A B C ...), on the
built-in generated dataset (512 VOC-like JPEGs), with ``loadersearch.measure.measure`` (the
measurement a study's trial makes: warm-up excluded, short epochs with their starts). Printed:
the median objective (images/s of a full epoch), the min..max over the rounds, and the median
share of measured time the loop waited for data, as a Markdown table.

Scenarios (``--io-ms`` the emulated latency per sample read, a sleep without CPU, as on a
network file system or a hard disk):

* ``latency`` rows: the emulated storage, 2 and 8 workers, prefetch 2 and 8, then the RAM and
  memmap caches (filled once, so the latency is paid per file at the fill, never per sample).
* ``local`` rows: no latency, none against memmap: the memmap cache's own gain (the decode
  and down-scaling done once).

Run from the repository root (the measuring processes import loadersearch from there):
  .venv/bin/python benchmarks/bench_slow_storage.py [--workload emulated] [--img-size 128]
The load average is printed: on a busy machine the figures move.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from loadersearch import LoaderConfig
from loadersearch.measure import MeasurePlan, measure
from loadersearch.workload import WorkloadSpec

# (scenario, cache, workers, prefetch_factor)
LATENCY_ROWS = [
    ("latency", "none", 2, 2),
    ("latency", "none", 2, 8),
    ("latency", "none", 8, 2),
    ("latency", "none", 8, 8),
    ("latency", "ram", 2, 2),
    ("latency", "memmap", 2, 2),
]
LOCAL_ROWS = [
    ("local", "none", 2, 2),
    ("local", "memmap", 2, 2),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", choices=("loader", "emulated"), default="emulated")
    ap.add_argument("--img-size", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--io-ms", type=float, default=20.0)
    ap.add_argument(
        "--io-cv",
        type=float,
        default=0.0,
        help="spread of the latency per file (lognormal CV; 2 = a disk's seeks), 0 = constant",
    )
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument(
        "--only",
        choices=("latency", "local", "prefetch"),
        default=None,
        help="prefetch: the latency rows without a cache (workers x prefetch_factor)",
    )
    ap.add_argument("--data", default=None, help="dataset directory (default: the built-in one)")
    ap.add_argument(
        "--precision",
        type=float,
        default=0.05,
        help="measure each until its epoch time is known this well (90%%; 0 = 2 epochs), "
        "within 8 s more, as a study on a CPU does",
    )
    args = ap.parse_args()

    if args.only == "prefetch":
        rows = [r for r in LATENCY_ROWS if r[1] == "none"]
    else:
        rows = [r for r in LATENCY_ROWS + LOCAL_ROWS if args.only in (None, r[0])]
    plan = MeasurePlan(
        epochs=2,
        steps=8,
        windows_per_epoch=2,
        warmup_steps=4,
        precision=args.precision,
        extend_limit_s=8.0,
    )
    results: dict[tuple, list] = {r: [] for r in rows}
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    started = time.monotonic()
    for round_ in range(args.rounds):
        for row in rows:
            scenario, cache, workers, prefetch = row
            spec = WorkloadSpec(
                kind=args.workload,
                data=args.data,
                img_size=args.img_size,
                device="cpu" if args.workload == "loader" else "auto",
                cache=cache,
                emulated_io_ms=args.io_ms if scenario == "latency" else 0.0,
                emulated_io_cv=args.io_cv if scenario == "latency" else 0.0,
            )
            config = LoaderConfig(workers, args.batch_size, False, prefetch, True)
            result = measure(spec, config, plan)
            if not result.ok:
                raise SystemExit(f"{row}: {result.status} {result.reason}: {result.message}")
            results[row].append(result)
            print(
                f"round {round_ + 1} {scenario:8} {cache:7} w{workers} pf{prefetch}: "
                f"{result.objective:7.1f} img/s, wait {result.wait_fraction:.0%}",
                flush=True,
            )
    print(
        f"\n{args.workload} workload, {args.img_size} px, batch {args.batch_size}, persistent "
        f"workers, {args.rounds} interleaved rounds, {time.monotonic() - started:.0f} s; load "
        f"average at end {os.getloadavg()[0]:.1f}\n"
    )
    print("| storage | cache | workers | prefetch | img/s (median) | min..max | data wait |")
    print("|---|---|---:|---:|---:|---|---:|")
    for row, measured in results.items():
        scenario, cache, workers, prefetch = row
        values = [r.objective for r in measured]
        wait = statistics.median(r.wait_fraction for r in measured)
        spread = f", CV {args.io_cv:g}" if args.io_cv else ""
        storage = (
            f"{args.io_ms:g} ms/sample{spread}" if scenario == "latency" else "local (page cache)"
        )
        print(
            f"| {storage} | {cache} | {workers} | {prefetch} | {statistics.median(values):.1f} "
            f"| {min(values):.1f}..{max(values):.1f} | {wait:.0%} |"
        )


if __name__ == "__main__":
    main()
