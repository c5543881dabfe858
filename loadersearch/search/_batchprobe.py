"""The largest batch size that fits the VRAM cap, found before sampling (grow, then bisect, as
Lightning's ``BatchSizeFinder(mode="binsearch")``), with real short measurements.

Probing walks the space's own grid of batch sizes (step or powers of two), so the bound it
returns is a value the sampler can draw. The result is stored in the study: resumes and other
machines reuse it instead of probing again.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch._hostlock import measurement_lock
from loadersearch._loader_config import LoaderConfig
from loadersearch.errors import StudyError
from loadersearch.measure import INFEASIBLE, OK, VRAM_CAP, MeasurePlan
from loadersearch.search._objective import MeasureFn, unusable_input
from loadersearch.search._progress import Progress
from loadersearch.search._space import SearchSpace
from loadersearch.search._space_text import SpaceError
from loadersearch.workload import WorkloadSpec, uses_cuda

if TYPE_CHECKING:
    import optuna

    from loadersearch._hardware import Hardware
    from loadersearch.search._settings import StudySettings

_logger = logging.getLogger(__name__)

# Six steps: a warm-up of two (activations, gradients, the optimizer state, cuDNN autotuning and
# its workspaces; after the first, the child measures the memory outside the allocator and
# tightens the cap), then four under the cap as the trials will run, so that a batch which
# only fits before the allocator's cache fragments is not taken as fitting.
# Not sized to the configuration (in_flight_rounds=0): the probe asks about memory, not rate.
PROBE_PLAN = MeasurePlan(
    epochs=1,
    steps=4,
    windows_per_epoch=1,
    warmup_epochs=1,
    warmup_steps=2,
    timeout_s=180,
    in_flight_rounds=0,
)
# A batch fits when its allocated peak stays under this share of what the allocator may use
# (the cap less the memory outside it): at the limit the allocator flushes its cache and
# retries, and cuDNN falls back to slower algorithms, so the trial would run slower there.
HEADROOM = 0.9


def allocator_limit(cap_bytes: int | None, overhead_bytes: int | None) -> int | None:
    """What the caching allocator may use under ``cap_bytes``: the cap less the memory outside
    the allocator (CUDA context, kernels) when it was measured."""
    if cap_bytes is None:
        return None
    return cap_bytes - (overhead_bytes or 0)


def has_headroom(peak_allocated: int | None, limit: int | None, share: float = HEADROOM) -> bool:
    """Whether the allocated peak leaves the headroom (True when either is unknown: the emulated
    device allocates exactly what it says, and without a cap there is nothing to keep)."""
    if peak_allocated is None or limit is None:
        return True
    return peak_allocated <= share * limit


@dataclass
class ProbeResult:
    max_batch: int | None  # largest batch that fits; None when probing did not apply
    probes: list[dict[str, Any]] = field(default_factory=list)  # in the order measured
    skipped: str | None = None  # why there was no probe (e.g. "no VRAM cap on a CPU")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProbeResult:
        return cls(**{k: data.get(k) for k in ("max_batch", "probes", "skipped")})

    def describe(self) -> str:
        if self.skipped:
            return f"batch-size probe skipped: {self.skipped}"
        tried = ", ".join(f"{p['batch']} {'fits' if p['fits'] else 'over'}" for p in self.probes)
        return f"largest batch under the cap: {self.max_batch} (probed {tried})"


def probe_max_batch(
    workload: WorkloadSpec,
    choices: list[int],
    *,
    measure_fn: MeasureFn,
    progress: Progress | None = None,
    plan: MeasurePlan = PROBE_PLAN,
) -> ProbeResult:
    """Largest of ``choices`` (ascending) that measures without going over the cap.

    Grows by doubling from the smallest choice until a batch does not fit or the largest
    choice fits, then bisects between the last fit and the first miss. Raises
    :class:`StudyError` when not even the smallest batch fits."""
    progress = progress or Progress()
    result = ProbeResult(max_batch=None)
    tried: dict[int, bool] = {}

    def fits(index: int) -> bool:
        batch = choices[index]
        if batch not in tried:
            tried[batch] = _measure_fits(workload, batch, plan, measure_fn, progress, result)
        return tried[batch]

    if not fits(0):
        last = result.probes[-1]
        raise StudyError(
            f"not even batch_size={choices[0]} fits: {last['message'] or last['reason']}. "
            "Raise the VRAM cap (--vram-cap) or lower batch_size (--space batch_size=LOW:HIGH)."
        )
    good, bad = 0, None
    while bad is None and good < len(choices) - 1:  # grow: double the batch size
        target = 2 * choices[good]
        nxt = next((i for i, b in enumerate(choices) if b >= target), len(choices) - 1)
        if fits(nxt):
            good = nxt
        else:
            bad = nxt
    while bad is not None and bad - good > 1:  # bisect between the last fit and first miss
        mid = (good + bad) // 2
        if fits(mid):
            good = mid
        else:
            bad = mid
    result.max_batch = choices[good]
    return result


def _measure_fits(
    workload: WorkloadSpec,
    batch: int,
    plan: MeasurePlan,
    measure_fn: MeasureFn,
    progress: Progress,
    result: ProbeResult,
) -> bool:
    config = LoaderConfig(num_workers=0, batch_size=batch)
    with measurement_lock():
        measured = measure_fn(workload, config, plan)
    unusable = unusable_input(measured, workload)
    if unusable is not None:
        raise unusable
    if measured.status not in (OK, INFEASIBLE):
        raise StudyError(
            f"the batch-size probe at batch_size={batch} ended with {measured.status} "
            f"({measured.reason}): {measured.message}"
        )
    peak = measured.peak_vram_bytes
    limit = allocator_limit(workload.vram_cap, measured.cuda_overhead_bytes)
    headroom = has_headroom(measured.peak_allocated_bytes, limit)
    ok = measured.status == OK and headroom
    message = measured.message or ""
    if measured.status == OK and not headroom:
        message = (
            f"allocated peak {measured.peak_allocated_bytes / 2**20:,.0f} MiB is above "
            f"{HEADROOM:.0%} of the {limit / 2**20:,.0f} MiB the allocator may use under the "
            "cap: too close to the limit to run at full speed"
        )
    result.probes.append(
        {
            "batch": batch,
            "fits": ok,
            "status": measured.status,
            "reason": measured.reason,
            "message": message[:200],
            "peak_vram_bytes": peak,
            "peak_allocated_bytes": measured.peak_allocated_bytes,
            "cuda_overhead_bytes": measured.cuda_overhead_bytes,
        }
    )
    if measured.status == INFEASIBLE and measured.reason != VRAM_CAP:
        _logger.warning(
            "probe at batch %d infeasible for another reason: %s", batch, measured.reason
        )
    detail = f"peak {peak / 2**20:.0f} MiB" if peak else (measured.reason or measured.status)
    if measured.status == OK and not headroom:
        detail += f", over {HEADROOM:.0%} of the cap"
    progress.probe_step(batch, ok, detail)
    return ok


def ensure_probe(
    study: optuna.Study,
    settings: StudySettings,
    hardware: Hardware,
    *,
    measure_fn: MeasureFn,
    progress: Progress,
    store: bool = True,
    probed: ProbeResult | None = None,
) -> ProbeResult:
    """The stored probe result, or ``probed`` (measured before the study was created), or a
    new probe (stored when ``store``: a worker changes nothing in the study) when the study
    has none."""
    stored = study.user_attrs.get("probe")
    if stored:
        return ProbeResult.from_dict(stored)
    probe = probed or new_probe(settings, hardware, measure_fn=measure_fn, progress=progress)
    if store:
        study.set_user_attr("probe", probe.to_dict())
    return probe


def new_probe(
    settings: StudySettings, hardware: Hardware, *, measure_fn: MeasureFn, progress: Progress
) -> ProbeResult:
    """Probe the largest batch under the VRAM cap, or say why there is no probe."""
    w = settings.workload
    if not settings.probe:
        probe = ProbeResult(max_batch=None, skipped="disabled")
    elif "batch_size" in settings.space.fixed():
        probe = ProbeResult(max_batch=None, skipped="batch_size is fixed")
    elif uses_cuda(w, hardware) or (w.emulated and w.vram_cap):
        # On one device: the batch size is per rank and the cap per device.
        probe = probe_max_batch(
            dataclasses.replace(w, gpus=1),
            settings.space.batch_choices(),
            measure_fn=measure_fn,
            progress=progress,
        )
    elif w.emulated:
        probe = ProbeResult(max_batch=None, skipped="no VRAM cap set for the emulated device")
    else:
        probe = ProbeResult(max_batch=None, skipped="no VRAM cap applies on a CPU")
    return probe


def bounded_space(space: SearchSpace, probe: ProbeResult) -> SearchSpace:
    if probe.max_batch is None:
        return space
    try:
        return space.with_batch_bound(probe.max_batch)
    except SpaceError as e:
        raise StudyError(str(e)) from e
