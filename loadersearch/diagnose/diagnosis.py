"""The differential diagnosis of one configuration: why the accelerator idles, and what helps.

Four measurements of the same configuration, each by :func:`loadersearch.measure.measure` (a
fresh child process, warm-up excluded, the same windows), differ in one thing each:

1. **ceiling**: the step fed one real batch kept on the device, no loading at all: the most
   the model (or the emulated accelerator) can take;
2. **warm**: the full pipeline with every byte of the dataset in the page cache (read in and
   checked with ``mincore`` first): against (1), the *prep stall* (decode, augmentation,
   collate, the workers' hand-off);
3. **cold**: the full pipeline with the dataset's pages evicted before each measured epoch
   (``posix_fadvise(POSIX_FADV_DONTNEED)``, checked with ``mincore``): against (2), the
   *fetch stall* (storage);
4. **scaling**: the loader alone (the ``loader`` workload) with 1..N workers: how decode and
   augmentation scale with cores and where they stop.

Per image, ``1/cold = 1/ceiling + prep + fetch``: the shares of the cold step time the three
take decide the verdict. Every remedy the verdict suggests is then measured the same way (warm
for a prep stall, cold for a fetch stall) and its gain printed; none is guessed.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadersearch.config import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.diagnose.timeline import Sampler, Timeline
from loadersearch.errors import LoaderSearchError
from loadersearch.measure import MeasureResult, measure, pagecache

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


def _bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} B"  # pragma: no cover


class _Runner:
    """Runs the measurements of one diagnosis, each with a timeline."""

    def __init__(
        self,
        spec: WorkloadSpec,
        plan: MeasurePlan,
        files: list[str],
        on_phase: Callable[[str], None],
        interval: float,
    ) -> None:
        self.spec = spec
        self.plan = plan
        self.files = files
        self.on_phase = on_phase
        self.interval = interval

    def run(
        self,
        name: str,
        what: str,
        config: LoaderConfig,
        *,
        spec: WorkloadSpec | None = None,
        cache: str = "warm",  # warm | cold | as-is
        resident: bool = False,
        timeline: bool = True,
    ) -> Measurement:
        self.on_phase(f"{name}: {what}")
        spec = spec or self.spec
        extra = dict(self.plan.extra)
        if resident:
            extra["resident"] = True
        residency_before = None
        if cache == "cold":
            extra["cold_cache"] = True
        elif cache == "warm" and self.files:
            pagecache.warm(self.files)
            residency_before = pagecache.residency(self.files).fraction
        plan = dataclasses.replace(self.plan, extra=extra)
        sampler = Sampler(self.interval).start() if timeline else None
        try:
            result: MeasureResult = measure(spec, config, plan)
        finally:
            if sampler is not None:
                sampler.stop()
        tl = sampler.timeline(result.steps) if sampler is not None else None
        m = Measurement(
            name=name,
            what=what,
            config=config,
            status=result.status,
            message=result.message,
            rate=result.objective if result.ok else 0.0,
            steady_rate=result.steady_rate if result.ok else 0.0,
            wait_fraction=result.wait_fraction,
            window_cv=result.window_cv,
            device=result.device,
            windows=len(result.windows),
            outside_share=result.outside_share,
            busy_host=result.busy_host,
            timeline=tl,
            page_cache=result.page_cache,
            residency_before=residency_before,
        )
        self.img_size = result.img_size
        self.dataset_images = result.dataset_images
        if not m.ok:
            logger.warning("%s: %s (%s)", name, result.status, result.message)
        return m


def _loader_spec(spec: WorkloadSpec, img_size: int | None) -> WorkloadSpec:
    """``spec``'s data pipeline alone (the loader workload), at the size the step used."""
    pipeline = spec.pipeline
    if pipeline is not None:
        pipeline = dataclasses.replace(
            pipeline,
            model=None,
            loss=None,
            step=None,
            model_kwargs={},
            loss_kwargs={},
            step_kwargs={},
        )
    return dataclasses.replace(
        spec,
        kind="loader",
        pipeline=pipeline,
        img_size=img_size if pipeline is None else None,
    )


def diagnose(
    spec: WorkloadSpec,
    config: LoaderConfig,
    plan: MeasurePlan,
    *,
    max_workers: int | None = None,
    target_rate: float | None = None,
    remedies: bool = True,
    extra_remedies: list[tuple[str, WorkloadSpec]] | None = None,
    on_phase: Callable[[str], None] = lambda phase: None,
    interval: float = 0.1,
) -> Diagnosis:
    """Diagnose ``config`` on ``spec``: ceiling, prep stall, fetch stall, scaling, a verdict,
    measured remedies and what-ifs (see the module's docstring).

    ``max_workers`` bounds the scaling curve (default: twice the CPUs, at most 32);
    ``target_rate`` (images/s) asks how many cores a given accelerator rate needs;
    ``extra_remedies`` are further ``(name, workload)`` pairs to measure as remedies (a cache
    mode). ``on_phase(text)`` is told what is measured next. Measuring failures do not raise:
    they are in the measurements and the verdict says what could not be told."""
    from loadersearch.measure.forkserver import serving

    with serving():  # one fork server for every measurement: a cheaper start for each
        return _diagnose(spec, config, plan, max_workers, target_rate, remedies,
                         extra_remedies, on_phase, interval)  # fmt: skip


def _diagnose(
    spec: WorkloadSpec,
    config: LoaderConfig,
    plan: MeasurePlan,
    max_workers: int | None,
    target_rate: float | None,
    remedies: bool,
    extra_remedies: list[tuple[str, WorkloadSpec]] | None,
    on_phase: Callable[[str], None],
    interval: float,
) -> Diagnosis:
    t_start = time.monotonic()
    if spec.data is None and spec.pipeline is None:
        from loadersearch.workload.synthetic import default_dataset

        spec = dataclasses.replace(spec, data=default_dataset())
    if config.cache is not None and config.cache != spec.cache:  # a winner found with a cache
        spec = dataclasses.replace(spec, cache=config.cache)
    # An emulated storage latency stands for reads from storage: the bytes in memory (the
    # ceiling, the warm pipeline, the scaling curve) do not pay it; the cold pipeline does.
    cold_spec = spec
    spec = dataclasses.replace(spec, emulated_io_ms=0.0)
    cpus = os.cpu_count() or 1
    if max_workers is None:
        max_workers = min(2 * cpus, 32)
    files = pagecache.dataset_files(spec.data) if spec.data and os.path.isdir(spec.data) else []
    runner = _Runner(spec, plan, files, on_phase, interval)
    load_before = os.getloadavg()[0]

    ceiling = runner.run(
        "ceiling", "the step fed one batch kept on the device (no loading)", config,
        resident=True,
    )  # fmt: skip
    img_size = getattr(runner, "img_size", spec.img_size)
    if spec.pipeline is None and img_size is not None:
        spec = dataclasses.replace(spec, img_size=img_size)  # the same size for every step
        cold_spec = dataclasses.replace(cold_spec, img_size=img_size)
        runner.spec = spec
    warm = runner.run("warm", "the full pipeline, the dataset in the page cache", config)
    default = LoaderConfig(batch_size=config.batch_size, pin_memory=config.pin_memory)
    before = None
    if config != default:  # the picture of what the configuration changed
        before = runner.run(
            "default", "PyTorch's loader defaults (0 workers) at the same batch, warm", default
        )
    cold = None
    if files:
        cold = runner.run(
            "cold", "the full pipeline, the dataset's pages evicted before each epoch", config,
            spec=cold_spec, cache="cold",
        )  # fmt: skip
    d = Diagnosis(
        workload=spec.to_dict(),
        config=config,
        plan=plan.to_dict(),
        img_size=img_size,
        device=warm.device,
        cpu_count=cpus,
        load_before=load_before,
        load_after=0.0,
        dataset_files=len(files),
        dataset_bytes=sum(os.path.getsize(f) for f in files),
        dataset_images=sum(f.lower().endswith(IMAGE_EXTENSIONS) for f in files),
        measurements={m.name: m for m in (before, ceiling, warm, cold) if m is not None},
    )
    if cold is not None:
        d.evicted = _check_eviction(d, cold)
    if cold_spec.emulated_io_ms:
        d.notes.append(
            f"{cold_spec.storage_label()} applies to the cold measurement only: the ceiling, "
            "the warm pipeline and the loader's scaling read the bytes from memory"
        )

    # 4. scaling: the loader alone, 1..N workers (and the configuration's own count)
    loader_spec = _loader_spec(spec, img_size)
    counts = sorted({*scaling_ladder(max_workers), config.num_workers})
    for w in counts:
        cfg = _with_workers(config, w)
        m = runner.run(
            f"loader-w{w}", f"the loader alone with {_workers(w)}", cfg, spec=loader_spec,
            timeline=False,
        )  # fmt: skip
        d.measurements[m.name] = m
        d.scaling.append({"workers": w, "rate": m.rate, "status": m.status})
    d.knee_workers = knee([(p["workers"], p["rate"]) for p in d.scaling if p["workers"] > 0])

    _verdict(d)
    if remedies and d.verdict in (PREP, FETCH):
        rspec = cold_spec if d.verdict == FETCH else spec
        _remedies(d, runner, rspec, config, extra_remedies or [])
    _whatif(d, target_rate)
    _conclude(d)
    d.load_after = os.getloadavg()[0]
    busy = [m for m in d.measurements.values() if m.busy_host]
    if busy:
        d.notes.append(
            "measured while other processes used the CPUs: "
            + ", ".join(f"{m.name} {_pct(m.outside_share or 0.0)}" for m in busy)
            + " of them: those figures may be low, and differences between them partly the "
            "machine's; diagnose again on a quieter machine to be sure"
        )
    elif max(d.load_before, d.load_after) > cpus:
        d.notes.append(
            f"the machine was loaded by other work (load average {d.load_before:.1f} before, "
            f"{d.load_after:.1f} after, {cpus} CPUs): the figures are noisier than on an idle "
            "machine; the timelines' CPU lines include that work"
        )
    d.seconds = time.monotonic() - t_start
    return d


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


def _check_eviction(d: Diagnosis, cold: Measurement) -> bool | None:
    info = cold.page_cache or {}
    if not cold.ok:
        return None
    if not info.get("checked"):
        d.notes.append(
            "could not check the eviction (mincore did not answer for the dataset's files): "
            "the cold measurement may have read from memory; the fetch stall is not trusted"
        )
        return False
    left = info.get("resident_after_evict") or 0.0
    if left > EVICTED_BELOW:
        d.notes.append(
            f"could not evict the dataset from the page cache: {_pct(left)} of it stayed in "
            "memory after posix_fadvise(DONTNEED) (a file system that ignores it, or pages in "
            "use): the fetch stall was not measured"
        )
        return False
    d.details.append(
        f"cold cache: {info.get('files', 0):,} files ({_bytes(info.get('bytes', 0))}) evicted "
        f"before each of {info.get('evictions', 0)} measured epochs; mincore found "
        f"{_pct(left)} still resident"
    )
    return True


def _verdict(d: Diagnosis) -> None:
    c, w = d.rate("ceiling"), d.rate("warm")
    cold = d.rate("cold") if d.evicted else None
    if not c or not w:
        failed = [m for m in d.measurements.values() if m.name in ("ceiling", "warm") and not m.ok]
        d.verdict = "unknown"
        d.summary = "unknown: " + "; ".join(f"{m.name} {m.status}: {m.message}" for m in failed)
        return
    d.shares = stall_shares(c, w, cold)
    m = d.measurements
    d.noise = {"prep": max(STALL_THRESHOLD, noise(m["ceiling"], m["warm"]))}
    if cold:
        d.noise["fetch"] = max(STALL_THRESHOLD, noise(m["warm"], m["cold"]))
    # The loop's own data-wait, measured inside each run, must agree: a rate difference
    # between two runs with hardly any waiting is the machine's load changing between them.
    waited = {"prep": m["warm"].wait_fraction}
    if cold:  # the extra wait per image of the cold run, as a share of its time per image
        extra = m["cold"].wait_fraction / cold - m["warm"].wait_fraction / w
        waited["fetch"] = extra * cold
    unsupported = set()
    for k in d.noise:
        if d.shares[k] >= d.noise[k] and waited[k] < STALL_THRESHOLD:
            d.notes.append(
                f"the rates say a {k} stall of {_pct(d.shares[k])}, but the training loop "
                f"waited for data {_pct(max(0.0, waited[k]))} "
                + ("of the warm run" if k == "prep" else "more per image cold than warm")
                + ": the difference is the machine's load changing between the measurements, "
                "not the loader; not called a bottleneck"
            )
            unsupported.add(k)
    real = {k: d.shares[k] for k in d.noise if d.shares[k] >= d.noise[k] and k not in unsupported}
    for k in d.noise:
        if STALL_THRESHOLD <= d.shares[k] < d.noise[k]:
            d.notes.append(
                f"a {k} stall of {_pct(d.shares[k])} is within the noise of these measurements "
                f"(differences under {_pct(d.noise[k])} are not told apart from it, window CVs "
                "as in the table): not called a bottleneck; measure longer (--epochs, --steps) "
                "or on a quieter machine"
            )
    d.verdict = (
        COMPUTE if not real else (FETCH if real.get("fetch", 0) > real.get("prep", 0) else PREP)
    )


def noise(a: Measurement, b: Measurement) -> float:
    """Two standard errors of the relative difference of two measured rates (each rate's
    relative error: its window CV over the square root of its windows)."""
    se = [m.window_cv / math.sqrt(m.windows) if m.windows else m.window_cv for m in (a, b)]
    return 2.0 * math.sqrt(se[0] ** 2 + se[1] ** 2)


def _remedies(
    d: Diagnosis,
    runner: _Runner,
    spec: WorkloadSpec,
    config: LoaderConfig,
    extra: list[tuple[str, WorkloadSpec]],
) -> None:
    condition = "cold" if d.verdict == FETCH else "warm"
    base = d.measurements[condition]
    if not base.ok:
        return
    candidates: list[tuple[str, LoaderConfig, WorkloadSpec]] = []
    more = d.knee_workers if d.verdict == PREP else max(d.knee_workers or 0, config.num_workers)
    if d.verdict == FETCH:
        # storage latency hides behind more requests in flight, not behind more cores
        more = max(2 * config.num_workers, (d.knee_workers or 1) * 2, 2)
    if more and more > config.num_workers:
        candidates.append((_workers(more), _with_workers(config, more), spec))
    if config.num_workers > 0:
        pf = max(4, 2 * (config.prefetch_factor or 2))
        candidates.append(
            (f"prefetch_factor {pf}", dataclasses.replace(config, prefetch_factor=pf), spec)
        )
    if spec.mosaic:
        candidates.append(("no mosaic", config, dataclasses.replace(spec, mosaic=False)))
    caches = []
    if spec.pipeline is None and spec.cache == "none" and config.cache in (None, "none"):
        # the memmap cache skips decode and down-scaling (a prep remedy) and reads local pixels;
        # both caches take the reads off the storage (a fetch remedy)
        caches = ["memmap"] if d.verdict == PREP else ["ram", "memmap"]
    for mode in caches:  # an emulated storage latency is paid once, when the cache fills
        candidates.append((f"{mode} cache", config, dataclasses.replace(spec, cache=mode)))
    for name, remedy_spec in extra:
        candidates.append((name, config, remedy_spec))
    for name, cfg, rspec in candidates:
        cost = ""
        if rspec.cache != "none":
            runner.on_phase(f"remedy: {name}: preparing the cache")
            cost = _prepare_cache(d, rspec)
            if cost is None:
                continue
        m = runner.run(
            f"remedy: {name}", f"{name} ({cfg.label()}), {condition} cache", cfg, spec=rspec,
            cache=condition,
        )  # fmt: skip
        d.measurements[m.name] = m
        if m.ok:
            d.remedies.append(Remedy(name, m.name, m.rate, base.rate, condition, cost))
    d.remedies.sort(key=lambda r: -r.gain)


def _prepare_cache(d: Diagnosis, spec: WorkloadSpec) -> str | None:
    """Build (or reuse) the cache of ``spec`` outside any measurement; its cost in words, or
    None (with a note) when it cannot be had here."""
    from loadersearch.workload import prepare_cache

    try:
        info = prepare_cache(spec)
    except LoaderSearchError as e:  # no room in RAM or on disk: say so, measure the rest
        d.notes.append(f"the {spec.cache} cache was not measured: {e}")
        return None
    if info is None:
        return ""
    size = _bytes(info.bytes)
    if info.mode == "ram":
        return f"{size} of shared memory"
    built = f"built once in {info.build_s:.1f} s" if info.build_s else "built once"
    return f"{size} on disk, {built}"


def _whatif(d: Diagnosis, target_rate: float | None) -> None:
    one = next((p["rate"] for p in d.scaling if p["workers"] == 1 and p["rate"] > 0), None)
    w = d.whatif
    w["per_core_rate"] = one
    c = d.rate("ceiling")
    if one:
        if c:
            w["cores_for_ceiling"] = math.ceil(c / one)
        if target_rate:
            w["target_rate"] = target_rate
            w["cores_for_target"] = math.ceil(target_rate / one)
    w["ram_cache_bytes"] = d.dataset_bytes  # the encoded files, as they are on disk
    if d.img_size and d.dataset_images:
        w["memmap_bytes"] = d.dataset_images * d.img_size * d.img_size * 3
    try:
        import psutil

        w["available_ram_bytes"] = psutil.virtual_memory().available
    except ImportError:  # pragma: no cover - psutil is a dependency
        pass


def _helps(d: Diagnosis, r: Remedy) -> bool:
    """A gain above :data:`GAIN_THRESHOLD` and above the noise of the two measurements."""
    base = d.measurements.get(r.condition)
    m = d.measurements.get(r.measurement)
    floor = noise(base, m) if base is not None and m is not None else 0.0
    return r.gain > max(GAIN_THRESHOLD, floor)


def _conclude(d: Diagnosis) -> None:
    """The verdict in words, each figure measured above."""
    c, w, cold = d.rate("ceiling"), d.rate("warm"), d.rate("cold")
    loader = next(
        (p["rate"] for p in d.scaling if p["workers"] == d.config.num_workers), None
    )  # the loader alone at the configuration's worker count
    warm = d.measurements.get("warm")

    def said(r: Remedy) -> str:
        return f"{r.name} ({_signed(r.gain)}{'; ' + r.cost if r.cost else ''})"

    ceiling = d.rate("ceiling")
    over = [r.name for r in d.remedies if ceiling and r.rate > ceiling * (1 + STALL_THRESHOLD)]
    over += [
        f"the {name} pipeline"
        for name in ("warm", "cold")
        if ceiling and (d.rate(name) or 0) > ceiling * (1 + STALL_THRESHOLD)
    ]
    if over:
        d.notes.append(
            f"{', '.join(over)} measured faster than the ceiling "
            f"({ceiling:,.0f} img/s): the machine's load changed between the measurements; "
            "compare the figures with care, or diagnose again on a quieter machine"
        )
    helps = [r for r in d.remedies if _helps(d, r)]
    rest = [r for r in d.remedies if not _helps(d, r)]
    options = (
        f"options, each measured here: {', '.join(said(r) for r in helps)}"
        if helps
        else "no remedy measured here helped"
        if any(name.startswith("remedy: ") for name in d.measurements)
        else "remedies not measured (--no-remedies)"
    )
    if rest:
        options += f" (no clear gain: {', '.join(said(r) for r in rest)})"
    if d.verdict == COMPUTE:
        fed = f"the loader delivers {loader:,.0f} img/s, " if loader else ""
        d.summary = (
            f"compute-bound: {fed}the model takes {c:,.0f} img/s (the pipeline ran at "
            f"{w:,.0f}); no loader setting can help"
        )
    elif d.verdict == PREP:
        scale = f"workers scale to {d.knee_workers} cores; " if d.knee_workers else ""
        if d.knee_workers == 1:
            scale = "workers do not scale past 1 core; "
        d.summary = (
            f"prep-bound: {_pct(warm.wait_fraction)} of step time waiting for data "
            f"({w:,.0f} img/s against a ceiling of {c:,.0f}); {scale}{options}"
        )
    elif d.verdict == FETCH:
        d.summary = (
            f"fetch-bound: reading the dataset from storage costs {_pct(d.shares['fetch'])} of "
            f"step time ({cold:,.0f} img/s with a cold page cache, {w:,.0f} with the dataset in "
            f"memory, ceiling {c:,.0f}); {options}"
        )
    if d.shares:
        d.details.insert(
            0,
            "per image, of the "
            + ("cold" if d.evicted else "warm")
            + f" step time: compute {_pct(d.shares['compute'])}, prep (decode, augmentation, "
            f"hand-off) {_pct(d.shares['prep'])}, fetch (storage) {_pct(d.shares['fetch'])}",
        )
    if d.knee_workers and d.scaling:
        best = max(p["rate"] for p in d.scaling)
        curve = ", ".join(f"w{p['workers']} {p['rate']:,.0f}" for p in d.scaling)
        d.details.append(
            f"the loader alone: {curve} img/s; it stops scaling at {_workers(d.knee_workers)} "
            f"({best:,.0f} img/s at best) on {d.cpu_count} CPUs"
        )
    if d.verdict == FETCH and d.dataset_bytes:
        avail = d.whatif.get("available_ram_bytes")
        if avail and d.dataset_bytes < 0.5 * avail:
            d.details.append(
                f"the dataset ({_bytes(d.dataset_bytes)}) fits in the free RAM "
                f"({_bytes(avail)}): after the first epoch the page cache holds it and the "
                f"warm figure ({w:,.0f} img/s) applies, unless other data pushes it out"
            )
    wi = d.whatif
    if wi.get("cores_for_ceiling"):
        d.details.append(
            f"what-if: at {wi['per_core_rate']:,.0f} img/s per worker (one core each), feeding "
            f"the ceiling of {c:,.0f} img/s takes {_cores(wi['cores_for_ceiling'])}"
            + (
                f", and {wi['target_rate']:,.0f} img/s takes {wi['cores_for_target']}"
                if wi.get("cores_for_target")
                else ""
            )
            + " (plus the training process's own)"
        )
    if wi.get("ram_cache_bytes"):
        memmap = wi.get("memmap_bytes")
        d.details.append(
            f"what-if: a RAM cache of the encoded dataset needs {_bytes(wi['ram_cache_bytes'])}"
            + (
                f"; pre-decoded {d.img_size}x{d.img_size} uint8 images (a memmap cache) "
                f"{_bytes(memmap)}"
                if memmap
                else ""
            )
            + (
                f"; {_bytes(wi['available_ram_bytes'])} of RAM is free"
                if wi.get("available_ram_bytes")
                else ""
            )
        )
