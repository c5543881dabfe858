"""What a diagnosis finds (:mod:`loadersearch.diagnose._diagnosis`): its measurements, remedies
and verdict as data, the thresholds that decide the verdict, and the helpers that turn figures
into the words it prints.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.diagnose._timeline import Timeline

logger = logging.getLogger(__name__)

# A stall that takes less of the step time than this is within the noise of a short
# measurement on a shared machine (window CVs of 1-10% here): it is not called a bottleneck.
STALL_THRESHOLD = 0.10
# The scaling curve "stops" at the fewest workers within this share of the best rate.
KNEE_SHARE = 0.90
# A remedy must gain at least this much (and more than the noise) to be offered as an option.
GAIN_THRESHOLD = 0.05
# An eviction that left more than this share of the dataset resident did not work.
EVICTED_BELOW = 0.05
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")

COMPUTE, PREP, FETCH = "compute-bound", "prep-bound", "fetch-bound"


@dataclass
class Measurement:
    """One measurement of the diagnosis and its timeline."""

    name: str  # ceiling | warm | cold | scaling-wN | remedy name
    what: str  # a sentence: what was measured
    config: LoaderConfig
    status: str
    message: str
    rate: float  # the objective: projected images/s of a full epoch (0 when it failed)
    steady_rate: float
    wait_fraction: float
    window_cv: float
    device: str
    windows: int = 0  # measured windows behind the rate (its noise: window_cv / sqrt(windows))
    # CPUs' share used by processes outside the measurement while it ran (measure.hostload),
    # and whether that flagged it as measured on a busy machine
    outside_share: float | None = None
    busy_host: bool = False
    timeline: Timeline | None = None
    page_cache: dict[str, Any] | None = None  # cold: what mincore said after each eviction
    residency_before: float | None = None  # warm: the dataset's share in memory before

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["config"] = self.config.to_dict()
        data["timeline"] = self.timeline.to_dict() if self.timeline else None
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        data = dict(data)
        data["config"] = LoaderConfig.from_dict(data["config"])
        if data.get("timeline") is not None:
            data["timeline"] = Timeline.from_dict(data["timeline"])
        return cls(**data)


@dataclass
class Remedy:
    """A remedy, measured: its rate against the diagnosed configuration's in the same
    condition (warm or cold)."""

    name: str  # e.g. "4 workers", "prefetch_factor 8", "no mosaic"
    measurement: str  # the Measurement's name
    rate: float
    base_rate: float
    condition: str  # warm | cold
    cost: str = ""  # what it costs besides: a cache's build time and size

    @property
    def gain(self) -> float:
        return self.rate / self.base_rate - 1.0 if self.base_rate > 0 else 0.0


@dataclass
class Diagnosis:
    """What :func:`diagnose` found; plain data (JSON) so that it can be stored and redrawn."""

    workload: dict[str, Any]
    config: LoaderConfig
    plan: dict[str, Any]
    img_size: int | None
    device: str
    cpu_count: int
    load_before: float
    load_after: float
    dataset_files: int
    dataset_bytes: int
    dataset_images: int
    measurements: dict[str, Measurement] = field(default_factory=dict)
    scaling: list[dict[str, Any]] = field(default_factory=list)  # workers, rate, status
    knee_workers: int | None = None  # where the loader stops scaling
    shares: dict[str, float] = field(default_factory=dict)  # compute, prep, fetch of cold time
    # The smallest prep / fetch share told apart from the noise of the two rates behind it
    noise: dict[str, float] = field(default_factory=dict)
    evicted: bool | None = None  # None: no cold measurement (a user pipeline, a failure)
    verdict: str = "unknown"  # compute-bound | prep-bound | fetch-bound | unknown
    summary: str = ""  # the verdict in one sentence with its figures
    details: list[str] = field(default_factory=list)  # more sentences, each with its figures
    remedies: list[Remedy] = field(default_factory=list)
    whatif: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the whole diagnosis

    def rate(self, name: str) -> float | None:
        m = self.measurements.get(name)
        return m.rate if m is not None and m.ok else None

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["config"] = self.config.to_dict()
        data["measurements"] = {k: m.to_dict() for k, m in self.measurements.items()}
        data["remedies"] = [{**dataclasses.asdict(r), "gain": r.gain} for r in self.remedies]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnosis:
        data = dict(data)
        data["config"] = LoaderConfig.from_dict(data["config"])
        data["measurements"] = {
            k: Measurement.from_dict(m) for k, m in data.get("measurements", {}).items()
        }
        data["remedies"] = [
            Remedy(**{k: v for k, v in r.items() if k != "gain"}) for r in data.get("remedies", [])
        ]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def scaling_ladder(max_workers: int) -> list[int]:
    """1, 2, 3, 4, 6, 8, 12, 16, 24, 32, ... up to ``max_workers`` (which is always in)."""
    if max_workers < 1:
        raise ValueError(f"max_workers must be at least 1 but got {max_workers}.")
    ladder, n = [], 1
    while n < max_workers:
        ladder.append(n)
        n = n + 1 if n < 4 else (n * 3 // 2 if n in (4, 8, 16, 32, 64) else n * 4 // 3)
    return [*ladder, max_workers]


def knee(points: list[tuple[int, float]]) -> int | None:
    """The fewest workers whose rate is within :data:`KNEE_SHARE` of the best."""
    good = [(w, r) for w, r in points if r > 0]
    if not good:
        return None
    best = max(r for _, r in good)
    return min(w for w, r in good if r >= KNEE_SHARE * best)


def stall_shares(ceiling: float, warm: float, cold: float | None) -> dict[str, float]:
    """Shares of the (cold, else warm) time per image taken by compute, prep and fetch.

    Per image ``1/cold = 1/ceiling + prep + fetch``; a pipeline measured faster than its
    ceiling (noise) has no prep stall, a cold run faster than the warm one no fetch stall."""
    t_c = 1.0 / ceiling
    t_p = max(1.0 / warm, t_c)
    t_f = max(1.0 / cold, t_p) if cold else t_p
    return {"compute": t_c / t_f, "prep": (t_p - t_c) / t_f, "fetch": (t_f - t_p) / t_f}


def _cores(n: int) -> str:
    return f"{n} core" if n == 1 else f"{n} cores"


def _workers(n: int) -> str:
    return f"{n} worker" if n == 1 else f"{n} workers"


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _signed(x: float) -> str:
    return f"{100 * x:+.0f}%"


def _with_workers(config: LoaderConfig, workers: int) -> LoaderConfig:
    """``config`` with ``workers`` workers (its prefetch and persistence when it had workers,
    else PyTorch's defaults for them)."""
    if workers == 0:
        return dataclasses.replace(
            config, num_workers=0, prefetch_factor=None, persistent_workers=False,
            start_method=None,
        )  # fmt: skip
    if config.num_workers == 0:
        return dataclasses.replace(config, num_workers=workers, prefetch_factor=None)
    return dataclasses.replace(config, num_workers=workers)
