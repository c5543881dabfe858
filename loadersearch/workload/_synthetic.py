"""A generated stand-in for Pascal VOC: the embedded default dataset.

The images resemble VOC where it matters for data-loading cost: 500x375 / 375x500 JPEGs
(mostly landscape), about 2.4 objects per image (1 + Poisson(1.4)), and a mean file size of
roughly 70-120 KB. File size and decode time come from natural-looking texture: multi-octave
value noise with a 1/f-like spectrum over a colour gradient, and textured objects inside the
boxes. Smooth gradients would give ~30 KB files that decode far faster than real photos.

Generation is deterministic: image ``i`` of seed ``s`` is drawn from its own random stream
``numpy.random.default_rng([s, i])``, so the same seed gives the same bytes (with the same
Pillow/libjpeg), whatever order the images are written in.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import shutil
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np
from PIL import Image

from loadersearch.workload._spec import FORMATS

log = logging.getLogger(__name__)

DEFAULT_DATASET_DIR = os.path.join("studies", "data", "voc-synth-512")
DEFAULT_DATASET_IMAGES = 512
DEFAULT_DATASET_SEED = 0
MARKER = ".loadersearch-complete.json"  # written last: a directory without it is incomplete

VOC_CLASSES = (
    "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
    "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa",
    "train", "tvmonitor",
)  # fmt: skip
_LANDSCAPE_P = 0.7  # VOC is mostly landscape 500x375
_JPEG_QUALITY = 90
_BACKGROUND_OCTAVES = (1, 2, 4, 8, 16, 32, 64)  # value-noise cell sizes, in pixels
_OBJECT_OCTAVES = (1, 2, 4, 16)
_CONTRAST = (24.0, 60.0)  # std of the luminance texture, in grey levels
_OCTAVE_EXPONENT = 0.25  # amplitude ~ cell**exponent: 1/f-like, fine detail sets the file size
_GENERATOR_VERSION = 1  # bump when the pixels change, so stale default datasets are redone


def class_names(num_classes: int) -> list[str]:
    """VOC's names (already sorted) for up to 20 classes, else ``class000``, ``class001``..."""
    if num_classes <= len(VOC_CLASSES):
        return list(VOC_CLASSES[:num_classes])
    return [f"class{i:03d}" for i in range(num_classes)]


def _fractal_noise(rng: np.random.Generator, h: int, w: int, cells: tuple[int, ...]) -> np.ndarray:
    """Sum of value-noise octaves (bicubic-upsampled random grids), amplitude ~ cell size**0.5.

    Returns float32 (h, w) with roughly unit standard deviation.
    """
    out = np.zeros((h, w), np.float32)
    for cell in cells:
        gh, gw = h // cell + 2, w // cell + 2
        grid = rng.standard_normal((gh, gw), dtype=np.float32)
        if cell == 1:
            layer = grid[:h, :w]
        else:
            # Resize the whole grid to (gw*cell, gh*cell) and crop: keeps cells square.
            im = Image.fromarray(grid, mode="F").resize((gw * cell, gh * cell), Image.BILINEAR)
            ox, oy = int(rng.integers(0, cell)), int(rng.integers(0, cell))
            layer = np.asarray(im)[oy : oy + h, ox : ox + w]
        out += layer * np.float32(cell**_OCTAVE_EXPONENT)
    out /= np.float32(out.std() + 1e-6)
    return out


def _random_boxes(rng: np.random.Generator, w: int, h: int, num_classes: int) -> np.ndarray:
    """(n, 5) [class, x1, y1, x2, y2] integer pixel boxes, n = 1 + Poisson(1.4)."""
    n = 1 + int(rng.poisson(1.4))
    area = np.exp(rng.uniform(np.log(0.01), np.log(0.5), n))  # fraction of the image
    aspect = np.exp(rng.uniform(np.log(0.4), np.log(2.5), n))  # box w / h
    bw = np.clip(np.sqrt(area * aspect) * w, 8, w)
    bh = np.clip(np.sqrt(area / aspect) * h, 8, h)
    x1 = rng.uniform(0, w - bw)
    y1 = rng.uniform(0, h - bh)
    cls = rng.integers(0, num_classes, n)
    boxes = np.stack([cls, x1, y1, x1 + bw, y1 + bh], axis=1)
    boxes[:, 1:] = np.round(boxes[:, 1:])
    return boxes


def render_image(
    seed: int, index: int, num_classes: int = 20
) -> tuple[bytes, np.ndarray, tuple[int, int]]:
    """One generated image: JPEG bytes, boxes (n, 5) [class, x1, y1, x2, y2] pixels, (w, h)."""
    rng = np.random.default_rng([seed, index])
    w, h = (500, 375) if rng.random() < _LANDSCAPE_P else (375, 500)
    boxes = _random_boxes(rng, w, h, num_classes)

    # Background: a two-colour gradient in a random direction, plus a coloured 1/f texture.
    c0, c1 = rng.uniform(30, 225, (2, 3))
    angle = rng.uniform(0, 2 * np.pi)
    t = (np.cos(angle) / w) * np.arange(w, dtype=np.float32)[None, :] + (
        np.sin(angle) / h
    ) * np.arange(h, dtype=np.float32)[:, None]
    lum = _fractal_noise(rng, h, w, _BACKGROUND_OCTAVES) * np.float32(rng.uniform(*_CONTRAST))
    tint = _fractal_noise(rng, h, w, (16, 64))
    tint_rgb = rng.uniform(-12, 12, 3)
    img = np.empty((h, w, 3), np.float32)
    for ch in range(3):
        img[..., ch] = lum + np.float32(c1[ch] - c0[ch]) * t + np.float32(tint_rgb[ch]) * tint
        img[..., ch] += np.float32(c0[ch])

    # Objects: a textured blob (ellipse or rectangle) of the box's own colour and contrast.
    for _cls, x1, y1, x2, y2 in boxes:
        x1, y1, x2, y2 = int(x1), int(y1), int(x2), int(y2)
        bh, bw = y2 - y1, x2 - x1
        colour = rng.uniform(0, 255, 3).astype(np.float32)
        tex = _fractal_noise(rng, bh, bw, _OBJECT_OCTAVES) * np.float32(rng.uniform(*_CONTRAST))
        patch = colour + tex[..., None]
        if rng.random() < 0.6:
            py, px = np.ogrid[0:bh, 0:bw]
            mask = ((px - bw / 2) / (bw / 2)) ** 2 + ((py - bh / 2) / (bh / 2)) ** 2 <= 1
        else:
            mask = np.ones((bh, bw), bool)
        region = img[y1:y2, x1:x2]
        region[mask] = patch[mask]

    pixels = np.clip(img, 0, 255, out=img).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels, "RGB").save(buf, "JPEG", quality=_JPEG_QUALITY)
    return buf.getvalue(), boxes, (w, h)


def _write_yolo(root: Path, stems: list[str], sizes: list, boxes: list, names: list[str]) -> None:
    (root / "labels").mkdir(parents=True, exist_ok=True)
    for stem, (w, h), b in zip(stems, sizes, boxes, strict=True):
        lines = []
        for cls, x1, y1, x2, y2 in b:
            cx, cy = (x1 + x2) / 2 / w, (y1 + y2) / 2 / h
            lines.append(f"{int(cls)} {cx:.6f} {cy:.6f} {(x2 - x1) / w:.6f} {(y2 - y1) / h:.6f}")
        (root / "labels" / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    (root / "classes.txt").write_text("\n".join(names) + "\n")
    # Ultralytics' dataset file (`yolo train data=ROOT/data.yaml`, `loadersearch run
    # --ultralytics`): no `path`, so it resolves against the file's own directory; one split.
    yaml_names = "".join(f"  {i}: {json.dumps(n)}\n" for i, n in enumerate(names))
    (root / "data.yaml").write_text(
        "# written by loadersearch make-dataset\ntrain: images\nval: images\n"
        f"names:\n{yaml_names}"
    )


def _write_voc(root: Path, stems: list[str], sizes: list, boxes: list, names: list[str]) -> None:
    (root / "Annotations").mkdir(parents=True, exist_ok=True)
    (root / "ImageSets" / "Main").mkdir(parents=True, exist_ok=True)
    for stem, (w, h), b in zip(stems, sizes, boxes, strict=True):
        objects = "".join(
            f"<object><name>{escape(names[int(c)])}</name><pose>Unspecified</pose>"
            f"<truncated>0</truncated><difficult>0</difficult><bndbox>"
            f"<xmin>{int(x1) + 1}</xmin><ymin>{int(y1) + 1}</ymin>"
            f"<xmax>{int(x2)}</xmax><ymax>{int(y2)}</ymax></bndbox></object>"
            for c, x1, y1, x2, y2 in b
        )
        xml = (
            f"<annotation><folder>VOC-synth</folder><filename>{stem}.jpg</filename>"
            f"<size><width>{w}</width><height>{h}</height><depth>3</depth></size>"
            f"<segmented>0</segmented>{objects}</annotation>\n"
        )
        (root / "Annotations" / f"{stem}.xml").write_text(xml)
    (root / "ImageSets" / "Main" / "train.txt").write_text("\n".join(stems) + "\n")
    (root / "classes.txt").write_text("\n".join(names) + "\n")


def _write_coco(root: Path, stems: list[str], sizes: list, boxes: list, names: list[str]) -> None:
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    images, annotations = [], []
    for i, (stem, (w, h), b) in enumerate(zip(stems, sizes, boxes, strict=True)):
        images.append({"id": i + 1, "file_name": f"{stem}.jpg", "width": w, "height": h})
        for c, x1, y1, x2, y2 in b:
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": i + 1,
                    "category_id": int(c) + 1,  # COCO ids start at 1
                    "bbox": [float(x1), float(y1), float(x2 - x1), float(y2 - y1)],
                    "area": float((x2 - x1) * (y2 - y1)),
                    "iscrowd": 0,
                }
            )
    categories = [{"id": i + 1, "name": n} for i, n in enumerate(names)]
    doc = {"images": images, "annotations": annotations, "categories": categories}
    (root / "annotations" / "instances_train.json").write_text(json.dumps(doc))


_WRITERS = {"yolo": _write_yolo, "voc": _write_voc, "coco": _write_coco}


def make_dataset(
    root: str | os.PathLike,
    *,
    images: int,
    fmt: str = "yolo",
    seed: int = 0,
    num_classes: int = 20,
) -> dict[str, Any]:
    """Write ``images`` generated VOC-like images with labels in ``fmt`` layout under ``root``.

    Layouts: ``yolo`` (``images/``, ``labels/``, ``classes.txt``, and Ultralytics'
    ``data.yaml``), ``voc`` (``JPEGImages/``, ``Annotations/``, ``ImageSets/Main/train.txt``),
    ``coco`` (``images/``, ``annotations/instances_train.json``). Returns statistics: images,
    total_bytes, mean_kb, boxes, boxes_per_image, landscape, portrait, seconds, format, root.
    """
    if fmt not in FORMATS:
        raise ValueError(f"Unknown dataset format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    if images < 1:
        raise ValueError(f"images must be at least 1 but got {images}.")
    if num_classes < 1:
        raise ValueError(f"num_classes must be at least 1 but got {num_classes}.")
    t0 = time.perf_counter()
    root = Path(root)
    image_dir = root / ("JPEGImages" if fmt == "voc" else "images")
    image_dir.mkdir(parents=True, exist_ok=True)
    stems, sizes, all_boxes = [], [], []
    total_bytes = landscape = 0
    # Numpy and PIL release the GIL in the heavy parts, so a few threads render in parallel;
    # the images come back in order and each has its own random stream: same bytes anyway.
    threads = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(threads) as pool:
        rendered = pool.map(lambda i: render_image(seed, i, num_classes), range(images))
        for i, (data, boxes, (w, h)) in enumerate(rendered):
            stem = f"{i:06d}"
            (image_dir / f"{stem}.jpg").write_bytes(data)
            landscape += w > h
            total_bytes += len(data)
            stems.append(stem)
            sizes.append((w, h))
            all_boxes.append(boxes)
    names = class_names(num_classes)
    _WRITERS[fmt](root, stems, sizes, all_boxes, names)
    n_boxes = int(sum(len(b) for b in all_boxes))
    stats = {
        "root": str(root),
        "format": fmt,
        "images": images,
        "seed": seed,
        "num_classes": num_classes,
        "total_bytes": total_bytes,
        "mean_kb": total_bytes / images / 1024,
        "boxes": n_boxes,
        "boxes_per_image": n_boxes / images,
        "landscape": int(landscape),
        "portrait": int(images - landscape),
        "seconds": time.perf_counter() - t0,
    }
    log.info(
        "generated %d %s images in %s: %.1f KB mean, %.2f boxes/image, %.1f s",
        images, fmt, root, stats["mean_kb"], stats["boxes_per_image"], stats["seconds"],
    )  # fmt: skip
    return stats


def _is_complete(root: Path, images: int, seed: int) -> bool:
    try:
        info = json.loads((root / MARKER).read_text())
    except (OSError, ValueError):
        return False
    return (
        info.get("images") == images
        and info.get("seed") == seed
        and info.get("version") == _GENERATOR_VERSION
    )


@contextlib.contextmanager
def _locked(lock_path: Path):
    """An exclusive lock on ``lock_path`` across processes (POSIX; no lock elsewhere)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: rename still keeps the data whole
        yield
        return
    with open(lock_path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def default_dataset(root: str | os.PathLike | None = None) -> str:
    """The embedded default dataset's directory, generated first if missing or incomplete.

    ``root`` defaults to :data:`DEFAULT_DATASET_DIR` (relative to the working directory); it
    holds :data:`DEFAULT_DATASET_IMAGES` YOLO-layout images (seed 0). A marker file is
    written last, into a temporary sibling directory that is then renamed into place, so an
    interrupted generation is redone; a lock file beside it makes concurrent callers wait for
    one generation instead of racing.
    """
    target = Path(root if root is not None else DEFAULT_DATASET_DIR)
    if _is_complete(target, DEFAULT_DATASET_IMAGES, DEFAULT_DATASET_SEED):
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target.parent / f".{target.name}.lock"):
        if _is_complete(target, DEFAULT_DATASET_IMAGES, DEFAULT_DATASET_SEED):
            return str(target)  # another process made it while we waited
        if target.exists():  # interrupted, or from an older generator
            shutil.rmtree(target)
        log.warning(
            "generating the default dataset (%d images) in %s", DEFAULT_DATASET_IMAGES, target
        )
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
        try:
            stats = make_dataset(
                tmp, images=DEFAULT_DATASET_IMAGES, fmt="yolo", seed=DEFAULT_DATASET_SEED
            )
            stats.update(version=_GENERATOR_VERSION, root=str(target))
            (tmp / MARKER).write_text(json.dumps(stats, indent=1) + "\n")
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return str(target)
