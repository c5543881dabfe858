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
  order is returned instead (deterministic) and a warning is logged once per file.

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

import json
import logging
import os
import random
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image, ImageOps
from torch.utils.data import Dataset, default_collate, get_worker_info

from loadersearch.errors import BadSampleError, DatasetError
from loadersearch.workload import augment as aug

log = logging.getLogger(__name__)

FORMATS = ("yolo", "voc", "coco")
IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
_COORD_TOL = 1e-3  # YOLO coordinates may exceed [0, 1] by this much (rounding in exports)
_SKIP_HINT = "fix it, or pass --skip-bad-samples to leave such images out (they are counted)"


class SampleError(BadSampleError):
    """A :class:`BadSampleError` that survives the trip back from a DataLoader worker.

    PyTorch re-raises a worker's exception in the main process by building a new one from the
    worker's traceback text, as ``exc_type(message=text)`` when the class has a ``message``
    attribute (otherwise it gives up and raises a RuntimeError). This class rebuilds ``path``
    and ``reason`` from that text and keeps the text in ``worker_traceback``.
    """

    message = "a sample could not be loaded"  # truthy: tells PyTorch to pass message=

    def __init__(
        self, path: str | None = None, reason: str | None = None, *, message: str | None = None
    ) -> None:
        self.worker_traceback = message
        if message is not None:
            path, reason = self._parse(message)
        super().__init__(str(path), str(reason))

    @classmethod
    def _parse(cls, text: str) -> tuple[str, str]:
        prefix = f"{cls.__module__}.{cls.__qualname__}: "
        where = text.splitlines()[0].removeprefix("Caught SampleError ").rstrip(".")
        for line in reversed(text.splitlines()):
            if line.startswith(prefix):
                path, _, reason = line[len(prefix) :].partition(": ")
                return path, f"{reason} ({where})"
        return "<DataLoader worker>", text.strip().splitlines()[-1]


class _Problems:
    """Collects label problems: raises on the first one, or records it when skipping."""

    def __init__(self, skip: bool) -> None:
        self.skip = skip
        self.reasons: list[str] = []

    def __call__(self, where: str | os.PathLike, reason: str) -> None:
        msg = f"{where}: {reason}"
        if not self.skip:
            raise DatasetError(f"{msg}; {_SKIP_HINT}.")
        log.warning("skipping %s", msg)
        self.reasons.append(msg)


# --------------------------------------------------------------------------- format detection


def _has_images(d: Path) -> bool:
    try:
        return any(e.name.lower().endswith(IMAGE_EXTS) for e in os.scandir(d))
    except OSError:
        return False


def _coco_jsons(root: Path) -> list[Path]:
    found = (
        sorted((root / "annotations").glob("*.json")) if (root / "annotations").is_dir() else []
    )
    if (root / "annotations.json").is_file():
        found.insert(0, root / "annotations.json")
    return found


def detect_format(root: str | os.PathLike) -> str:
    """``"yolo"``, ``"voc"`` or ``"coco"`` from a dataset directory's layout.

    Raises :class:`DatasetError` naming the directory and the layouts looked for when the
    directory is missing or matches none of them.
    """
    root = Path(root)
    if not root.is_dir():
        what = "is a file, not a directory" if root.exists() else "does not exist"
        raise DatasetError(
            f"Dataset directory {root} {what}. Give a directory in YOLO, VOC or COCO layout, "
            "or omit the dataset to use the built-in generated one."
        )
    if (root / "images").is_dir() and (root / "labels").is_dir():
        return "yolo"
    if (root / "JPEGImages").is_dir() and (root / "Annotations").is_dir():
        return "voc"
    if _coco_jsons(root):
        return "coco"
    entries = sorted(p.name for p in root.iterdir())[:10]
    hint = ""
    if (root / "VOCdevkit").is_dir():
        hint = " (it holds VOCdevkit/: point at VOCdevkit/VOC2007 or similar)"
    raise DatasetError(
        f"Cannot tell the dataset format of {root}{hint}: expected images/ + labels/ (YOLO), "
        "JPEGImages/ + Annotations/ (Pascal VOC), or annotations.json or annotations/*.json "
        f"(COCO); found {entries or 'nothing'}."
    )


# --------------------------------------------------------------------------- readers
# Each reader returns (relative image paths, per-image boxes (n, 5) [class, cx, cy, w, h]
# normalised float32, class names). Problems go through `problems`; a skipped image is left out.


def _list_images(d: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames.sort()
        out.extend(
            os.path.join(dirpath, f) for f in sorted(filenames) if f.lower().endswith(IMAGE_EXTS)
        )
    return out


def _pick_split_dir(base: Path, split: str | None, what: str) -> Path:
    if split is not None:
        if not (base / split).is_dir():
            choices = sorted(p.name for p in base.iterdir() if p.is_dir())
            raise DatasetError(f"No split {split!r} in {base} ({what}); found {choices}.")
        return base / split
    if _has_images(base):
        return base
    subdirs = sorted(p.name for p in base.iterdir() if p.is_dir())
    if "train" in subdirs:
        return base / "train"
    if len(subdirs) == 1:
        return base / subdirs[0]
    raise DatasetError(
        f"{base} holds no images directly and several splits {subdirs}: choose one with split "
        "(--data-split)."
        if subdirs
        else f"No images in {base}: expected files ending in {', '.join(IMAGE_EXTS)}."
    )


def _yolo_names(root: Path) -> list[str] | None:
    if (root / "classes.txt").is_file():
        return [n.strip() for n in (root / "classes.txt").read_text().splitlines() if n.strip()]
    for name in ("data.yaml", "dataset.yaml"):
        if (root / name).is_file():
            try:
                import yaml

                doc = yaml.safe_load((root / name).read_text()) or {}
            except Exception as e:  # a broken yaml beside the data: say so, do not guess
                raise DatasetError(f"{root / name}: cannot read class names ({e}).") from e
            names = doc.get("names")
            if isinstance(names, dict):
                return [str(names[k]) for k in sorted(names)]
            if isinstance(names, list):
                return [str(n) for n in names]
            if isinstance(doc.get("nc"), int):
                return [str(i) for i in range(doc["nc"])]
    return None


def _parse_yolo_label(text: str, nc: int | None) -> tuple[np.ndarray | None, int, str]:
    """Boxes (n, 5), or None, the line number and the reason."""
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != 5:
            return None, lineno, f"expected 5 numbers 'class cx cy w h', got {line!r}"
        try:
            row = [float(f) for f in fields]
        except ValueError:
            return None, lineno, f"not a number in {line!r}"
        cls, cx, cy, w, h = row
        if not all(np.isfinite(row)):
            return None, lineno, f"non-finite value in {line!r}"
        if cls != int(cls) or cls < 0 or (nc is not None and cls >= nc):
            known = f"0..{nc - 1}" if nc is not None else "a non-negative integer"
            return None, lineno, f"class {fields[0]} out of range (expected {known})"
        if min(cx, cy, w, h) < -_COORD_TOL or max(cx, cy, w, h) > 1 + _COORD_TOL:
            return (
                None,
                lineno,
                (
                    f"box {' '.join(fields[1:])!r} out of range: YOLO coordinates are "
                    "normalised to [0, 1] (pixel coordinates?)"
                ),
            )
        if w <= 0 or h <= 0:
            return None, lineno, f"zero-size box {' '.join(fields[1:])!r}"
        rows.append(row)
    return np.asarray(rows, np.float32).reshape(-1, 5), 0, ""


def _read_yolo(root: Path, split: str | None, problems: _Problems):
    image_dir = _pick_split_dir(root / "images", split, "YOLO images")
    rel = image_dir.relative_to(root / "images")
    label_dir = root / "labels" / rel
    if not label_dir.is_dir():
        log.warning("no label folder %s: every image is a background image", label_dir)
    names = _yolo_names(root)
    nc = len(names) if names else None
    paths, boxes = [], []
    for full in _list_images(image_dir):
        stem_rel = os.path.splitext(os.path.relpath(full, image_dir))[0]
        label = label_dir / (stem_rel + ".txt")
        try:
            text = label.read_text()
        except FileNotFoundError:
            text = ""  # no label file: a background image
        except (OSError, UnicodeDecodeError) as e:
            problems(label, f"cannot read label ({e})")
            continue
        b, lineno, reason = _parse_yolo_label(text, nc)
        if b is None:
            problems(f"{label}:{lineno}", reason)
            continue
        paths.append(os.path.relpath(full, root))
        boxes.append(b)
    if names is None:
        top = max((int(b[:, 0].max()) for b in boxes if len(b)), default=0)
        names = [str(i) for i in range(top + 1)]
    return paths, boxes, names


def _xyxy_to_norm(cls, x1, y1, x2, y2, w: float, h: float) -> np.ndarray:
    return np.stack(
        [cls, (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h], axis=-1
    ).astype(np.float32)


def _image_size(path: Path) -> tuple[int, int]:
    """Displayed (upright) size from the image header, without decoding the pixels."""
    with Image.open(path) as im:
        w, h = im.size
        orientation = im.getexif().get(0x0112, 1)
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)


def _voc_names(root: Path) -> list[str] | None:
    """Class names from ``classes.txt``, or from VOC's per-class ``ImageSets/Main/<cls>_*.txt``."""
    if (root / "classes.txt").is_file():
        return [n.strip() for n in (root / "classes.txt").read_text().splitlines() if n.strip()]
    main = root / "ImageSets" / "Main"
    if main.is_dir():
        found = {e.name.rsplit("_", 1)[0] for e in os.scandir(main) if "_" in e.name}
        if found:
            return sorted(found)
    return None


def _read_voc(root: Path, split: str | None, problems: _Problems):
    ann_dir, img_dir = root / "Annotations", root / "JPEGImages"
    images = {os.path.splitext(e.name)[0]: e.name for e in os.scandir(img_dir) if e.is_file()}
    if split is not None:
        listing = root / "ImageSets" / "Main" / f"{split}.txt"
        if not listing.is_file():
            raise DatasetError(f"No split {split!r}: {listing} does not exist.")
        ids = [line.split()[0] for line in listing.read_text().splitlines() if line.strip()]
    else:
        ids = sorted(
            os.path.splitext(e.name)[0] for e in os.scandir(ann_dir) if e.name.endswith(".xml")
        )
    parsed = []  # (image name, size, [(name, x1, y1, x2, y2)])
    for stem in ids:
        xml_path = ann_dir / f"{stem}.xml"
        try:
            tree = ET.parse(xml_path).getroot()
        except (OSError, ET.ParseError) as e:
            problems(xml_path, f"cannot read annotation ({e})")
            continue
        name = images.get(stem) or tree.findtext("filename")
        if not name or not (img_dir / name).is_file():
            problems(xml_path, f"no image {stem}.* in {img_dir}")
            continue
        try:
            w = float(tree.findtext("size/width") or 0)
            h = float(tree.findtext("size/height") or 0)
            if w <= 0 or h <= 0:
                w, h = _image_size(img_dir / name)
            objs = []
            for k, obj in enumerate(tree.iter("object"), 1):
                cname = (obj.findtext("name") or "").strip()
                bb = obj.find("bndbox")
                if not cname or bb is None:
                    raise ValueError(f"object {k}: missing name or bndbox")
                x1, y1, x2, y2 = (float(bb.findtext(t)) for t in ("xmin", "ymin", "xmax", "ymax"))
                if x2 <= x1 or y2 <= y1:
                    raise ValueError(f"object {k} ({cname}): zero-size box {x1, y1, x2, y2}")
                if x1 < 0 or y1 < 0 or x2 > w + 1 or y2 > h + 1:
                    raise ValueError(
                        f"object {k} ({cname}): box {x1, y1, x2, y2} outside the {w:g}x{h:g} image"
                    )
                objs.append((cname, max(x1 - 1, 0.0), max(y1 - 1, 0.0), min(x2, w), min(y2, h)))
        except (TypeError, ValueError, OSError) as e:
            problems(xml_path, str(e) if isinstance(e, ValueError) else f"bad annotation ({e})")
            continue
        parsed.append((name, (w, h), objs))
    names = _voc_names(root)
    if names is None:
        names = sorted({o[0] for _, _, objs in parsed for o in objs})
    ids_of = {n: i for i, n in enumerate(names)}
    paths, boxes = [], []
    for name, (w, h), objs in parsed:
        unknown = [o[0] for o in objs if o[0] not in ids_of]
        if unknown:
            xml_path = ann_dir / f"{os.path.splitext(name)[0]}.xml"
            problems(
                xml_path, f"class {unknown[0]!r} is not one of the {len(names)} known classes"
            )
            continue
        paths.append(os.path.join("JPEGImages", name))
        if objs:
            arr = np.array([(ids_of[o[0]], *o[1:]) for o in objs], np.float64)
            boxes.append(_xyxy_to_norm(*arr.T, w, h))
        else:
            boxes.append(np.zeros((0, 5), np.float32))
    return paths, boxes, names


def _read_coco(root: Path, split: str | None, problems: _Problems):
    jsons = _coco_jsons(root)
    if split is not None:
        jsons = [p for p in jsons if p.stem in (split, f"instances_{split}")]
        if not jsons:
            raise DatasetError(
                f"No COCO annotations for split {split!r} in {root}: expected "
                f"annotations/instances_{split}.json or annotations/{split}.json."
            )
    if len(jsons) > 1:
        train = [p for p in jsons if "train" in p.stem]
        if len(train) != 1:
            raise DatasetError(
                f"Several COCO annotation files in {root} ({[p.name for p in jsons]}): choose "
                "one with split (--data-split), e.g. train2017 for instances_train2017.json."
            )
        jsons = train
    ann_path = jsons[0]
    try:
        doc = json.loads(ann_path.read_text())
        images = doc["images"]
        anns = doc.get("annotations", [])
        cats = sorted(c["id"] for c in doc.get("categories", []))
        cat_names = {c["id"]: c.get("name", str(c["id"])) for c in doc.get("categories", [])}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise DatasetError(f"{ann_path}: not a COCO annotation file ({e!r}).") from e
    if not cats:
        cats = sorted({a["category_id"] for a in anns})
        cat_names = {c: str(c) for c in cats}
    cat_index = {c: i for i, c in enumerate(cats)}
    # Where the images are: try the usual places with the first image.
    split_name = ann_path.stem.removeprefix("instances_")
    candidates = [root / "images", root / "images" / split_name, root / split_name, root]
    first = images[0]["file_name"] if images else ""
    img_dir = next((d for d in candidates if (d / first).is_file()), root / "images")
    by_image: dict[Any, list] = {}
    for a in anns:
        if not a.get("iscrowd", 0):
            by_image.setdefault(a.get("image_id"), []).append(a)
    paths, boxes = [], []
    for im in images:
        where = f"{ann_path}: image id {im.get('id')} ({im.get('file_name')})"
        try:
            file = img_dir / im["file_name"]
            w, h = float(im.get("width") or 0), float(im.get("height") or 0)
            if not file.is_file():
                raise ValueError(f"image file {file} does not exist")
            if w <= 0 or h <= 0:
                w, h = _image_size(file)
            rows = []
            for a in by_image.get(im["id"], []):
                x, y, bw, bh = (float(v) for v in a["bbox"])
                if a["category_id"] not in cat_index:
                    raise ValueError(
                        f"annotation {a.get('id')}: unknown category_id {a['category_id']}"
                    )
                if bw <= 0 or bh <= 0:
                    raise ValueError(f"annotation {a.get('id')}: zero-size bbox {a['bbox']}")
                if x < -1 or y < -1 or x + bw > w + 1 or y + bh > h + 1:
                    raise ValueError(
                        f"annotation {a.get('id')}: bbox {a['bbox']} outside the {w:g}x{h:g} image"
                    )
                x1, y1 = max(x, 0.0), max(y, 0.0)
                rows.append((cat_index[a["category_id"]], x1, y1, min(x + bw, w), min(y + bh, h)))
        except (KeyError, TypeError, ValueError, OSError) as e:
            problems(where, str(e) if isinstance(e, ValueError) else f"bad entry ({e!r})")
            continue
        paths.append(os.path.relpath(file, root))
        arr = np.array(rows, np.float64).reshape(-1, 5)
        boxes.append(_xyxy_to_norm(*arr.T, w, h))
    return paths, boxes, [str(cat_names[c]) for c in cats]


_READERS = {"yolo": _read_yolo, "voc": _read_voc, "coco": _read_coco}


# --------------------------------------------------------------------------- the dataset


def _decode(path: str) -> Image.Image:
    """An upright RGB image, or :class:`SampleError` naming the file and the reason."""
    try:
        with Image.open(path) as im:
            im.load()
            ImageOps.exif_transpose(im, in_place=True)
            if im.mode in ("I;16", "I;16L", "I;16B", "I;16N"):
                arr = np.asarray(im, dtype=np.uint16) >> 8
                return Image.fromarray(arr.astype(np.uint8)).convert("RGB")
            return im if im.mode == "RGB" else im.convert("RGB")
    except FileNotFoundError as e:
        raise SampleError(path, "image file does not exist") from e
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        raise SampleError(path, f"cannot decode image: {type(e).__name__}: {e}") from e


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
                image = _decode(self.path(j))
            except SampleError as e:
                if not self.skip_bad_samples:
                    raise
                self._bad.add(j)
                log.warning("skipping %s: %s", e.path, e.reason)
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
) -> DetectionDataset:
    """Read a dataset's labels (all of them, checked) and return a :class:`DetectionDataset`.

    ``fmt`` is ``"yolo"``, ``"voc"``, ``"coco"`` or None to detect it. See the module
    docstring for the layouts and for what each kind of bad data gets.
    """
    root = Path(root)
    detected = detect_format(root) if fmt is None else None
    if fmt is None:
        fmt = detected
    elif fmt not in FORMATS:
        raise DatasetError(f"Unknown dataset format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    elif not root.is_dir():
        detect_format(root)  # raises the missing-directory error
    problems = _Problems(skip_bad_samples)
    try:
        paths, boxes, names = _READERS[fmt](root, split, problems)
    except FileNotFoundError as e:
        raise DatasetError(
            f"{root} does not look like a {fmt.upper()} dataset: {e.filename} is missing."
        ) from e
    if not paths:
        raise DatasetError(
            f"No usable images in {root} ({fmt} layout"
            + (
                f", {problems.reasons and len(problems.reasons)} skipped"
                if problems.reasons
                else ""
            )
            + ")."
        )
    if problems.reasons:
        log.warning("left out %d bad images of %s", len(problems.reasons), root)
    return DetectionDataset(
        str(root),
        fmt,
        paths,
        boxes,
        names,
        img_size=img_size,
        augment=augment,
        mosaic=mosaic,
        skip_bad_samples=skip_bad_samples,
        seed=seed,
        skipped_reasons=problems.reasons,
    )


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
