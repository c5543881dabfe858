"""What the label readers share: image listing, split directories, label problems."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from loadersearch.errors import DatasetError

log = logging.getLogger(__name__)

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".webp", ".tif", ".tiff")
COORD_TOL = 1e-3  # YOLO coordinates may exceed [0, 1] by this much (rounding in exports)
SKIP_HINT = "fix it, or pass --skip-bad-samples to leave such images out (they are counted)"

# Each reader returns (relative image paths, per-image boxes (n, 5) [class, cx, cy, w, h]
# normalised float32, class names). Problems go through `problems`; a skipped image is left out.

class Problems:
    """Collects label problems: raises on the first one, or records it when skipping."""

    def __init__(self, skip: bool) -> None:
        self.skip = skip
        self.reasons: list[str] = []

    def __call__(self, where: str | os.PathLike, reason: str) -> None:
        msg = f"{where}: {reason}"
        if not self.skip:
            raise DatasetError(f"{msg}; {SKIP_HINT}.")
        log.warning("skipping %s", msg)
        self.reasons.append(msg)

def has_images(d: Path) -> bool:
    try:
        return any(e.name.lower().endswith(IMAGE_EXTS) for e in os.scandir(d))
    except OSError:
        return False

def list_images(d: Path) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(d):
        dirnames.sort()
        out.extend(
            os.path.join(dirpath, f) for f in sorted(filenames) if f.lower().endswith(IMAGE_EXTS)
        )
    return out

def pick_split_dir(base: Path, split: str | None, what: str) -> Path:
    if split is not None:
        if not (base / split).is_dir():
            choices = sorted(p.name for p in base.iterdir() if p.is_dir())
            raise DatasetError(f"No split {split!r} in {base} ({what}); found {choices}.")
        return base / split
    if has_images(base):
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

def xyxy_to_norm(cls, x1, y1, x2, y2, w: float, h: float) -> np.ndarray:
    return np.stack(
        [cls, (x1 + x2) / 2 / w, (y1 + y2) / 2 / h, (x2 - x1) / w, (y2 - y1) / h], axis=-1
    ).astype(np.float32)

@contextlib.contextmanager
def quiet_bomb_warning() -> Iterator[None]:
    """PIL's DecompressionBombWarning (an image over ``Image.MAX_IMAGE_PIXELS``) names no file:
    the dataset check names the file and its size once (decode.header_problem); every later
    open of it keeps quiet."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        yield


def pil_open(source: Any) -> Image.Image:
    """Pillow's own ``Image.open``. Importing Ultralytics replaces it, for the whole process,
    with a wrapper that meets the first file Pillow cannot identify by installing and
    registering a HEIF plugin (a pip install, or an ImportError offline), which would turn a
    corrupt JPEG into an ImportError instead of a named bad sample; its saved original is
    what Pillow itself does."""
    patches = sys.modules.get("ultralytics.utils.patches")
    opener = getattr(patches, "_image_open", None) or Image.open
    return opener(source)


def image_size(path: Path) -> tuple[int, int]:
    """Displayed (upright) size from the image header, without decoding the pixels."""
    with quiet_bomb_warning(), pil_open(path) as im:
        w, h = im.size
        orientation = im.getexif().get(0x0112, 1)
    return (h, w) if orientation in (5, 6, 7, 8) else (w, h)
