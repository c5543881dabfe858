"""Every ``torch.cuda`` call of the measurement, with its arguments computed by pure functions.

torch's CUDA functions resolve their ``device`` argument differently: most accept a
``torch.device("cuda")`` without an index (``_get_device_index(device, optional=True)``), but
``set_per_process_memory_fraction`` does not (``optional=False``: ``ValueError: Expected a
torch.device with a specified index``). So this module passes every one of them the device
*index* (an ``int``), and :data:`CALLS` lists the calls it makes so that a test can resolve each
argument with torch's own resolver, read from the installed torch, without a GPU.

The VRAM cap means "this trial may use N GiB of the card". The allocator's fraction only limits
the caching allocator; the CUDA context, the kernels loaded lazily on first use and library
handles live outside it (~0.5-1 GiB on recent GPUs). :class:`CudaMemory` therefore sets the
fraction to the cap at first (the allocator alone can never pass it), measures the overhead
after the first warm-up step (NVML's per-process figure minus ``memory_reserved()``), and sets
the fraction to ``(cap - overhead) / total`` for the rest of the run, releasing the cache so
that the next steps must fit the tighter limit. The peaks are those of the measured epochs
(reset when measuring starts); allocator retries or OOMs there mean the trial ran near its
limit, slower than it would with headroom, and are flagged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_logger = logging.getLogger(__name__)

MIB = 2**20
GIB = 2**30

# The torch.cuda functions this module calls with a device argument, and the argument each
# gets: an int index. tests/measure/test_cuda.py resolves it with torch's _get_device_index,
# using the ``optional`` flag that the installed torch's source of each function passes.
CALLS = (
    "get_device_properties",
    "set_per_process_memory_fraction",
    "memory_reserved",
    "memory_stats",
    "reset_peak_memory_stats",
    "reset_accumulated_memory_stats",
    "synchronize",
)


class CapTooSmall(Exception):
    """The memory outside the allocator alone reaches the VRAM cap: nothing is left for tensors."""


def device_index(device: Any) -> int:
    """The CUDA device index of ``device`` (an int, ``"cuda:1"`` or a ``torch.device`` with an
    index). An index-less ``cuda`` device is refused: which device it means depends on the
    current device at the time of each call, which is what this module avoids."""
    if isinstance(device, bool):
        raise ValueError(f"not a CUDA device: {device!r}")
    if isinstance(device, int):
        index = device
    else:
        import torch

        dev = torch.device(device)
        if dev.type != "cuda":
            raise ValueError(f"not a CUDA device: {device!r}")
        if dev.index is None:
            raise ValueError(
                f"the CUDA device {device!r} has no index; pass e.g. torch.device('cuda', 0)"
            )
        index = dev.index
    if index < 0:
        raise ValueError(f"a CUDA device index cannot be negative but got {index}")
    return index


def memory_fraction(cap_bytes: int, total_bytes: int, overhead_bytes: int = 0) -> float:
    """The allocator fraction that keeps the whole process under ``cap_bytes``: the cap less
    the memory outside the allocator, as a share of the card. A Python ``float`` in [0, 1]
    (``set_per_process_memory_fraction`` refuses anything else). Raises ValueError when the
    overhead alone reaches the cap."""
    if total_bytes <= 0:
        raise ValueError(f"the device's total memory must be positive but got {total_bytes}")
    budget = cap_bytes - max(0, overhead_bytes)
    if budget <= 0:
        raise ValueError(
            f"the VRAM cap ({cap_bytes / MIB:,.0f} MiB) leaves nothing for tensors: the CUDA "
            f"context and library workspaces alone use {overhead_bytes / MIB:,.0f} MiB"
        )
    return float(min(1.0, budget / total_bytes))


def overhead_bytes(process_used: int | None, reserved: int) -> int | None:
    """Device memory of this process outside the caching allocator (context, kernels, library
    handles): NVML's per-process figure minus what the allocator reserved. None when NVML
    cannot tell (no driver library, a container's PID namespace, a MIG slice)."""
    if process_used is None:
        return None
    return max(0, int(process_used) - int(reserved))


def cap_notes(cap_bytes: int, total_bytes: int, overhead: int | None) -> list[str]:
    """What a user should know about how the cap was applied."""
    notes = []
    if overhead is None:
        notes.append(
            "NVML cannot report this process's device memory: the VRAM cap limits the "
            "allocator only; the CUDA context and library workspaces (~0.5-1 GiB) come on top"
        )
    if cap_bytes >= total_bytes:
        extra = f" ({overhead / MIB:,.0f} MiB of it outside the allocator)" if overhead else ""
        notes.append(
            f"the VRAM cap ({cap_bytes / GIB:.2f} GiB) is at or above the card's memory "
            f"({total_bytes / GIB:.2f} GiB): it does not limit this trial{extra}"
        )
    return notes


def pressure_note(stats: dict[str, Any], cap_bytes: int | None) -> str | None:
    """A note when the allocator had to free its cache and retry (``num_alloc_retries``) or
    hit an out-of-memory it recovered from (``num_ooms``, e.g. cuDNN falling back to an
    algorithm with a smaller workspace) during the measured epochs: the trial ran at its memory
    limit and slower than it would with headroom."""
    retries = int(stats.get("num_alloc_retries", 0) or 0)
    ooms = int(stats.get("num_ooms", 0) or 0)
    if not retries and not ooms:
        return None
    limit = f"the VRAM cap ({cap_bytes / GIB:.2f} GiB)" if cap_bytes else "the card's memory"
    return (
        f"near {limit}: the allocator retried {retries} allocation(s) after freeing its cache "
        f"and recovered from {ooms} out-of-memory error(s) while measuring; this configuration "
        "runs slower than it would with headroom"
    )


@dataclass
class CapState:
    """How the cap was applied (recorded in the result)."""

    cap_bytes: int | None = None
    total_bytes: int | None = None
    fraction: float | None = None  # the allocator fraction in force while measuring
    overhead_bytes: int | None = None  # device memory outside the allocator (measured)
    notes: list[str] = field(default_factory=list)


class CudaMemory:
    """The VRAM cap and the memory peaks of one measuring process on one CUDA device.

    ``process_used()`` returns NVML's per-process device memory (or None). ``cuda`` is the
    ``torch.cuda`` module; tests without a GPU pass a recording stand-in and check every
    recorded argument with torch's own resolver."""

    def __init__(
        self,
        device: Any,
        cap_bytes: int | None,
        process_used: Callable[[], int | None] = lambda: None,
        cuda: Any = None,
    ) -> None:
        if cuda is None:
            import torch

            cuda = torch.cuda
        self.cuda = cuda
        self.index = device_index(device)
        self.process_used = process_used
        self.state = CapState(cap_bytes=cap_bytes)
        self._settled = False

    def apply_cap(self) -> None:
        """Limit the allocator to the whole cap (before anything runs); :meth:`settle` then
        takes the overhead off."""
        cap = self.state.cap_bytes
        if cap is None:
            return
        total = int(self.cuda.get_device_properties(self.index).total_memory)
        self.state.total_bytes = total
        self.state.fraction = memory_fraction(cap, total)
        self.cuda.set_per_process_memory_fraction(self.state.fraction, self.index)

    def settle(self) -> None:
        """After the first warm-up step (context created, kernels loaded, cuDNN autotuned):
        measure the memory outside the allocator and tighten the fraction so the process as a
        whole stays under the cap. Once per process."""
        if self._settled:
            return
        self._settled = True
        self.cuda.synchronize(self.index)
        reserved = int(self.cuda.memory_reserved(self.index))
        overhead = overhead_bytes(self.process_used(), reserved)
        self.state.overhead_bytes = overhead
        cap, total = self.state.cap_bytes, self.state.total_bytes
        if cap is None or total is None:
            return
        self.state.notes.extend(cap_notes(cap, total, overhead))
        if overhead:
            try:
                self.state.fraction = memory_fraction(cap, total, overhead)
            except ValueError as e:
                raise CapTooSmall(str(e)) from None
            self.cuda.set_per_process_memory_fraction(self.state.fraction, self.index)
            # Cached blocks beyond the new limit go back to the driver: the next steps must fit.
            self.cuda.empty_cache()
        _logger.debug(
            "VRAM cap %d B: overhead %s B, allocator fraction %s",
            cap,
            overhead,
            self.state.fraction,
        )

    def begin_measured(self) -> None:
        """Peaks, retries and OOMs from here on are the measured epochs' own."""
        self.cuda.synchronize(self.index)
        self.cuda.reset_peak_memory_stats(self.index)
        self.cuda.reset_accumulated_memory_stats(self.index)

    def summary(self) -> dict[str, Any]:
        """Result fields: allocator peaks, retries/OOMs, how the cap was applied, notes."""
        stats = self.cuda.memory_stats(self.index)
        notes = list(self.state.notes)
        pressure = pressure_note(stats, self.state.cap_bytes)
        if pressure:
            notes.append(pressure)
        return {
            "peak_allocated_bytes": _stat(stats, "allocated_bytes.all.peak"),
            "peak_reserved_bytes": _stat(stats, "reserved_bytes.all.peak"),
            "alloc_retries": _stat(stats, "num_alloc_retries"),
            "alloc_ooms": _stat(stats, "num_ooms"),
            "memory_fraction": self.state.fraction,
            "cuda_overhead_bytes": self.state.overhead_bytes,
            "notes": notes,
        }


def _stat(stats: dict[str, Any], key: str) -> int | None:
    value = stats.get(key)
    return None if value is None else int(value)
