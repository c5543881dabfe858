"""Pascal VOC: ``JPEGImages/`` + ``Annotations/*.xml``, optional ``ImageSets/Main``."""

from __future__ import annotations

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from loadersearch.errors import DatasetError
from loadersearch.workload._datasets._common import Problems, image_size, xyxy_to_norm


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

def read_voc(root: Path, split: str | None, problems: Problems):
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
                w, h = image_size(img_dir / name)
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
            boxes.append(xyxy_to_norm(*arr.T, w, h))
        else:
            boxes.append(np.zeros((0, 5), np.float32))
    return paths, boxes, names
