"""The measured table as the replay reads it: a trial's measurement is one of the point's
measured repeats, drawn at random, with its windows and its time.

* ``pin_memory`` has no effect without CUDA (the batches stay on the host; the ``pin`` subset of
  the table measures it): a pinned configuration is read from its unpinned twin.
* A batch over the VRAM cap is infeasible, with the time its measurements took; a model's point
  of the grid may be infeasible too (``"infeasible": "shm_full"``: its queue exceeds /dev/shm;
  the meta's ``shm_images`` says where, for the configurations between the grid's points).
* A configuration between measured worker counts or prefetch factors (the space has every
  integer, the grid a ladder of them) is interpolated linearly between its two measured
  neighbours, repeat by repeat (the same repeat index on both sides, so the noise of a
  repeat carries over): a linear interpolation never exceeds its ends, so the optimum is
  always a measured point.
* A configuration's true value is the mean of its repeats' objectives, or its ``truth`` where
  the table is a model (benchmarks/bench_tabular/zoo.py): a point may carry ``truth`` (its
  true objective) and ``noise`` (the CV of one measurement) and no measurements; its three
  repeats are then drawn once from them (a fixed seed per point), as if measured.
* On a table that measured pinned memory across its grid (a GPU host: pinned configurations
  in the ``grid`` group), a pinned configuration is its own point, not its twin.
* :meth:`Table.fresh` is the fair replay's draw (issue 23): a new measurement from the
  point's truth and noise every time (a measured point: the mean and CV of its repeats), so
  that a lucky repeat is not drawn again and the confirmation really re-measures.
"""

from __future__ import annotations

import bisect
import random
import statistics
import zlib
from dataclasses import dataclass, field, replace
from typing import Any

from loadersearch import LoaderConfig
from loadersearch.measure import (
    OK,
    MeasureResult,
    Window,
    coefficient_of_variation,
    full_epoch_images,
)

OBJECTIVE_KEYS = ("objective", "steady_rate", "start_cost_s", "window_cv")
TIME_KEYS = ("warmup_s", "overhead_s", "wall_s")


@dataclass
class Repeat:
    """One measured repeat of one configuration."""

    status: str
    reason: str | None
    objective: float
    window_cv: float
    windows: list[tuple[int, float, float]]  # (images, seconds, start_s)
    warmup_s: float
    overhead_s: float
    wall_s: float

    @classmethod
    def synthetic(cls, value: float, noise: float, batch: int, rng: random.Random, *,
                  windows: int = 4, steps: int = 4) -> Repeat:  # fmt: skip
        """One measurement of a point whose true objective is ``value``: the measurement
        ``value x (1 + noise x z)``, its ``windows`` windows of ``steps`` batches spread by the
        same noise around it (no separate epoch-start share: the model's value holds it)."""
        measured = value * max(0.05, 1.0 + noise * rng.gauss(0.0, 1.0))
        images = batch * steps
        rates = [measured * max(0.05, 1.0 + noise * rng.gauss(0.0, 1.0)) for _ in range(windows)]
        spans = [(images, images / r, 0.0) for r in rates]
        warmup = 2 * batch / measured
        return cls(status=OK, reason=None, objective=measured,
                   window_cv=coefficient_of_variation(rates), windows=spans, warmup_s=warmup,
                   overhead_s=1.0, wall_s=1.0 + warmup + sum(w[1] for w in spans))  # fmt: skip

    @classmethod
    def from_record(cls, m: dict[str, Any]) -> Repeat:
        return cls(
            status=m["status"],
            reason=m.get("reason"),
            objective=float(m["objective"] or 0.0),
            window_cv=float(m.get("window_cv") or 0.0),
            windows=[tuple(w) for w in m.get("windows") or []],
            warmup_s=float(m.get("warmup_s") or 0.0),
            overhead_s=float(m.get("overhead_s") or 0.0),
            wall_s=float(m.get("wall_s") or 0.0),
        )

    def mix(self, other: Repeat, t: float) -> Repeat:
        """``(1 - t) * self + t * other`` (both ok, same windows)."""

        def lerp(a: float, b: float) -> float:
            return (1 - t) * a + t * b

        windows = [
            (a[0], lerp(a[1], b[1]), lerp(a[2], b[2]))
            for a, b in zip(self.windows, other.windows, strict=True)
        ]
        return replace(
            self,
            objective=lerp(self.objective, other.objective),
            window_cv=lerp(self.window_cv, other.window_cv),
            windows=windows,
            warmup_s=lerp(self.warmup_s, other.warmup_s),
            overhead_s=lerp(self.overhead_s, other.overhead_s),
            wall_s=lerp(self.wall_s, other.wall_s),
        )


@dataclass
class Table:
    """Repeats by configuration (pin_memory off), the grid's axes, the over-cap batches."""

    repeats: dict[LoaderConfig, list[Repeat]]
    workers: list[int]
    prefetch: list[int]
    over_cap: dict[int, list[Repeat]] = field(default_factory=dict)  # batch -> repeats
    pinned: dict[LoaderConfig, list[Repeat]] = field(default_factory=dict)  # the pin subset
    meta: dict[str, Any] = field(default_factory=dict)
    truth: dict[LoaderConfig, tuple[float, float]] = field(default_factory=dict)  # model points
    _cache: dict[LoaderConfig, list[Repeat]] = field(default_factory=dict)

    @classmethod
    def from_data(cls, data: dict[str, Any]) -> Table:
        points = data["points"]
        by_point: dict[int, list[Repeat]] = {}
        for m in data["measurements"]:
            by_point.setdefault(m["point"], []).append(Repeat.from_record(m))
        repeats, pinned, over_cap, truth = {}, {}, {}, {}
        for i, p in enumerate(points):
            config = LoaderConfig.from_dict(p["config"])
            got = by_point.get(i, [])
            if "truth" in p:
                truth[config] = (float(p["truth"]), float(p.get("noise") or 0.0))
                rng = random.Random(zlib.crc32(config.label().encode()))
                got = got or [Repeat.synthetic(*truth[config], config.batch_size, rng)
                              for _ in range(3)]  # fmt: skip
            elif p["group"] == "cap" and not got:  # a modelled batch over the cap
                got = [Repeat("infeasible", "vram_cap", 0.0, 0.0, [], 0.0, 1.0, 1.5)]
            elif "infeasible" in p and not got:  # a modelled point that fails (shm_full)
                got = [Repeat("infeasible", p["infeasible"], 0.0, 0.0, [], 0.0, 1.0, 3.0)]
            if p["group"] == "grid":
                repeats[config] = got
            elif p["group"] == "pin":
                pinned[config] = got
            else:
                over_cap.setdefault(config.batch_size, []).extend(got)
        meta = dict(data.get("meta", {}))
        meta["measurements"] = len(data["measurements"])
        meta["loads"] = [m["load1_after"] for m in data["measurements"] if "load1_after" in m]
        workers = sorted({c.num_workers for c in repeats})
        prefetch = sorted({c.prefetch_factor for c in repeats if c.prefetch_factor})
        return cls(repeats, workers, prefetch, over_cap, pinned, meta, truth)

    @property
    def batches(self) -> list[int]:
        return sorted({c.batch_size for c in self.repeats})

    @property
    def dataset_len(self) -> int:
        """Images in the measured dataset (the full epoch the objective projects to)."""
        from loadersearch.workload import DEFAULT_DATASET_IMAGES

        return int(self.meta.get("dataset_len") or DEFAULT_DATASET_IMAGES)

    def cap_batch(self) -> int | None:
        """The smallest batch over the VRAM cap."""
        return min(self.over_cap) if self.over_cap else None

    @property
    def pin_measured(self) -> bool:
        """Whether pinned configurations are points of the grid (a GPU host's table)."""
        return any(c.pin_memory for c in self.repeats)

    def of(self, config: LoaderConfig) -> list[Repeat]:
        """The repeats of ``config`` (measured, read from its unpinned twin, or interpolated)."""
        if not self.pin_measured:
            config = replace(config, pin_memory=False)
        if config not in self._cache:
            self._cache[config] = self._build(config)
        return self._cache[config]

    def _build(self, config: LoaderConfig) -> list[Repeat]:
        if config in self.repeats:
            return self.repeats[config]
        cap = self.cap_batch()
        if cap is not None and config.batch_size >= cap:
            return self.over_cap[cap]
        limit = self.meta.get("shm_images")  # a model's /dev/shm, in images (zoo.py)
        inflight = config.num_workers * (config.prefetch_factor or 0) * config.batch_size
        if limit is not None and inflight > limit:  # between the grid's points too
            return [Repeat("infeasible", "shm_full", 0.0, 0.0, [], 0.0, 1.0, 3.0)]
        if config.num_workers not in self.workers:
            return self._between(config, "num_workers", self.workers)
        if config.prefetch_factor not in self.prefetch:
            return self._between(config, "prefetch_factor", self.prefetch)
        raise KeyError(f"{config.label()} is outside the table")

    def _between(self, config: LoaderConfig, knob: str, axis: list[int]) -> list[Repeat]:
        value = getattr(config, knob)
        k = bisect.bisect_left(axis, value)
        if k == 0 or k == len(axis):
            raise KeyError(f"{config.label()}: {knob}={value} is outside the table's axis")
        lo, hi = axis[k - 1], axis[k]
        t = (value - lo) / (hi - lo)
        low = self.of(_with(config, knob, lo))
        high = self.of(_with(config, knob, hi))
        out = []
        for a, b in zip(low, high):  # noqa: B905 - as many as both have
            if a.status == OK and b.status == OK:
                out.append(a.mix(b, t))
            elif (a.status == OK) != (b.status == OK):  # the feasible side (shm_full beside)
                out.append(a if a.status == OK else b)
            else:
                out.append(a if t < 0.5 else b)
        return out

    def true_value(self, config: LoaderConfig) -> float:
        """The model's truth (interpolated like the repeats between the axis' points), else
        the mean objective of the repeats; 0 if any was not ok (not a safe answer)."""
        reps = self.of(config)
        if not reps or any(r.status != OK for r in reps):
            return 0.0
        if self.truth:
            return self.model_point(config)[0]
        return statistics.mean(r.objective for r in reps)

    def model_point(self, config: LoaderConfig) -> tuple[float, float]:
        """``(truth, noise)`` of ``config``: the model's, interpolated linearly between the
        axis' neighbours; a measured table's mean and CV of the repeats."""
        if not self.pin_measured:
            config = replace(config, pin_memory=False)
        if config in self.truth:
            return self.truth[config]
        if any(r.status != OK for r in self.of(config)):
            return 0.0, 0.0  # infeasible
        if not self.truth:
            ok = [r.objective for r in self.of(config) if r.status == OK]
            return statistics.mean(ok), coefficient_of_variation(ok)
        for knob, axis in (("num_workers", self.workers), ("prefetch_factor", self.prefetch)):
            value = getattr(config, knob)
            if value not in axis:
                k = bisect.bisect_left(axis, value)
                lo, hi = axis[k - 1], axis[k]
                t = (value - lo) / (hi - lo)
                a = self.model_point(_with(config, knob, lo))
                b = self.model_point(_with(config, knob, hi))
                if not a[0] or not b[0]:  # one side infeasible: the other's
                    return a if a[0] else b
                return (1 - t) * a[0] + t * b[0], (1 - t) * a[1] + t * b[1]
        raise KeyError(f"{config.label()} is outside the table")

    def optimum(self) -> tuple[LoaderConfig, float]:
        best = max(self.repeats, key=self.true_value)
        return best, self.true_value(best)

    def draw(self, config: LoaderConfig, rng: random.Random) -> Repeat:
        return rng.choice(self.of(config))

    def fresh(self, config: LoaderConfig, rng: random.Random) -> Repeat:
        """A new measurement of ``config`` from its truth and noise (an infeasible point: its
        stored outcome)."""
        reps = self.of(config)
        if not reps or any(r.status != OK for r in reps):
            return reps[0]
        value, noise = self.model_point(config)
        return Repeat.synthetic(value, noise, config.batch_size, rng)


def _with(config: LoaderConfig, knob: str, value: int) -> LoaderConfig:
    if knob == "num_workers" and value == 0:
        return LoaderConfig(0, config.batch_size, config.pin_memory)
    if knob == "num_workers" and config.num_workers == 0:
        raise KeyError("interpolating from 0 workers needs prefetch and persistence")
    return replace(config, **{knob: value})


def as_result(
    config: LoaderConfig,
    repeat: Repeat,
    *,
    dataset_len: int,
    on_window: Any | None = None,
    on_ready: Any | None = None,
) -> MeasureResult:
    """The :class:`MeasureResult` that measuring ``config`` gave in ``repeat``, with
    ``on_ready`` and then ``on_window`` window by window called as the real runner calls them
    (``on_window`` returning False prunes: the windows so far are kept and the time is what
    they took)."""
    result = MeasureResult(config=config, status=repeat.status, workload="emulated",
                           emulated=True, device="table")  # fmt: skip
    result.reason = repeat.reason
    result.overhead_s = repeat.overhead_s
    result.warmup_s = repeat.warmup_s
    result.dataset_images = full_epoch_images(dataset_len, config.batch_size)
    if repeat.status == OK and on_ready is not None:
        on_ready(result)
    if repeat.status != OK:
        result.message = f"{repeat.reason} (from the table)"
        result.wall_s = repeat.wall_s
        return result
    n_per_epoch = max(1, len(repeat.windows) // 2)
    elapsed = repeat.overhead_s + repeat.warmup_s
    for index, (images, seconds, start_s) in enumerate(repeat.windows):
        window = Window(
            index=index, epoch=index // n_per_epoch, images=images, seconds=seconds,
            wait_s=0.0, compute_s=seconds, h2d_s=0.0, start_s=start_s,
        )  # fmt: skip
        result.windows.append(window)
        elapsed += seconds
        if on_window is not None and on_window(window) is False:
            result.status = "pruned"
            result.message = f"pruned after window {index}"
            result.wall_s = elapsed
            return result
    result.objective = repeat.objective
    result.steady_rate = repeat.objective
    result.window_cv = repeat.window_cv
    result.wall_s = repeat.wall_s
    return result
