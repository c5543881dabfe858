"""/dev/shm: its size and free space, what a configuration's batches in flight need there, and
what to do when it runs out.

DataLoader workers hand every batch to the training process through shared memory: each
worker's tensors are written to files in /dev/shm, and up to ``prefetch_factor`` batches per
worker wait there to be consumed. So a configuration holds about ``batch bytes x num_workers x
prefetch_factor`` in /dev/shm at once (0 with ``num_workers=0``: the main process loads
batches itself). Docker gives a container 64 MiB of /dev/shm by default, less than one batch
of 32 images at 416 px times a few workers, and torch then fails with "unable to allocate
shared memory(shm)", "No space left on device" or a worker killed by SIGBUS: this
configuration cannot run here, which says nothing about the others (reason ``shm_full``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch._units import fmt_bytes

if TYPE_CHECKING:
    from loadersearch.workload import WorkloadSpec

SHM_DIR = "/dev/shm"
DEFAULT_PREFETCH = 2  # PyTorch's prefetch_factor when workers run and none is given
# Boxes of the built-in detection dataset travel with the images: (n, 6) float32 targets and
# the per-image layout; a few hundred bytes per image at most (VOC: ~2.4 boxes an image).
_TARGET_BYTES_PER_IMAGE = 512

ADVICE = (
    "give the container more shared memory (docker run --shm-size=8g, or --ipc=host to share "
    "the host's), or use fewer workers, a smaller prefetch_factor or smaller batches "
    "(num_workers=0 uses none)"
)


@dataclass(frozen=True)
class ShmSpace:
    """Size and free space of /dev/shm, in bytes."""

    size_bytes: int
    free_bytes: int

    def describe(self) -> str:
        return f"/dev/shm {fmt_bytes(self.size_bytes)}, {fmt_bytes(self.free_bytes)} free"


def shm_space(path: str = SHM_DIR) -> ShmSpace | None:
    """/dev/shm's size and free space now, or None where there is none (not Linux)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return ShmSpace(st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize)


def shm_used_bytes(path: str = SHM_DIR) -> int | None:
    """Bytes in use in /dev/shm (by every process of the machine), or None."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def batch_bytes(spec: WorkloadSpec, batch_size: int, img_size: int | None) -> int | None:
    """Bytes of one batch as a worker sends it, for the built-in detection workload: uint8
    images (3 x S x S each) and their boxes. None for a pipeline of your own (its batches are
    known only once measured: see the trials' ``shm_peak_bytes``) or an unknown image size."""
    if spec.pipeline is not None or img_size is None:
        return None
    return batch_size * (3 * img_size * img_size + _TARGET_BYTES_PER_IMAGE)


def inflight_bytes(one_batch: int, num_workers: int, prefetch_factor: int | None) -> int:
    """/dev/shm a configuration holds at once: ``one_batch x num_workers x prefetch_factor``
    (0 without workers)."""
    if num_workers <= 0:
        return 0
    return one_batch * num_workers * (prefetch_factor or DEFAULT_PREFETCH)


# The shares of the host's memory a configuration's batches in flight may take before the
# search starts it at a shallower prefetch_factor (inflight_budget): half of /dev/shm (the
# rest holds the batches the training process took, the pin-memory thread's and other
# processes' files; beyond it torch fails) and a tenth of the RAM (/dev/shm is RAM too, and
# the dataset's copies in the workers, the model and the page cache need the rest: a queue
# that pushes them out swaps). A deep queue gains a few percent where reads vary; a
# shallower one costs nothing where it fits.
SHM_SHARE = 0.5
RAM_SHARE = 0.1


def inflight_budget(shm_bytes: int | None, ram_bytes: int | None, image_bytes: int | None,
                    ranks: int = 1) -> float | None:  # fmt: skip
    """The images one rank's DataLoader may hold in flight (``workers x prefetch x batch``)
    on a host with ``shm_bytes`` of /dev/shm and ``ram_bytes`` of RAM (the hardware probe's),
    for images of ``image_bytes`` (:func:`batch_bytes` of one) shared by ``ranks`` ranks:
    :data:`SHM_SHARE` of /dev/shm and :data:`RAM_SHARE` of the RAM, the smaller. None where
    the image's size or both memories are unknown."""
    shares = [share * size for share, size in ((SHM_SHARE, shm_bytes), (RAM_SHARE, ram_bytes))
              if size]  # fmt: skip
    if not image_bytes or not shares:
        return None
    return min(shares) / image_bytes / max(1, ranks)


def host_inflight_budget(hardware: Any, spec: WorkloadSpec, device_type: str) -> float | None:
    """:func:`inflight_budget` for ``spec``'s images on ``hardware`` (a
    :class:`~loadersearch._hardware.Hardware`: its /dev/shm, and its RAM or the cgroup's
    memory limit where that is lower), per rank of ``spec``; None for a pipeline of your own
    (its batches' size is unknown before a measurement)."""
    from loadersearch.workload import resolve_img_size

    if spec.pipeline is not None:
        return None
    img_size = resolve_img_size(spec.kind, device_type, spec.img_size)
    return inflight_budget(hardware.shm_bytes, hardware.memory_bytes,
                           batch_bytes(spec, 1, img_size), spec.gpus)  # fmt: skip


def shm_warning(space: ShmSpace | None, need: int | None, what: str) -> str | None:
    """A warning when ``need`` bytes (``what``: e.g. "the largest configuration, 8 workers x
    batch 64 x prefetch 8") exceed /dev/shm's free space, else None."""
    if space is None or need is None or need <= space.free_bytes:
        return None
    return (
        f"{what} needs about {fmt_bytes(need)} of /dev/shm for its batches in flight "
        f"(batch bytes x workers x prefetch_factor), more than the {fmt_bytes(space.free_bytes)} "
        f"free of {fmt_bytes(space.size_bytes)}: such configurations will fail here and be "
        f"recorded as infeasible (shm_full). To measure them, {ADVICE}."
    )


def shm_full_message(detail: str) -> str:
    """The message of a measurement stopped by a full /dev/shm: torch's ``detail``, the
    space now, and what to do."""
    space = shm_space()
    where = f" ({fmt_bytes(space.size_bytes)} in all)" if space is not None else ""
    return f"/dev/shm ran out{where}: {detail}. To run this configuration, {ADVICE}"


@dataclass(frozen=True)
class ShmCheck:
    """/dev/shm against what a configuration (or a search space's largest one) needs there,
    said before anything is measured."""

    space: ShmSpace | None
    need_bytes: int | None  # None: unknown before a measurement (your own pipeline)
    what: str  # e.g. "the largest configuration (8 workers x batch 64 x prefetch 8)"

    def line(self) -> str:
        """One line for the start of ``bench`` and ``run``."""
        if self.space is None:
            return "/dev/shm: none here (DataLoader workers use the file system instead)"
        if self.need_bytes is None:
            need = f"{self.what}: batch size unknown until measured (see shm_peak_bytes)"
        elif self.need_bytes == 0:
            need = f"{self.what} needs none"
        else:
            need = f"{self.what} needs about {fmt_bytes(self.need_bytes)}"
        return f"{self.space.describe()}; {need}"

    def warning(self) -> str | None:
        return shm_warning(self.space, self.need_bytes, self.what)


def check_shm(
    spec: WorkloadSpec,
    device_type: str,
    *,
    num_workers: int,
    batch_size: int,
    prefetch_factor: int | None,
    largest: bool = False,
) -> ShmCheck:
    """What ``num_workers`` x ``batch_size`` x ``prefetch_factor`` (per rank, times
    ``spec.gpus`` ranks) holds in /dev/shm, against its free space now; ``device_type`` ("cuda"
    or "cpu") decides the default image size. ``largest``: these are a search space's upper
    bounds."""
    from loadersearch.workload import resolve_img_size

    img_size = None if spec.pipeline else resolve_img_size(spec.kind, device_type, spec.img_size)
    which = "the largest configuration" if largest else "this configuration"
    if num_workers == 0:  # the main process loads its batches: nothing passes through /dev/shm
        return ShmCheck(shm_space(), 0, f"{which} (no workers)")
    prefetch = prefetch_factor or DEFAULT_PREFETCH
    one = batch_bytes(spec, batch_size, img_size)
    need = None if one is None else inflight_bytes(one, num_workers, prefetch) * spec.gpus
    shape = f"{num_workers} workers x batch {batch_size} x prefetch {prefetch}"
    if spec.gpus > 1:
        shape += f" x {spec.gpus} ranks"
    return ShmCheck(shm_space(), need, f"{which} ({shape})")
