"""COCO JSON: ``annotations.json`` or ``annotations/*.json`` with ``bbox`` in pixels."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from loadersearch.errors import DatasetError
from loadersearch.workload._datasets._common import Problems, image_size, xyxy_to_norm
from loadersearch.workload._datasets.detect import coco_jsons


def read_coco(root: Path, split: str | None, problems: Problems):
    jsons = coco_jsons(root)
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
    if not jsons:
        raise DatasetError(
            f"No COCO annotations in {root}: expected annotations.json or annotations/*.json "
            "(a YOLO or VOC dataset: --data-format yolo or voc, or leave --data-format out)."
        )
    ann_path = jsons[0]
    try:
        doc = json.loads(ann_path.read_text())
        images = doc["images"]
        anns = doc.get("annotations", [])
        if not isinstance(images, list) or not isinstance(anns, list):
            raise TypeError("'images' and 'annotations' must be lists")
        if not all(isinstance(x, dict) for x in (*images, *anns)):
            raise TypeError("every entry of 'images' and 'annotations' must be an object")
        cats = sorted(c["id"] for c in doc.get("categories", []))
        cat_names = {c["id"]: c.get("name", str(c["id"])) for c in doc.get("categories", [])}
        if not cats:
            cats = sorted({a["category_id"] for a in anns})
            cat_names = {c: str(c) for c in cats}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise DatasetError(f"{ann_path}: not a COCO annotation file ({e!r}).") from e
    cat_index = {c: i for i, c in enumerate(cats)}
    # Where the images are: try the usual places with the first image that names its file.
    split_name = ann_path.stem.removeprefix("instances_")
    candidates = [root / "images", root / "images" / split_name, root / split_name, root]
    first = next((im["file_name"] for im in images if isinstance(im.get("file_name"), str)), "")
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
                w, h = image_size(file)
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
        boxes.append(xyxy_to_norm(*arr.T, w, h))
    return paths, boxes, [str(cat_names[c]) for c in cats]
