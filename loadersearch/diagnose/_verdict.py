"""From a diagnosis's measurements to its verdict (compute-, prep- or fetch-bound, or within
the noise), the remedies it measures, the what-ifs and the conclusion in words
(:mod:`loadersearch.diagnose._diagnosis` runs the measurements).
"""

from __future__ import annotations

import dataclasses
import logging
import math
from typing import TYPE_CHECKING

import psutil

from loadersearch._loader_config import LoaderConfig
from loadersearch._units import fmt_bytes
from loadersearch.diagnose._findings import (
    COMPUTE,
    FETCH,
    GAIN_THRESHOLD,
    PREP,
    STALL_THRESHOLD,
    Diagnosis,
    Measurement,
    Remedy,
    _cores,
    _pct,
    _signed,
    _with_workers,
    _workers,
    stall_shares,
)
from loadersearch.errors import LoaderSearchError
from loadersearch.workload import WorkloadSpec

if TYPE_CHECKING:
    from loadersearch.diagnose._measuring import Runner

logger = logging.getLogger(__name__)


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
    base = cold or w  # the shares are of this time per image
    d.noise = {"prep": max(STALL_THRESHOLD, share_noise(m["ceiling"], m["warm"], base))}
    if cold:
        d.noise["fetch"] = max(STALL_THRESHOLD, share_noise(m["warm"], m["cold"], base))
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


def _relative_se(m: Measurement) -> float:
    """A measured rate's relative standard error: its window CV over the root of its windows."""
    return m.window_cv / math.sqrt(m.windows) if m.windows else m.window_cv


def share_noise(faster: Measurement, slower: Measurement, base_rate: float) -> float:
    """Two standard errors of a stall's share, ``(1/slower - 1/faster) * base_rate`` (of the
    time per image at ``base_rate``), from each rate's relative error. A rate far above the
    others (a ceiling of 1,000 img/s beside a pipeline of 70) barely moves the share however
    noisy its short windows are: its error counts in proportion to its time per image."""
    a = _relative_se(faster) * base_rate / faster.rate
    b = _relative_se(slower) * base_rate / slower.rate
    return 2.0 * math.sqrt(a**2 + b**2)


def noise(a: Measurement, b: Measurement) -> float:
    """Two standard errors of the relative difference of two measured rates (each rate's
    relative error: its window CV over the square root of its windows)."""
    return 2.0 * math.sqrt(_relative_se(a) ** 2 + _relative_se(b) ** 2)


def _remedies(
    d: Diagnosis,
    runner: Runner,
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
    size = fmt_bytes(info.bytes)
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
    w["available_ram_bytes"] = psutil.virtual_memory().available


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

    _note_over_ceiling(d)
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
                f"the dataset ({fmt_bytes(d.dataset_bytes)}) fits in the free RAM "
                f"({fmt_bytes(avail)}): after the first epoch the page cache holds it and the "
                f"warm figure ({w:,.0f} img/s) applies, unless other data pushes it out"
            )
    _whatif_details(d, c)


def _note_over_ceiling(d: Diagnosis) -> None:
    """A note when a remedy or a pipeline measured faster than the ceiling: the machine's load
    changed between the measurements."""
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


def _whatif_details(d: Diagnosis, c: float | None) -> None:
    """The what-if lines: the cores that would feed the ceiling ``c`` (and the target rate),
    and what a RAM or memmap cache of the dataset would hold."""
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
            f"what-if: a RAM cache of the encoded dataset needs {fmt_bytes(wi['ram_cache_bytes'])}"
            + (
                f"; pre-decoded {d.img_size}x{d.img_size} uint8 images (a memmap cache) "
                f"{fmt_bytes(memmap)}"
                if memmap
                else ""
            )
            + (
                f"; {fmt_bytes(wi['available_ram_bytes'])} of RAM is free"
                if wi.get("available_ram_bytes")
                else ""
            )
        )
