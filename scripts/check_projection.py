#!/usr/bin/env python
"""Check the full-epoch projection against a real full epoch, for 0 to 32 workers.

For each batch size and each ``num_workers`` (0, 1, 4, 8, 16, 32 by default), on the loader
workload with an EMULATED storage latency (each sample read sleeps ``--io-ms``, as on network
storage, so that many workers pay off even on 2 cores):

1. ``projected``: :func:`loadersearch.measure.measure` with the plan a study uses on this
   machine (``default_plan``), its epochs sized to the configuration; its projected full-epoch
   time ``epoch_time_s``;
2. ``fixed``: the same with ``in_flight_rounds=0`` (every configuration measures the plan's
   few steps, as before sizing), for comparison;
3. ``truth``: one full epoch of the whole dataset (at least 1,000 images) with a plain
   ``for batch in DataLoader(...)`` loop in this process, from ``iter`` to ``StopIteration``
   (worker start and shut-down included, as a training epoch pays them; the page cache is
   warm from the measurements just before). With workers it is the loader's *second* epoch,
   as every epoch after the first of a training run: here a DataLoader's first epoch with 32
   workers was ~2x faster to its first batch than its later ones (2.98 s against 5.82 s).

Sized and truth are interleaved and compared by their medians. A full epoch on shared cores
varies from one minute to the next (32 workers on 2 cores: 3.3-3.7 s, +/-6%), more than the
target, so each configuration is repeated until about ``--repeat-seconds`` (40) of truth has
been measured, at most ``--max-repeats`` (7) times and at least once (0 and 1 workers: their
epochs are the emulated sleeps one after the other, the least noisy and the longest, once);
``--repeats N`` fixes the count for every configuration whose epoch takes under
``--repeat-below`` seconds (20). The error is ``projected / truth - 1`` of the epoch time.
Writes a Markdown table to ``--out`` (default ``docs/benchmarks/projection.md``, the figures
beside it as ``.json``) and exits 1 when an error of the sized projection is beyond
``--target`` (5%).

    PYTHONPATH=. .venv/bin/python scripts/check_projection.py            # ~25 min on 2 cores
    PYTHONPATH=. .venv/bin/python scripts/check_projection.py --workers 0,4 --batch-sizes 8
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import platform
import shutil
import statistics
import sys
import time
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from loadersearch import LoaderConfig, MeasurePlan, WorkloadSpec  # noqa: E402


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=_ints, default=[0, 1, 4, 8, 16, 32])
    p.add_argument("--batch-sizes", type=_ints, default=[8, 32])
    p.add_argument("--io-ms", type=float, default=50.0, help="EMULATED latency per sample read")
    p.add_argument(
        "--io-cv", type=float, default=0.0, help="its spread per file (lognormal CV; 0 = none)"
    )
    p.add_argument("--prefetch", type=int, default=2, help="prefetch_factor of every row")
    p.add_argument("--images", type=int, default=1024, help="dataset size (one full epoch)")
    p.add_argument("--img-size", type=int, default=64, help="network input, pixels")
    p.add_argument("--shrink", type=int, default=4, help="source JPEGs scaled down by this")
    p.add_argument("--data", type=Path, default=ROOT / "studies" / "data" / "projection-check")
    p.add_argument("--target", type=float, default=0.05, help="largest acceptable |error|")
    p.add_argument(
        "--repeats", type=int, default=None, help="fixed interleaved repeats (short epochs)"
    )
    p.add_argument(
        "--repeat-seconds", type=float, default=40.0, help="repeat until this much truth"
    )
    p.add_argument("--max-repeats", type=int, default=7, help="at most this many repeats")
    p.add_argument("--repeat-below", type=float, default=20.0, help="seconds: repeat if faster")
    p.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks" / "projection.md")
    return p.parse_args(argv)


def _repeats(args: argparse.Namespace, truths: list[float]) -> int:
    """How many interleaved repeats a configuration gets, given its first truth (seconds)."""
    if args.repeats is not None:
        return args.repeats if truths[0] < args.repeat_below else 1
    return max(1, min(args.max_repeats, math.ceil(args.repeat_seconds / truths[0])))


def small_dataset(root: Path, images: int, shrink: int) -> str:
    """``images`` generated VOC-like images (YOLO layout) scaled down ``shrink`` times, so that
    decoding is cheap and the emulated storage latency dominates. Kept once made."""
    from PIL import Image

    from loadersearch.workload import make_dataset

    done = root / f".complete-{images}-{shrink}"
    if done.exists():
        return str(root)
    for part in ("images", "labels"):  # another size's images must not stay behind
        shutil.rmtree(root / part, ignore_errors=True)
    for marker in root.glob(".complete-*"):
        marker.unlink()
    full = root.with_name(root.name + "-full")
    if not (full / f".complete-{images}").exists():
        shutil.rmtree(full, ignore_errors=True)  # another size's dataset: start again
        make_dataset(full, images=images, fmt="yolo", seed=0)
        (full / f".complete-{images}").write_text("ok\n")
    for path in sorted((full / "images").glob("*.jpg")):
        out = root / "images" / path.name
        out.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(path) as im:
            im.resize((max(1, im.width // shrink), max(1, im.height // shrink))).save(out)
    for path in [*sorted((full / "labels").glob("*.txt")), full / "classes.txt"]:
        out = root / path.relative_to(full)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(path.read_bytes())
    done.write_text("ok\n")
    return str(root)


def full_epoch_seconds(spec: WorkloadSpec, config: LoaderConfig) -> tuple[float, int]:
    """One full epoch with a plain DataLoader loop: seconds from ``iter(loader)`` to
    ``StopIteration``, and the images it delivered; with workers, the loader's second epoch
    (a training run's every epoch but its first)."""
    from torch.utils.data import DataLoader

    from loadersearch.workload import create_workload

    workload = create_workload(spec, batch_size=config.batch_size)
    loader = DataLoader(
        workload.dataset,
        shuffle=True,
        drop_last=True,
        collate_fn=workload.collate_fn,
        worker_init_fn=workload.worker_init_fn if config.num_workers else None,
        **config.dataloader_kwargs(),
    )
    seconds, images = 0.0, 0
    for _ in range(2 if config.num_workers else 1):
        images = 0
        t0 = time.perf_counter()
        for batch in loader:
            images += batch[0].shape[0]
        seconds = time.perf_counter() - t0
    return seconds, images


def main(argv: list[str] | None = None) -> int:
    args = _args(argv)
    # PyTorch warns of more workers than CPUs: here that is the point (they sleep, as on I/O).
    warnings.filterwarnings("ignore", message="This DataLoader will create")
    from loadersearch import measurement_lock
    from loadersearch.measure import measure
    from loadersearch.search import default_plan

    data = small_dataset(args.data, args.images, args.shrink)
    spec = WorkloadSpec(
        kind="loader",
        data=data,
        img_size=args.img_size,
        device="cpu",
        emulated_io_ms=args.io_ms,
        emulated_io_cv=args.io_cv,
    )
    sized_plan = default_plan(small=True)  # what a study on this machine measures
    fixed_plan = dataclasses.replace(sized_plan, in_flight_rounds=0)
    rows = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()
    t_start = time.time()
    for batch in args.batch_sizes:
        for workers in args.workers:
            config = LoaderConfig(
                num_workers=workers,
                batch_size=batch,
                prefetch_factor=args.prefetch if workers else None,
            )
            truths, sizeds, fixeds, notes = [], [], [], set()
            cis: list[float] = []
            epochs_measured: list[int] = []
            while True:
                with measurement_lock():
                    sized = measure(spec, config, sized_plan)
                    # for comparison only: once
                    fixed = measure(spec, config, fixed_plan) if not fixeds else None
                    truth_s, truth_images = full_epoch_seconds(spec, config)
                for r in (sized, fixed):
                    if r is not None and not r.ok:
                        print(f"{config.label()}: {r.status} ({r.reason}): {r.message}")
                truths.append(truth_s)
                sizeds.append(sized.epoch_time_s if sized.ok else float("nan"))
                cis.append(sized.precision if sized.ok and sized.precision is not None else 0.0)
                epochs_measured.append(sized_plan.epochs + (sized.extra_epochs or 0))
                if fixed is not None:
                    fixeds.append(fixed.epoch_time_s if fixed.ok else float("nan"))
                notes.update(sized.notes)
                if len(truths) >= _repeats(args, truths):
                    break
            row = {
                "config": config.label(),
                "workers": workers,
                "batch": batch,
                "in_flight": workers * (config.prefetch_factor or 0),
                "steps": sized.epoch_steps,
                "images": truth_images,
                "repeats": len(truths),
                "truth_s": statistics.median(truths),
                "sized_s": statistics.median(sizeds),
                "fixed_s": statistics.median(fixeds),
                "sized_all": sizeds,
                "truth_all": truths,
                "notes": sorted(notes),
            }
            # the interval the measurement stated (90%, relative), and its epochs
            row["sized_ci"] = statistics.median(cis)
            row["sized_epochs"] = statistics.median(epochs_measured)
            row["sized_err"] = row["sized_s"] / row["truth_s"] - 1
            row["fixed_err"] = row["fixed_s"] / row["truth_s"] - 1
            rows.append(row)
            print(
                f"{row['config']:>10}: truth {row['truth_s']:7.2f} s ({truth_images} img, "
                f"x{row['repeats']}), "
                f"sized ({row['steps']} steps x {row['sized_epochs']:g}) {row['sized_s']:7.2f} s "
                f"{row['sized_err']:+.1%} (+/-{row['sized_ci']:.1%}), "
                f"fixed ({fixed_plan.steps} steps) {row['fixed_s']:7.2f} s "
                f"{row['fixed_err']:+.1%}",
                flush=True,
            )
    minutes = (time.time() - t_start) / 60
    worst = max(abs(r["sized_err"]) for r in rows)
    ok = worst <= args.target
    text = _table(args, rows, sized_plan, started, load_start, os.getloadavg(), minutes, worst)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    meta = {"args": {k: str(v) for k, v in vars(args).items()}, "plan": sized_plan.to_dict()}
    args.out.with_suffix(".json").write_text(json.dumps({**meta, "rows": rows}, indent=1) + "\n")
    print(f"\nworst |error| {worst:.1%} (target {args.target:.0%}): {'PASS' if ok else 'FAIL'}")
    print(f"table written to {args.out}")
    return 0 if ok else 1


def _table(args, rows, plan: MeasurePlan, started, load_start, load_end, minutes, worst) -> str:  # noqa: ANN001
    cpus = os.cpu_count()
    lines = [
        "# Projection check: projected vs measured full epoch",
        "",
        f"`scripts/check_projection.py`, {started}, {minutes:.1f} min; {platform.node()}: "
        f"{cpus} logical CPUs, shared with other jobs (load average "
        f"{load_start[0]:.1f} at the start, {load_end[0]:.1f} at the end); Python "
        f"{platform.python_version()}.",
        "",
        f"Workload: the loader workload (data pipeline alone, no step) at {args.img_size} px on "
        f"{args.images} generated images scaled down {args.shrink}x, with an **EMULATED storage "
        f"latency of {args.io_ms:g} ms per sample** (a sleep: workers overlap it, so 16-32 "
        "workers pay off even on 2 cores)"
        + (
            f", each file's wait drawn once, lognormal with that mean and a CV of {args.io_cv:g}"
            if args.io_cv
            else ""
        )
        + f". Configurations: prefetch_factor {args.prefetch}, no pin_memory, no "
        "persistent_workers, workers started by fork.",
        "",
        f"- **truth**: one full epoch of all {args.images} images with a plain `for batch in "
        "DataLoader(...)` loop, from `iter` to `StopIteration` (workers' start and shut-down "
        "included, as every epoch of a training run without persistent_workers pays them); "
        "with workers, the loader's second epoch (a training run's every epoch but the first: "
        "here the first epoch of a DataLoader with 32 workers reached its first batch ~2x "
        "sooner than its later ones).",
        f"- **sized**: the projected epoch time of a measurement with the plan a study uses "
        f"on this machine (warm-up, {plan.epochs} measured epochs of at least {plan.steps} "
        f"steps, sized to the configuration: at least {plan.in_flight_rounds} x workers x "
        f"prefetch_factor + workers steps, within {plan.epoch_limit_s:g} s an epoch at the "
        "warm-up's rate, never beyond one full epoch), then more epochs of the same length "
        f"while the projected epoch time's 90% interval is wider than +/-{plan.precision:.0%} "
        f"(or fewer than 3 were measured), for at most {plan.extend_limit_s:g} s more. "
        "**stated**: that interval, as the measurement reported it; **epochs**: how many it "
        "measured.",
        f"- **fixed**: the same plan with every epoch {plan.steps} steps long "
        "(`in_flight_rounds=0`, as before sizing).",
        "",
        (
            f"Sized and truth are interleaved {args.repeats} times for each configuration "
            f"whose epoch takes under {args.repeat_below:g} s, once for the others"
            if args.repeats is not None
            else "Sized and truth are interleaved until about "
            f"{args.repeat_seconds:g} s of truth were measured, at most {args.max_repeats} "
            "times (full epochs on shared cores vary by more than the target from one minute "
            "to the next)"
        )
        + "; fixed once. The table compares medians (each repeat's seconds in the last "
        "columns). "
        "Error = projected / truth - 1 (positive: the projection is slower than the truth).",
        "",
        "| config | batches in flight | sized steps | epochs | truth (s) | sized (s) "
        "| sized error | stated (90%) | fixed (s) | fixed error | truth, each (s) "
        "| sized, each (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        each_t = ", ".join(f"{x:.2f}" for x in r["truth_all"])
        each_s = ", ".join(f"{x:.2f}" for x in r["sized_all"])
        lines.append(
            f"| {r['config']} | {r['in_flight']} | {r['steps']} | {r['sized_epochs']:g} | "
            f"{r['truth_s']:.2f} | {r['sized_s']:.2f} | {r['sized_err']:+.1%} | "
            f"+/-{r['sized_ci']:.1%} | {r['fixed_s']:.2f} | {r['fixed_err']:+.1%} | "
            f"{each_t} | {each_s} |"
        )
    verdict = "within" if worst <= args.target else "**beyond**"
    inside = sum(abs(r["sized_err"]) <= r["sized_ci"] for r in rows)
    lines += [
        "",
        f"Worst sized error: {worst:.1%}, {verdict} the {args.target:.0%} target. The truth "
        f"lies within the interval the measurement stated in {inside} of {len(rows)} rows.",
        "",
    ]
    notes = sorted({n for r in rows for n in r["notes"] if "EMULATED" not in n})
    if notes:
        lines += ["Notes the measurements gave:", ""] + [f"- {n}" for n in notes] + [""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
