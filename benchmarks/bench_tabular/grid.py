"""The table of the tabular benchmark: a large grid measured once, round-robin, with repeats.

Points (``grid_points``): the main grid (pin_memory off), a subset with pin_memory on (on a
machine without CUDA pinning has no effect; the subset shows it, and the replay reads a pinned
configuration from its unpinned twin), and a few batches over the VRAM cap (infeasible: the
boundary the batch-size probe finds).

Order (``measure_table``): every point once in a shuffled order, then the next repeat of every
point in a new order, ...: the load of a shared machine drifts over all points alike instead of
hitting one region of the grid. Each measurement is appended to a JSON-lines file as it ends
(with the load average before and after it), so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import random
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadersearch import LoaderConfig
from loadersearch.measure import MeasurePlan, MeasureResult
from loadersearch.workload import WorkloadSpec

log = logging.getLogger(__name__)

GRID = "grid"  # a point of the main grid (pin_memory off)
PIN = "pin"  # the same configuration with pin_memory on (a subset)
CAP = "cap"  # a batch over the VRAM cap


@dataclass(frozen=True)
class GridSpec:
    num_workers: tuple[int, ...] = (0, 1, 2, 3, 4, 6, 8, 16)
    batch_size: tuple[int, ...] = (8, 16, 32)
    prefetch_factor: tuple[int, ...] = (1, 2, 4, 8)
    persistent_workers: tuple[bool, ...] = (False, True)
    pin_workers: tuple[int, ...] = (0, 2, 8, 16)  # the pinned subset: these workers ...
    pin_batches: tuple[int, ...] = (16, 32)  # ... x these batches, prefetch 2, persistent
    cap_batches: tuple[int, ...] = (64,)  # over the cap, measured with these workers:
    cap_workers: tuple[int, ...] = (0, 4, 16)

    def main(self) -> list[LoaderConfig]:
        out: dict[LoaderConfig, None] = {}
        for w, b, pf, pers in itertools.product(
            self.num_workers, self.batch_size, self.prefetch_factor, self.persistent_workers
        ):
            out.setdefault(_config(w, b, False, pf, pers), None)
        return list(out)

    def pinned(self) -> list[LoaderConfig]:
        return [_config(w, b, True, 2, True) for w in self.pin_workers for b in self.pin_batches]

    def over_cap(self) -> list[LoaderConfig]:
        return [_config(w, b, False, 2, True) for w in self.cap_workers for b in self.cap_batches]

    def describe(self) -> str:
        def fmt(values: Iterable[Any]) -> str:
            return (
                "{" + ",".join(str(v)[0] if isinstance(v, bool) else str(v) for v in values) + "}"
            )

        return (
            f"num_workers {fmt(self.num_workers)} x batch_size {fmt(self.batch_size)} x "
            f"prefetch_factor {fmt(self.prefetch_factor)} x persistent_workers "
            f"{fmt(self.persistent_workers)} = {len(self.main())} configurations (pin_memory "
            f"off); pin_memory on for num_workers {fmt(self.pin_workers)} x batch "
            f"{fmt(self.pin_batches)} (prefetch 2, persistent); over the VRAM cap: batch "
            f"{fmt(self.cap_batches)} with num_workers {fmt(self.cap_workers)}"
        )


def _config(w: int, b: int, pin: bool, pf: int, pers: bool) -> LoaderConfig:
    if w == 0:
        return LoaderConfig(0, b, pin)
    return LoaderConfig(w, b, pin, pf, pers)


def grid_points(spec: GridSpec) -> list[dict[str, Any]]:
    """Every point of the table: ``{"config": ..., "group": grid|pin|cap, "repeats": n}``."""
    points = [{"config": c.to_dict(), "group": GRID} for c in spec.main()]
    points += [{"config": c.to_dict(), "group": PIN} for c in spec.pinned()]
    points += [{"config": c.to_dict(), "group": CAP} for c in spec.over_cap()]
    return points


def measurement_record(result: MeasureResult, point: int, repeat: int) -> dict[str, Any]:
    """What the table keeps of one measurement (everything the replay needs)."""
    return {
        "point": point,
        "repeat": repeat,
        "status": result.status,
        "reason": result.reason,
        "objective": result.objective if result.ok else None,
        "steady_rate": result.steady_rate,
        "start_cost_s": result.start_cost_s,
        "window_cv": result.window_cv,
        # Per window: images, seconds, and the epoch-start share (the pruner's value drops it).
        "windows": [[w.images, round(w.seconds, 5), round(w.start_s, 5)] for w in result.windows],
        "warmup_s": result.warmup_s,
        "overhead_s": result.overhead_s,
        "wall_s": result.wall_s,
        "peak_rss_bytes": result.peak_rss_bytes,
        "cpu_util_mean": result.cpu_util_mean,
    }


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def measure_table(
    points: list[dict[str, Any]],
    measure_one: Callable[[LoaderConfig], MeasureResult],
    *,
    repeats: dict[str, int],
    progress_file: Path,
    meta: dict[str, Any],
    seed: int = 0,
    deadline: float | None = None,
) -> list[dict[str, Any]]:
    """Measure ``points`` round-robin (``repeats[group]`` times each), appending each
    measurement to ``progress_file`` (JSON lines, ``meta`` first); measurements already in
    the file are kept and not repeated. Stops after the measurement that passes ``deadline``
    (a ``time.time()``). Returns every measurement."""
    done: list[dict[str, Any]] = []
    if progress_file.exists():
        lines = progress_file.read_text().splitlines()
        old_meta = json.loads(lines[0])
        if old_meta.get("points") != points:
            sys.exit(f"{progress_file} is from another grid; move it away to start anew.")
        done = [json.loads(line) for line in lines[1:] if line.strip()]
    else:
        progress_file.parent.mkdir(parents=True, exist_ok=True)
        progress_file.write_text(json.dumps({**meta, "points": points}) + "\n")
    have = {(m["point"], m["repeat"]) for m in done}
    rng = random.Random(seed)
    rounds = max(repeats.values())
    total = sum(repeats[p["group"]] for p in points)
    with progress_file.open("a") as out:
        for r in range(rounds):
            order = [i for i, p in enumerate(points) if r < repeats[p["group"]]]
            rng.shuffle(order)  # a new order each round (the same one on a resume)
            for i in order:
                if (i, r) in have:
                    continue
                if deadline is not None and time.time() > deadline:
                    log.warning("time limit reached after %d of %d measurements", len(done), total)
                    return done
                config = LoaderConfig.from_dict(points[i]["config"])
                before, t0 = _load1(), time.time()
                result = measure_one(config)
                record = measurement_record(result, i, r)
                record.update(t_start=round(t0, 1), load1_before=before, load1_after=_load1())
                out.write(json.dumps(record) + "\n")
                out.flush()
                done.append(record)
                log.info(
                    "%d/%d round %d %s: %s %s (load %.1f)", len(done), total, r, config.label(),
                    result.status, f"{result.objective:.1f}" if result.ok else result.reason,
                    record["load1_after"],
                )  # fmt: skip
    return done


def write_table(path: Path, meta: dict[str, Any], measurements: list[dict[str, Any]]) -> Path:
    """The table, compressed: ``{"meta": ..., "points": ..., "measurements": ...}``."""
    meta = dict(meta)
    points = meta.pop("points")
    data = {"meta": meta, "points": points, "measurements": measurements}
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    return path


def read_table(path: Path) -> dict[str, Any]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def small_copy(source: str | Path, target: str | Path, factor: int = 4) -> str:
    """A copy of the YOLO-layout dataset ``source`` with its JPEGs scaled down by ``factor``
    (labels are normalised, so they stay as they are): cheap to decode. Kept once made."""
    from PIL import Image

    source, target = Path(source), Path(target)
    done = target / ".complete"
    if done.exists():
        return str(target)
    for path in sorted((source / "images").rglob("*.jpg")):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        with Image.open(path) as im:
            small = im.resize((max(1, im.width // factor), max(1, im.height // factor)))
            small.save(out, quality=90)
    for path in sorted((source / "labels").rglob("*.txt")):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(path.read_bytes())
    for name in ("classes.txt", "data.yaml"):
        if (source / name).exists():
            (target / name).write_bytes((source / name).read_bytes())
    done.write_text("ok\n")
    return str(target)


def default_workload(data: str) -> WorkloadSpec:
    """The benchmark's workload (why these numbers: benchmarks/tabular_grid.py); the storage
    latency travels in the environment (see io_server.py)."""
    return WorkloadSpec(
        kind="emulated",
        data=data,
        img_size=128,
        emulated_ms=(20.0, 5.0),
        emulated_mib=(600.0, 150.0),
        vram_cap=8 * 2**30,  # 600 + 150 x 32 MiB fits, batch 64 (10,200 MiB) does not
    )


DEFAULT_PLAN = MeasurePlan(
    epochs=2, steps=8, windows_per_epoch=4, warmup_epochs=1, warmup_steps=2, timeout_s=180
)
