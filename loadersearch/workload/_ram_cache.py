"""The ``ram`` cache: every image's encoded bytes (the JPEG file as it is on disk) in one
shared-memory buffer, read once when the dataset is opened (:class:`RamImages`), after
:func:`check_ram` has said it fits. Decoding and augmentation still run per sample and per
epoch; only the fetch from storage is gone (a RAM disk, without root).
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import time
from collections.abc import Sequence

import numpy as np

from loadersearch._units import fmt_bytes
from loadersearch.workload._cache_info import CacheError, CacheInfo

RAM_SHARE = 0.5  # a RAM cache may take at most this share of the memory available now
SHM_DIR = "/dev/shm"  # where a RAM cache's shared memory lives (torch's file descriptors)


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable``), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def ram_bytes(root: str, paths: Sequence[str]) -> int:
    """The encoded bytes a RAM cache of these images holds (their files' sizes)."""
    total = 0
    for rel in paths:
        with contextlib.suppress(OSError):
            total += os.stat(os.path.join(root, rel)).st_size
    return total


def check_ram(root: str, paths: Sequence[str]) -> CacheInfo:
    """What a RAM cache of these images would hold, or :class:`CacheError` when it would
    take more than :data:`RAM_SHARE` of the memory available now, or more than the free
    shared memory (:data:`SHM_DIR`)."""
    need = ram_bytes(root, paths)
    free = available_memory()
    if free is not None and need > RAM_SHARE * free:
        raise CacheError(
            f"a RAM cache of this dataset needs {fmt_bytes(need)} and only "
            f"{fmt_bytes(free)} of memory is available (at most {RAM_SHARE:.0%} of it is "
            "used for a cache): use --cache memmap (on disk, paged in as needed) or none."
        )
    try:
        shm = shutil.disk_usage(SHM_DIR).free
    except OSError:
        shm = None
    if shm is not None and need > shm:
        raise CacheError(
            f"a RAM cache of this dataset needs {fmt_bytes(need)} of shared memory and "
            f"{SHM_DIR} has {fmt_bytes(shm)} free (a container's default is 64 MiB: "
            "docker run --shm-size 8g, or Kubernetes' emptyDir medium Memory): use --cache "
            "memmap, or give the container more shared memory."
        )
    return CacheInfo(mode="ram", images=len(paths), bytes=need)


class RamImages:
    """Every image's encoded bytes in one shared-memory buffer (a torch uint8 tensor moved to
    shared memory, so DataLoader workers see it whatever their start method)."""

    def __init__(self, root: str, paths: Sequence[str], io_ms: float = 0.0) -> None:
        import torch

        sizes = []
        blobs = []
        for rel in paths:
            full = os.path.join(root, rel)
            if io_ms > 0:  # emulated slow storage: each file read once, at this latency
                time.sleep(io_ms / 1000.0)
            try:
                with open(full, "rb") as f:
                    blob = f.read()
            except OSError:
                blob = b""  # decoding it names the file and the reason, as without a cache
            blobs.append(blob)
            sizes.append(len(blob))
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        buffer = torch.empty(int(self.offsets[-1]), dtype=torch.uint8)
        view = buffer.numpy()
        for i, blob in enumerate(blobs):
            view[self.offsets[i] : self.offsets[i + 1]] = np.frombuffer(blob, np.uint8)
        self.buffer = buffer.share_memory_()
        self.nbytes = int(self.offsets[-1])

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def file(self, i: int) -> io.BytesIO | None:
        """Image ``i``'s file as it is on disk, None when it could not be read."""
        a, b = int(self.offsets[i]), int(self.offsets[i + 1])
        if a == b:
            return None
        return io.BytesIO(self.buffer.numpy()[a:b].tobytes())
