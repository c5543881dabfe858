"""Detection datasets in YOLO, Pascal VOC or COCO layout, as uint8 tensors for a DataLoader.

Layouts (``detect_format`` tells them apart, in this order):

* ``yolo``: ``images/`` and ``labels/`` (or ``images/<split>/`` and ``labels/<split>/``); the
  label of ``images/a/b.jpg`` is ``labels/a/b.txt``, one ``class cx cy w h`` line per box,
  normalised to the image. Class names from ``classes.txt`` or ``data.yaml`` (``names``/``nc``)
  when present, else ``max(class) + 1`` classes.
* ``voc``: ``JPEGImages/`` and ``Annotations/*.xml`` (pixel ``xmin ymin xmax ymax``, 1-based,
  class names mapped to ids in sorted order: those of ``classes.txt`` or of VOC's per-class
  ``ImageSets/Main/<class>_<split>.txt`` files, else those found in the annotations);
  ``split`` reads ``ImageSets/Main/<split>.txt``,
  otherwise every annotation is used. ``difficult`` objects are kept.
* ``coco``: ``annotations.json`` or ``annotations/*.json`` (``split`` picks
  ``instances_<split>.json`` or ``<split>.json``) with images under ``images/``,
  ``<split>/`` or the root; ``bbox`` is pixel ``x y w h``; category ids are mapped to
  contiguous ids in increasing id order; ``iscrowd`` annotations are ignored.

Bad data, and what each gets:

* Missing directory, unknown layout, no images: :class:`DatasetError` from
  :func:`open_dataset`, naming the directory and what was expected.
* Malformed label (a YOLO line that is not five numbers, unreadable XML/JSON) or an
  out-of-range box (class outside the known classes, YOLO coordinates outside [0, 1], a
  zero-size box, pixel coordinates outside the image) or a listed image that does not exist:
  labels are all parsed and checked when the dataset is opened, and the first problem raises
  :class:`DatasetError` naming ``file:line`` and the reason. With ``skip_bad_samples=True``
  the image is left out instead, and counted: ``dataset.skipped`` and
  ``dataset.skipped_reasons``.
* An image without a label file (YOLO): a background image with no boxes (YOLO's convention).
  A COCO image without annotations is the same.
* An image that cannot be decoded (truncated, not an image, unsupported): ``__getitem__``
  raises :class:`BadSampleError` (``path``, ``reason``). It reaches the main process as a
  ``BadSampleError`` with the same path and reason even from a DataLoader worker (see
  :class:`SampleError`). With ``skip_bad_samples=True`` the next decodable sample in index
  order is returned instead (deterministic) and a warning is logged once per file; inside a
  measurement the file is also reported to the measuring parent (:mod:`.skipped`), which
  names it once and records it in the study.

Images are decoded with PIL, turned upright with ``ImageOps.exif_transpose`` and converted to
RGB (grayscale, palette, RGBA, CMYK and 16-bit inputs all work). Labels are taken to be given
relative to the upright image as displayed, as labelling tools and Ultralytics do; boxes are
stored normalised, so they follow an EXIF rotation that swaps width and height.

Randomness: sample ``i`` draws its augmentation (and mosaic partners) from its own generator
seeded with ``(seed, epoch, i)``. Sample ``i`` is therefore the same whatever num_workers,
worker id, batch size or order: every DataLoader configuration does the same CPU work, which
makes throughput comparisons fair. Call :meth:`DetectionDataset.set_epoch` for new draws (it
reaches workers created after the call, not persistent ones).

Per-sample metadata lives in a few numpy arrays (paths, boxes, offsets), not in Python lists
of objects, so DataLoader workers do not copy it on read (reference counts touch pages).
"""

from __future__ import annotations

from typing import Any

from loadersearch.workload._datasets._common import IMAGE_EXTS
from loadersearch.workload._datasets.decode import SampleError, decode
from loadersearch.workload._datasets.detect import detect_format
from loadersearch.workload._datasets.index import DatasetCheck, check_dataset, read_index
from loadersearch.workload._spec import FORMATS

# These need torch: imported on first use, so that a run's parent process can check a dataset
# (check_dataset) without importing torch.
_TORCH_NAMES = ("DetectionDataset", "collate", "open_dataset", "worker_init_fn")

__all__ = [
    "FORMATS",
    "IMAGE_EXTS",
    "DatasetCheck",
    "DetectionDataset",
    "SampleError",
    "check_dataset",
    "collate",
    "decode",
    "detect_format",
    "open_dataset",
    "read_index",
    "worker_init_fn",
]


def __getattr__(name: str) -> Any:
    if name in _TORCH_NAMES:
        from loadersearch.workload._datasets import dataset

        return getattr(dataset, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
