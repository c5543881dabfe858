"""The article's remedies for a slow data side, as real options: ``ram`` and ``memmap`` caches.

* ``ram`` (:mod:`loadersearch.workload._ram_cache`): every image's encoded bytes in one
  shared-memory buffer, read once when the dataset is opened.
* ``memmap`` (:mod:`loadersearch.workload._memmap_cache`): every image decoded and resized
  once, stored as uint8 pixels in one memory-mapped file, built once per dataset and size.

This module is the one entry for both: :func:`ensure_cache` before measuring (build or check),
:func:`open_cache` in the measuring process, :func:`cache_key` for what selects the images.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from loadersearch.workload._cache_info import CacheInfo
from loadersearch.workload._memmap_cache import MemmapImages, ensure_memmap
from loadersearch.workload._ram_cache import RamImages, check_ram


def cache_key(fmt: str, split: str | None, skip_bad_samples: bool) -> str:
    """What selects a dataset's images besides its directory (one cache file each)."""
    return f"{fmt}:{split or ''}:{int(bool(skip_bad_samples))}"


def ensure_cache(
    mode: str,
    root: str,
    paths: Sequence[str],
    img_size: int,
    directory: str | os.PathLike | None = None,
    key: str = "",
    skip_bad_samples: bool = False,
    io_ms: float = 0.0,
) -> CacheInfo | None:
    """Before measuring (no torch): build the memmap cache when it is missing or stale, or
    check that a RAM cache fits in memory. None for ``none``. ``io_ms``: an emulated storage
    latency (``--emulated-io-ms``) paid per file a build reads."""
    if mode == "memmap":
        return ensure_memmap(
            root,
            paths,
            img_size,
            directory=directory,
            key=key,
            skip_bad_samples=skip_bad_samples,
            io_ms=io_ms,
        )
    if mode == "ram":
        return check_ram(root, paths)
    return None


def open_cache(
    mode: str,
    root: str,
    paths: Sequence[str],
    img_size: int,
    directory: str | os.PathLike | None = None,
    key: str = "",
    skip_bad_samples: bool = False,
    io_ms: float = 0.0,
) -> tuple[MemmapImages | RamImages, CacheInfo]:
    """In the measuring process: the images' source for ``mode`` (``ram`` or ``memmap``) and
    what it costs (``io_ms``: as for :func:`ensure_cache`; a RAM cache pays it per file as it
    fills)."""
    info = ensure_cache(mode, root, paths, img_size, directory, key, skip_bad_samples, io_ms)
    if info is None:
        raise ValueError(f"no cache to open for mode {mode!r}")
    if mode == "memmap":
        return MemmapImages(info.path), info
    images = RamImages(root, paths, io_ms)
    return images, dataclasses.replace(info, bytes=images.nbytes)
