"""The article's remedies for a slow data side, as real options: ``ram`` and ``memmap`` caches.

* ``ram``: every image's encoded bytes (the JPEG file as it is on disk) in one shared-memory
  buffer, read once when the dataset is opened. Decoding and augmentation still run per
  sample and per epoch; only the fetch from storage is gone (a RAM disk, without root).
* ``memmap``: every image decoded once, resized so that its longer side is at most the
  network input, and stored as uint8 pixels in one file that is memory-mapped
  (:class:`MemmapImages`). This is the article's "offline preprocessing split from online
  augmentation": the decode and the down-scaling happen once, the random augmentation still
  runs per sample on top of the stored pixels.

A memmap cache is built once per dataset and image size (:func:`ensure_memmap`), in the cache
directory (:func:`cache_dir`: ``--cache-dir``, ``$LOADERSEARCH_CACHE_DIR``,
``$XDG_CACHE_HOME/loadersearch`` or ``~/.cache/loadersearch``), never inside the dataset
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
import dataclasses
import errno
import hashlib
import io
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from loadersearch._units import fmt_bytes
from loadersearch.errors import DatasetError, DiskFullError

log = logging.getLogger(__name__)

MAGIC = b"LSCACHE1"
VERSION = 1  # bump when what is stored changes: older files are then rebuilt
HEADER_BYTES = 16384
CACHE_ENV = "LOADERSEARCH_CACHE_DIR"
SUFFIX = ".lscache"
RAM_SHARE = 0.5  # a RAM cache may take at most this share of the memory available now
SHM_DIR = "/dev/shm"  # where a RAM cache's shared memory lives (torch's file descriptors)


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


# -- memmap -------------------------------------------------------------------------------------


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


# -- ram ----------------------------------------------------------------------------------------


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
