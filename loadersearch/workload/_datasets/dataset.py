"""The detection dataset (uint8 tensors for a DataLoader), how it is opened, and its collate."""

from __future__ import annotations

import logging
import os
import random

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset, default_collate, get_worker_info

from loadersearch.errors import DatasetError
from loadersearch.workload import _augment as aug
from loadersearch.workload._cache import cache_key, open_cache
from loadersearch.workload._cache_info import CacheInfo
from loadersearch.workload._datasets.decode import SampleError, decode
from loadersearch.workload._datasets.index import DatasetIndex, read_index
from loadersearch.workload._datasets.skipped import note_skipped
from loadersearch.workload._memmap_cache import MemmapImages
from loadersearch.workload._ram_cache import RamImages

log = logging.getLogger(__name__)

class DetectionDataset(Dataset):
    """Images and boxes for detection training, ``(image, boxes)`` per sample.

    ``image`` is a uint8 tensor (3, img_size, img_size); ``boxes`` a float32 tensor (n, 5)
    ``[class, cx, cy, w, h]`` normalised to that square. Build it with :func:`open_dataset`.
    """

    def __init__(
        self,
        root: str,
        fmt: str,
        paths: list[str],
        boxes: list[np.ndarray],
        class_names: list[str],
        *,
        img_size: int,
        augment: bool = True,
        mosaic: bool = False,
        skip_bad_samples: bool = False,
        seed: int = 0,
        skipped_reasons: list[str] | None = None,
    ) -> None:
        if img_size < 32:
            raise ValueError(f"img_size must be at least 32 but got {img_size}.")
        self.root = root
        self.fmt = fmt
        self.class_names = tuple(class_names)
        self.num_classes = max(len(class_names), 1)
        self.img_size = img_size
        self.augment = augment
        self.mosaic = mosaic
        self.skip_bad_samples = skip_bad_samples
        self.seed = seed
        self.epoch = 0
        self.skipped_reasons = list(skipped_reasons or [])
        # Compact per-sample metadata (see the module docstring).
        self._paths = np.array([os.fsencode(p) for p in paths], dtype=np.bytes_)
        counts = np.array([len(b) for b in boxes], np.int64)
        self._offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._boxes = (
            np.concatenate(boxes).astype(np.float32)
            if len(boxes)
            else np.zeros((0, 5), np.float32)
        )
        self._root_b = os.fsencode(root)
        self._bad: set[int] = set()  # per process: indices already found undecodable
        # the images' source when cached (workload/_cache.py): MemmapImages or RamImages
        self._cache: MemmapImages | RamImages | None = None
        self.cache_info: CacheInfo | None = None

    def attach_cache(self, images: MemmapImages | RamImages, info: CacheInfo) -> None:
        """Read images from ``images`` (a cache of this dataset's images, in its order)."""
        if len(images) != len(self):
            raise ValueError(f"a cache of {len(images)} images for {len(self)} samples")
        self._cache, self.cache_info = images, info

    def _image(self, j: int) -> Image.Image:
        """Image j, upright RGB: from the cache when there is one, else decoded from its file."""
        if isinstance(self._cache, MemmapImages):
            image = self._cache.image(j)
            if image is None:
                raise SampleError(self.path(j), "could not be decoded when the cache was built")
            return image
        if self._cache is not None:
            return decode(self.path(j), self._cache.file(j))
        return decode(self.path(j))

    @property
    def skipped(self) -> int:
        """How many images were left out at open time (``skip_bad_samples=True``)."""
        return len(self.skipped_reasons)

    def __len__(self) -> int:
        return len(self._paths)

    def set_epoch(self, epoch: int) -> None:
        """Draw new augmentations: sample i of epoch e uses the generator (seed, e, i)."""
        self.epoch = int(epoch)

    def path(self, i: int) -> str:
        return os.fsdecode(os.path.join(self._root_b, self._paths[i]))

    def labels(self, i: int) -> np.ndarray:
        """Boxes of image i as stored: (n, 5) [class, cx, cy, w, h] normalised to the image."""
        return self._boxes[self._offsets[i] : self._offsets[i + 1]]

    def _load(self, i: int) -> tuple[Image.Image, np.ndarray]:
        """Image i (or, when skipping, the next decodable one) and its pixel boxes."""
        n = len(self)
        for k in range(n):
            j = (i + k) % n
            if j in self._bad:
                continue
            try:
                image = self._image(j)
            except SampleError as e:
                if not self.skip_bad_samples:
                    raise
                self._bad.add(j)
                log.warning("skipping %s: %s", e.path, e.reason)
                note_skipped(e.path, e.reason)  # a worker's warning reaches nobody
                continue
            w, h = image.size
            b = self.labels(j)
            px = np.empty_like(b)
            px[:, 0] = b[:, 0]
            px[:, 1] = (b[:, 1] - b[:, 3] / 2) * w
            px[:, 2] = (b[:, 2] - b[:, 4] / 2) * h
            px[:, 3] = (b[:, 1] + b[:, 3] / 2) * w
            px[:, 4] = (b[:, 2] + b[:, 4] / 2) * h
            return image, px
        raise DatasetError(f"No image in {self.root} could be decoded ({n} tried).")

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"sample index {i} out of range for {n} samples")
        i %= n
        size = self.img_size
        if not self.augment:
            image, boxes = aug.letterbox(*self._load(i), size)
        else:
            rng = np.random.default_rng([self.seed, self.epoch, i])
            if self.mosaic and rng.random() < 0.5:
                picks = [i, *(int(j) for j in rng.integers(0, n, 3))]
                images, boxes_list = zip(*(self._load(j) for j in picks), strict=True)
                image, boxes = aug.mosaic(list(images), list(boxes_list), size, rng)
            else:
                image, boxes = aug.random_resize_paste(*self._load(i), size, rng)
            image = aug.hsv_jitter(image, rng)
        out = np.empty((len(boxes), 5), np.float32)
        if len(boxes):
            out[:, 0] = boxes[:, 0]
            out[:, 1] = (boxes[:, 1] + boxes[:, 3]) / (2 * size)
            out[:, 2] = (boxes[:, 2] + boxes[:, 4]) / (2 * size)
            out[:, 3] = (boxes[:, 3] - boxes[:, 1]) / size
            out[:, 4] = (boxes[:, 4] - boxes[:, 2]) / size
        return aug.to_tensor(image), torch.from_numpy(out)

    def __repr__(self) -> str:
        return (
            f"DetectionDataset({self.root!r}, fmt={self.fmt!r}, images={len(self)}, "
            f"classes={self.num_classes}, img_size={self.img_size}, augment={self.augment}, "
            f"mosaic={self.mosaic}, skipped={self.skipped})"
        )


def open_dataset(
    root: str | os.PathLike,
    fmt: str | None = None,
    *,
    img_size: int,
    augment: bool = True,
    mosaic: bool = False,
    skip_bad_samples: bool = False,
    seed: int = 0,
    split: str | None = None,
    cache: str = "none",
    cache_dir: str | None = None,
    io_ms: float = 0.0,
) -> DetectionDataset:
    """Read a dataset's labels (all of them, checked) and return a :class:`DetectionDataset`.

    ``cache`` (``none``, ``ram`` or ``memmap``, see :mod:`loadersearch.workload._cache`) is
    where its images come from; a memmap cache is built first when it is missing or stale.
    ``io_ms``: an emulated storage latency paid per file read when a cache is filled.

    ``fmt`` is ``"yolo"``, ``"voc"``, ``"coco"`` or None to detect it. See the module
    docstring for the layouts and for what each kind of bad data gets. An index that
    :func:`preload_index` read in this process (or in the fork server this process was forked
    from) is used instead of reading the labels again.
    """
    index = _INDEX_CACHE.get(_index_key(root, fmt, split, skip_bad_samples))
    if index is None:
        index = read_index(root, fmt, split=split, skip_bad_samples=skip_bad_samples)
    dataset = DetectionDataset(
        index.root,
        index.fmt,
        index.paths,
        index.boxes,
        index.class_names,
        img_size=img_size,
        augment=augment,
        mosaic=mosaic,
        skip_bad_samples=skip_bad_samples,
        seed=seed,
        skipped_reasons=index.skipped_reasons,
    )
    if cache != "none":
        key = cache_key(index.fmt, split, skip_bad_samples)
        images, info = open_cache(
            cache, index.root, index.paths, img_size, cache_dir, key, skip_bad_samples, io_ms
        )
        dataset.attach_cache(images, info)
    return dataset


# (root, fmt, split, skip_bad_samples) -> its DatasetIndex; filled by preload_index only
_INDEX_CACHE: dict[tuple, DatasetIndex] = {}


def _index_key(root: str | os.PathLike, fmt: str | None, split: str | None, skip: bool) -> tuple:
    return (os.path.abspath(root), fmt, split, bool(skip))


def preload_index(
    root: str | os.PathLike,
    fmt: str | None = None,
    *,
    split: str | None = None,
    skip_bad_samples: bool = False,
) -> None:
    """Read the label index of a dataset once, for every :func:`open_dataset` of it later in
    this process and in processes forked from it (the measurement's fork server). Raises what
    :func:`open_dataset` would."""
    key = _index_key(root, fmt, split, skip_bad_samples)
    if key not in _INDEX_CACHE:
        _INDEX_CACHE[key] = read_index(root, fmt, split=split, skip_bad_samples=skip_bad_samples)


def collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack images to uint8 (B, 3, H, W); targets float32 (n, 6) [image index, class, cx, cy,
    w, h]. In a worker the image batch is built in shared memory, as default_collate does."""
    images = default_collate([b[0] for b in batch])
    parts = []
    for k, (_, boxes) in enumerate(batch):
        if len(boxes):
            parts.append(torch.cat([torch.full((len(boxes), 1), float(k)), boxes], dim=1))
    targets = torch.cat(parts) if parts else torch.zeros((0, 6), dtype=torch.float32)
    return images, targets


def worker_init_fn(worker_id: int) -> None:
    """Seed python, numpy and torch in a DataLoader worker from torch's per-worker seed.

    The dataset's augmentation does not depend on these (it is seeded per sample, see the
    module docstring); this keeps any other random code in the worker reproducible and
    different between workers.
    """
    info = get_worker_info()
    seed = info.seed if info is not None else torch.initial_seed() + worker_id
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
