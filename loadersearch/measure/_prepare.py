"""What every command does before its first measurement, once: :func:`prepare`.

``bench``, ``run``, ``worker``, ``confirm``, ``diagnose``, :func:`loadersearch.tune` and
:func:`loadersearch.bench` all call it, so that a configuration is measured the same way
whichever asked: the device decided here from this machine's fingerprint
(:mod:`loadersearch.workload._device`, never guessed by the measuring process), no more ranks
than GPUs, the whole dataset checked (generated first when it is the built-in one), what
/dev/shm holds against what the configuration needs there, and the image caches built before
any measurement's time limit starts. Nothing here imports torch; nothing is printed: the
caller says what :class:`Prepared` holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch.workload import check_gpus, resolved_workload, uses_cuda

if TYPE_CHECKING:
    from loadersearch._hardware import Hardware
    from loadersearch._loader_config import LoaderConfig
    from loadersearch.measure._shm import ShmCheck
    from loadersearch.workload import WorkloadSpec


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare` found and did."""

    workload: WorkloadSpec  # as the measuring process must run it: its device resolved
    device_type: str  # "cuda" or "cpu": where the batches go, by this machine's fingerprint
    data: Any  # the dataset check (DatasetCheck), or PipelineData for a pipeline of your own
    shm: ShmCheck | None  # /dev/shm against the configuration's need; None without one
    caches: tuple[Any, ...]  # the caches made ready (CacheInfo), one per mode that has one

    def shm_lines(self) -> list[str]:
        """/dev/shm's size and free space, what the configuration needs there, and a warning
        when that is more than the free space."""
        if self.shm is None:
            return []
        warning = self.shm.warning()
        return [self.shm.line(), *([warning] if warning else [])]


def prepare(
    workload: WorkloadSpec,
    config: LoaderConfig | None,
    hardware: Hardware,
    *,
    largest: bool = False,
    caches: Sequence[str] | None = None,
) -> Prepared:
    """Check and ready everything ``workload`` needs before ``config`` is measured on this
    machine (``hardware``: its fingerprint); bad input raises a
    :class:`~loadersearch.errors.LoaderSearchError` naming the fix, before anything runs.

    ``config`` is the configuration whose /dev/shm need is checked (None: no check);
    ``largest``: it is a search space's upper bounds. ``caches``: the cache modes to build
    or check (a search of the cache names several; default: the one ``config`` names, else
    the workload's; ``()``: none, each measurement readies its own)."""
    from loadersearch.measure._shm import check_shm
    from loadersearch.workload import check_data, prepare_cache, workload_for

    check_gpus(workload, hardware)
    resolved = resolved_workload(workload, hardware)
    device_type = "cuda" if uses_cuda(workload, hardware) else "cpu"
    # The whole dataset, before anything is measured: a bad one is refused in one line.
    data = check_data(resolved)
    shm = None
    if config is not None:
        shm = check_shm(
            resolved,
            device_type,
            num_workers=config.num_workers,
            batch_size=config.batch_size,
            prefetch_factor=config.prefetch_factor,
            largest=largest,
        )
    if caches is None:  # the workload's, or the one the configuration names
        caches = ((workload_for(resolved, config) if config else resolved).cache,)
    # A memmap cache is built here, never inside a measurement's time limit.
    ready = []
    for mode in caches:
        info = prepare_cache(_with_cache(resolved, mode))
        if info is not None:
            ready.append(info)
    return Prepared(resolved, device_type, data, shm, tuple(ready))


def _with_cache(workload: WorkloadSpec, mode: str) -> WorkloadSpec:
    import dataclasses

    return workload if workload.cache == mode else dataclasses.replace(workload, cache=mode)
