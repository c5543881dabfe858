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
import os
import time
from collections.abc import Callable

from loadersearch._cpu_budget import cpu_budget
from loadersearch._loader_config import LoaderConfig
from loadersearch._units import fmt_bytes
from loadersearch.diagnose._findings import (
    EVICTED_BELOW,
    FETCH,
    IMAGE_EXTENSIONS,
    PREP,
    Diagnosis,
    Measurement,
    _pct,
    _with_workers,
    _workers,
    knee,
    scaling_ladder,
)
from loadersearch.diagnose._measuring import Runner
from loadersearch.diagnose._verdict import _conclude, _remedies, _verdict, _whatif
from loadersearch.measure import MeasurePlan, pagecache
from loadersearch.workload import WorkloadSpec

logger = logging.getLogger(__name__)


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

    ``max_workers`` bounds the scaling curve (default: twice the CPUs this process may use,
    its CPU budget, at most 32); ``target_rate`` (images/s) asks how many cores a given
    accelerator rate needs;
    ``extra_remedies`` are further ``(name, workload)`` pairs to measure as remedies (a cache
    mode). ``on_phase(text)`` is told what is measured next. Measuring failures do not raise:
    they are in the measurements and the verdict says what could not be told."""
    from loadersearch.measure import serving

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
    spec, cold_spec = _warm_and_cold(spec, config)
    budget = cpu_budget(1)  # the CPUs this process may use (affinity, cgroup quota)
    cpus = budget.cpus
    if max_workers is None:
        max_workers = budget.worker_bound  # 2 x those CPUs, at most 32, as the search's range
    files = pagecache.dataset_files(spec.data) if spec.data and os.path.isdir(spec.data) else []
    runner = Runner(spec, plan, files, on_phase, interval)
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
    _scaling(d, runner, _loader_spec(spec, img_size), config, max_workers)

    _verdict(d)
    if remedies and d.verdict in (PREP, FETCH):
        rspec = cold_spec if d.verdict == FETCH else spec
        _remedies(d, runner, rspec, config, extra_remedies or [])
    _whatif(d, target_rate)
    _conclude(d)
    d.load_after = os.getloadavg()[0]
    _load_notes(d, cpus)
    d.seconds = time.monotonic() - t_start
    return d


def _warm_and_cold(spec: WorkloadSpec, config: LoaderConfig) -> tuple[WorkloadSpec, WorkloadSpec]:
    """The workload measured from memory, and the one measured cold: with the default dataset
    generated and the cache ``config`` names."""
    if spec.data is None and spec.pipeline is None:
        from loadersearch.workload import default_dataset

        spec = dataclasses.replace(spec, data=default_dataset())
    if config.cache is not None and config.cache != spec.cache:  # a winner found with a cache
        spec = dataclasses.replace(spec, cache=config.cache)
    # An emulated storage latency stands for reads from storage: the bytes in memory (the
    # ceiling, the warm pipeline, the scaling curve) do not pay it; the cold pipeline does.
    return dataclasses.replace(spec, emulated_io_ms=0.0), spec


def _scaling(
    d: Diagnosis,
    runner: Runner,
    loader_spec: WorkloadSpec,
    config: LoaderConfig,
    max_workers: int,
) -> None:
    """The loader alone at 1..``max_workers`` workers (and the configuration's own count):
    ``d.scaling`` and the knee of its curve."""
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


def _load_notes(d: Diagnosis, cpus: int) -> None:
    """A note when other processes used the CPUs while ``d`` measured (its figures may be
    low), else when the load average was above the CPU count (noisier figures)."""
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
        f"cold cache: {info.get('files', 0):,} files ({fmt_bytes(info.get('bytes', 0))}) evicted "
        f"before each of {info.get('evictions', 0)} measured epochs; mincore found "
        f"{_pct(left)} still resident"
    )
    return True
