"""YOLO txt labels: ``images/`` + ``labels/``, one ``class cx cy w h`` line per box."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from loadersearch.errors import DatasetError
from loadersearch.workload._datasets._common import (
    COORD_TOL,
    Problems,
    list_images,
    log,
    pick_split_dir,
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
        if min(cx, cy, w, h) < -COORD_TOL or max(cx, cy, w, h) > 1 + COORD_TOL:
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

def read_yolo(root: Path, split: str | None, problems: Problems):
    image_dir = pick_split_dir(root / "images", split, "YOLO images")
    rel = image_dir.relative_to(root / "images")
    label_dir = root / "labels" / rel
    if not label_dir.is_dir():
        log.warning("no label folder %s: every image is a background image", label_dir)
    names = _yolo_names(root)
    nc = len(names) if names else None
    paths, boxes = [], []
    for full in list_images(image_dir):
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
