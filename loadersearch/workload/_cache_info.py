"""What a dataset cache is and where caches live: :class:`CacheInfo` (where a cache is, its
size, what building it took), :class:`CacheError`, and :func:`cache_dir` (``--cache-dir``,
``$LOADERSEARCH_CACHE_DIR``, ``$XDG_CACHE_HOME/loadersearch`` or ``~/.cache/loadersearch``).
Both kinds of cache (:mod:`loadersearch.workload._memmap_cache`,
:mod:`loadersearch.workload._ram_cache`) describe themselves with it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from loadersearch._units import fmt_bytes
from loadersearch.errors import DatasetError

CACHE_ENV = "LOADERSEARCH_CACHE_DIR"


class CacheError(DatasetError):
    """A cache cannot be built or used here; the message names the reason and the fix (a
    DatasetError: every configuration would meet it, so a study stops on it)."""


@dataclass(frozen=True)
class CacheInfo:
    """What a cache costs: where it is, its size, and what building it took."""

    mode: str  # ram | memmap
    images: int
    bytes: int  # memmap: the file's size on disk; ram: the encoded bytes held in memory
    img_size: int | None = None  # memmap: the longer side of the stored images
    path: str | None = None  # memmap: the cache file
    built: bool = False  # memmap: built by this call (False: an up-to-date file reused)
    build_s: float | None = None  # memmap: seconds the build took (when it was built)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        size = fmt_bytes(self.bytes)
        if self.mode == "ram":
            return f"RAM cache: {self.images} images' encoded bytes, {size} of shared memory"
        if self.built:
            how = f"built in {self.build_s:.1f} s"
        else:
            how = f"reused (its build took {self.build_s:.1f} s)" if self.build_s else "reused"
        return (
            f"memmap cache: {self.images} images pre-decoded at <= {self.img_size} px, "
            f"{size} on disk, {how}: {self.path}"
        )


def cache_dir(explicit: str | os.PathLike | None = None) -> Path:
    """Where caches live: ``explicit``, else ``$LOADERSEARCH_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/loadersearch``, else ``~/.cache/loadersearch``."""
    if explicit:
        return Path(explicit).expanduser()
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "loadersearch"
