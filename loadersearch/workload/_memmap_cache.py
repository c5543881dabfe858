"""The ``memmap`` cache: every image decoded once, resized so that its longer side is at most
the network input, and stored as uint8 pixels in one file that is memory-mapped
(:class:`MemmapImages`). This is the article's "offline preprocessing split from online
augmentation": the decode and the down-scaling happen once, the random augmentation still
runs per sample on top of the stored pixels.

A memmap cache is built once per dataset and image size (:func:`ensure_memmap`), in the cache
directory (:func:`~loadersearch.workload._cache_info.cache_dir`), never inside the dataset
unless that is where the cache directory is asked to be. Its header holds a fingerprint of the
dataset (every image's path, size and modification time) and of the image size: a changed
dataset or size is rebuilt, an unchanged one reused by every trial and every later run.
Builds are safe against each other: one builder at a time (an ``flock`` beside the file),
into a temporary file renamed into place when complete, so a reader never sees half a cache
and a killed build leaves nothing that is used.

File layout (little-endian): ``LSCACHE1``, the header's length (uint64), the header (JSON),
padding to :data:`HEADER_BYTES`; the index, int64 ``(n, 3)`` ``[offset, height, width]``
(height 0: an image that could not be decoded, skipped with ``skip_bad_samples``); then the
pixels, each image ``height x width x 3`` RGB at its offset.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from loadersearch._units import fmt_bytes
from loadersearch.errors import DiskFullError
from loadersearch.workload._cache_info import CACHE_ENV, CacheError, CacheInfo, cache_dir

log = logging.getLogger(__name__)

MAGIC = b"LSCACHE1"
VERSION = 1  # bump when what is stored changes: older files are then rebuilt
HEADER_BYTES = 16384
SUFFIX = ".lscache"


def memmap_path(root: str, img_size: int, directory: Path, key: str = "") -> Path:
    """The cache file of the dataset at ``root`` (``key``: what else selects its images, e.g.
    the split) at ``img_size``: one file per dataset and size, rebuilt in place when stale."""
    root = os.path.abspath(root)
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", os.path.basename(root.rstrip("/")) or "data")
    digest = hashlib.sha1(f"{root}\0{key}".encode()).hexdigest()[:12]
    return directory / f"{slug[:40]}-{digest}-{img_size}px{SUFFIX}"


def images_digest(root: str, paths: Sequence[str], img_size: int) -> str:
    """A hash of what the cache stores: every image's path, size and modification time, the
    image size and the format's version. A changed, added or removed image changes it."""
    h = hashlib.sha256(f"{VERSION}\0{img_size}\0{os.path.abspath(root)}".encode())
    for rel in paths:
        try:
            st = os.stat(os.path.join(root, rel))
            h.update(f"\0{rel}\0{st.st_size}\0{st.st_mtime_ns}".encode())
        except OSError:
            h.update(f"\0{rel}\0missing".encode())
    return h.hexdigest()


def _read_header(path: Path) -> dict[str, Any] | None:
    """The header of the cache file at ``path``, or None when there is no usable one."""
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_BYTES)
    except OSError:
        return None
    if len(head) < 16 or head[:8] != MAGIC:
        return None
    n = int.from_bytes(head[8:16], "little")
    try:
        return json.loads(head[16 : 16 + n])
    except ValueError:
        return None


def _resized(image: Any, img_size: int) -> np.ndarray:
    """The image as uint8 HWC, scaled down (aspect kept) so its longer side is at most
    ``img_size``: the offline half of the pipeline. Smaller images are kept as they are."""
    from PIL import Image

    w, h = image.size
    scale = min(1.0, img_size / max(w, h))
    if scale < 1.0:
        image = image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BICUBIC)
    return np.asarray(image, dtype=np.uint8)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    import fcntl

    try:
        f = open(path, "a")  # noqa: SIM115 - closed by the with below
    except OSError as e:
        if e.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
        why = "is on a read-only file system" if e.errno == errno.EROFS else "is not writable"
        raise CacheError(
            f"the memmap cache directory {path.parent} {why}, and the cache of this dataset "
            "must be built there first: choose a writable one with --cache-dir DIR (or "
            f"${CACHE_ENV}), or use --cache ram or none."
        ) from e
    with f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def ensure_memmap(
    root: str,
    paths: Sequence[str],
    img_size: int,
    *,
    directory: str | os.PathLike | None = None,
    key: str = "",
    skip_bad_samples: bool = False,
    io_ms: float = 0.0,
) -> CacheInfo:
    """The memmap cache of these images at ``img_size``: reused when its fingerprint matches
    the dataset as it is now, else built (under a lock; other callers wait and reuse it).
    Raises :class:`CacheError` when the directory cannot hold it, and the dataset's
    :class:`~loadersearch.errors.BadSampleError` for an image that cannot be decoded (unless
    ``skip_bad_samples``: it is stored as missing)."""
    directory = cache_dir(directory)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CacheError(
            f"cannot create the cache directory {directory}: {e.strerror}. Choose a writable "
            f"one with --cache-dir DIR (or ${CACHE_ENV})."
        ) from e
    path = memmap_path(root, img_size, directory, key)
    wanted = images_digest(root, paths, img_size)
    header = _read_header(path)
    if header and header.get("fingerprint") == wanted:
        return _info(path, header, built=False)
    with _locked(path.with_name(path.name + ".lock")):
        header = _read_header(path)  # another process may have built it while we waited
        if header and header.get("fingerprint") == wanted:
            return _info(path, header, built=False)
        if header:
            log.info("the memmap cache %s is stale (dataset or size changed): rebuilding", path)
        header = _build(path, root, paths, img_size, wanted, skip_bad_samples, io_ms)
    return _info(path, header, built=True)


def _info(path: Path, header: dict[str, Any], *, built: bool) -> CacheInfo:
    return CacheInfo(
        mode="memmap",
        images=int(header["images"]),
        bytes=path.stat().st_size,
        img_size=int(header["img_size"]),
        path=str(path),
        built=built,
        build_s=header.get("build_s"),
    )


PARALLEL_FROM = 64  # images: below this a build decodes in the calling thread alone
BUILD_WORKERS = 8  # at most this many threads decode a build


def _decoded(task: tuple[str, int, float]) -> tuple[np.ndarray | None, str | None]:
    """One image of a build, ``(pixels, None)``, or ``(None, reason)`` when it cannot be
    decoded: what a build worker sends back."""
    from loadersearch.workload._datasets.decode import SampleError, decode

    full, img_size, io_ms = task
    if io_ms > 0:  # emulated slow storage: each file read once, at this latency
        time.sleep(io_ms / 1000.0)
    try:
        return _resized(decode(full), img_size), None
    except SampleError as e:
        return None, e.reason


def _decode_all(
    root: str, paths: Sequence[str], img_size: int, io_ms: float
) -> Iterator[tuple[np.ndarray | None, str | None]]:
    """Every image decoded and scaled, in order: in the calling thread for a small dataset,
    else by up to :data:`BUILD_WORKERS` threads, one per CPU (PIL's decoders and resampling
    release the GIL; no process is started, so no ``__main__`` is imported again)."""
    tasks = [(os.path.join(root, rel), img_size, io_ms) for rel in paths]
    workers = min(os.cpu_count() or 1, BUILD_WORKERS)
    if len(tasks) < PARALLEL_FROM or workers < 2:
        yield from map(_decoded, tasks)
        return
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(workers, thread_name_prefix="loadersearch-cache")
    try:
        yield from pool.map(_decoded, tasks)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _build(
    path: Path,
    root: str,
    paths: Sequence[str],
    img_size: int,
    wanted: str,
    skip_bad_samples: bool,
    io_ms: float = 0.0,
) -> dict[str, Any]:
    from loadersearch.workload._datasets.decode import SampleError

    n = len(paths)
    index_bytes = n * 3 * 8
    bound = HEADER_BYTES + index_bytes + n * img_size * img_size * 3
    free = shutil.disk_usage(path.parent).free
    if free < bound:
        raise CacheError(
            f"the memmap cache of {n} images at {img_size} px needs up to "
            f"{fmt_bytes(bound)} and {path.parent} has {fmt_bytes(free)} free: "
            "choose another place with --cache-dir DIR, or use --cache ram or none."
        )
    start = time.perf_counter()
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)
    index = np.zeros((n, 3), np.int64)
    try:
        with os.fdopen(fd, "wb") as f:
            offset = HEADER_BYTES + index_bytes
            f.seek(offset)
            decoded = _decode_all(root, paths, img_size, io_ms)
            for i, (pixels, reason) in enumerate(decoded):
                if pixels is None:
                    if not skip_bad_samples:
                        decoded.close()  # stops the build workers
                        raise SampleError(os.path.join(root, paths[i]), str(reason))
                    continue  # height 0: the dataset skips it as it would without a cache
                index[i] = (offset, pixels.shape[0], pixels.shape[1])
                f.write(pixels.tobytes())
                offset += pixels.nbytes
            header = {
                "version": VERSION,
                "fingerprint": wanted,
                "root": os.path.abspath(root)[:2048],
                "images": n,
                "img_size": img_size,
                "build_s": round(time.perf_counter() - start, 3),
                "built_at": time.time(),
            }
            head = json.dumps(header).encode()
            f.seek(0)
            f.write(MAGIC + len(head).to_bytes(8, "little") + head)
            f.seek(HEADER_BYTES)
            f.write(index.tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it private; a cache is for every user
        os.replace(tmp, path)  # atomic: readers see the old file or the whole new one
    except OSError as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if e.errno in (28, 122):  # ENOSPC, EDQUOT
            raise DiskFullError(
                f"the disk holding {path.parent} filled up while building the memmap cache: "
                "free space there, or choose another place with --cache-dir DIR."
            ) from e
        raise CacheError(f"cannot write the memmap cache {path}: {e}") from e
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    log.info("built the memmap cache %s in %.1f s", path, header["build_s"])
    return header


class MemmapImages:
    """The images of a memmap cache, read by index without decoding. Pickles by path, so a
    spawned DataLoader worker maps the file again instead of copying it."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = str(path)
        header = _read_header(Path(path))
        if header is None:
            raise CacheError(f"{path} is not a loadersearch memmap cache; delete it.")
        self.header = header
        n = int(header["images"])
        self._data = np.memmap(self.path, dtype=np.uint8, mode="r")
        self._index = np.frombuffer(self._data, np.int64, n * 3, HEADER_BYTES).reshape(n, 3)

    def __len__(self) -> int:
        return len(self._index)

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["path"])

    def array(self, i: int) -> np.ndarray | None:
        """Image ``i`` as uint8 HWC (a view of the mapped file), None when it was not
        decodable at build time."""
        offset, h, w = (int(v) for v in self._index[i])
        if h == 0:
            return None
        return self._data[offset : offset + h * w * 3].reshape(h, w, 3)

    def image(self, i: int) -> Any:
        from PIL import Image

        pixels = self.array(i)
        return None if pixels is None else Image.fromarray(np.asarray(pixels))  # (h, w, 3): RGB
