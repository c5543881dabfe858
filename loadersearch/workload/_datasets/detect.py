"""Telling YOLO, VOC and COCO layouts apart from a directory."""

from __future__ import annotations

import os
from pathlib import Path

from loadersearch.errors import DatasetError


def coco_jsons(root: Path) -> list[Path]:
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
    if coco_jsons(root):
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
