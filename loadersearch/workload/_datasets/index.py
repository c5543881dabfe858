"""A dataset's index (image paths, boxes, class names) read and checked without torch, and the
check a run makes before its first trial.

:func:`read_index` is what :func:`~loadersearch.workload._datasets.open_dataset` builds the
dataset from, in every measuring process. :func:`check_dataset` reads the same index once in
the parent, and opens every image's header as well, so that a dataset that cannot be used is
refused before a study or a trial exists for it (a bad dataset creates no trial), and what
``skip_bad_samples`` leaves out is known, counted and shown.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from loadersearch.errors import DatasetError
from loadersearch.workload._datasets._common import SKIP_HINT, Problems, log
from loadersearch.workload._datasets.coco import read_coco
from loadersearch.workload._datasets.decode import header_problem
from loadersearch.workload._datasets.detect import detect_format
from loadersearch.workload._datasets.skipped import RECORDED_NAMES
from loadersearch.workload._datasets.voc import read_voc
from loadersearch.workload._datasets.yolo import read_yolo
from loadersearch.workload._spec import FORMATS

_READERS = {"yolo": read_yolo, "voc": read_voc, "coco": read_coco}
# "file: reason" kept when reporting skipped samples (the counts are always exact)
SHOWN_REASONS = RECORDED_NAMES


@dataclass
class DatasetIndex:
    """What the labels say: images (relative to ``root``), their boxes, the class names."""

    root: str
    fmt: str
    paths: list[str]
    boxes: list[np.ndarray]
    class_names: list[str]
    skipped_reasons: list[str] = field(default_factory=list)  # left out (skip_bad_samples)


def read_index(
    root: str | os.PathLike,
    fmt: str | None = None,
    *,
    split: str | None = None,
    skip_bad_samples: bool = False,
) -> DatasetIndex:
    """Read and check every label of the dataset at ``root`` (see the package docstring for
    the layouts and for what each kind of bad data gets)."""
    root = Path(root)
    if fmt is None:
        fmt = detect_format(root)
    elif fmt not in FORMATS:
        raise DatasetError(f"Unknown dataset format {fmt!r}; choose one of {', '.join(FORMATS)}.")
    elif not root.is_dir():
        detect_format(root)  # raises the missing-directory error
    problems = Problems(skip_bad_samples)
    try:
        paths, boxes, names = _READERS[fmt](root, split, problems)
    except FileNotFoundError as e:
        raise DatasetError(
            f"{root} does not look like a {fmt.upper()} dataset: {e.filename} is missing."
        ) from e
    if not paths:
        skipped = f", {len(problems.reasons)} left out as bad" if problems.reasons else ""
        raise DatasetError(f"No usable images in {root} ({fmt} layout{skipped}).")
    if problems.reasons:
        log.warning("left out %d bad images of %s", len(problems.reasons), root)
    return DatasetIndex(str(root), fmt, paths, boxes, names, problems.reasons)


@dataclass
class DatasetCheck:
    """The outcome of :func:`check_dataset`: usable images, and what is left out and why."""

    root: str
    fmt: str
    images: int  # images a measurement will load
    left_out: int = 0  # images left out for their labels (skip_bad_samples)
    undecodable: int = 0  # images whose file is not an image (skip_bad_samples replaces them)
    reasons: list[str] = field(default_factory=list)  # the first RECORDED_NAMES, "file: reason"

    def describe(self) -> str | None:
        """One sentence for the user, or None when nothing is skipped."""
        parts = []
        if self.left_out:
            parts.append(f"{self.left_out} left out for bad labels")
        if self.undecodable:
            parts.append(f"{self.undecodable} not decodable (each replaced by the next image)")
        if not parts:
            return None
        # each file is named in a warning of its own (check_dataset, read_index)
        return (
            f"--skip-bad-samples: {' and '.join(parts)} of {self.images + self.left_out} images "
            f"in {self.root}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "images": self.images,
            "left_out": self.left_out,
            "undecodable": self.undecodable,
            "reasons": self.reasons,
        }


def check_dataset(
    root: str | os.PathLike,
    fmt: str | None = None,
    *,
    split: str | None = None,
    skip_bad_samples: bool = False,
) -> DatasetCheck:
    """Check the whole dataset before a study measures it: every label (as
    :func:`read_index`) and every image's header. Raises :class:`DatasetError` naming the
    first problem and the fix; with ``skip_bad_samples`` counts the problems instead."""
    index = read_index(root, fmt, split=split, skip_bad_samples=skip_bad_samples)
    reasons = list(index.skipped_reasons[:SHOWN_REASONS])
    undecodable = 0
    for rel in index.paths:
        path = os.path.join(index.root, rel)
        problem = header_problem(path)
        if problem is None:
            continue
        if not skip_bad_samples:
            raise DatasetError(f"{path}: {problem}; {SKIP_HINT}.")
        log.warning("skipping %s: %s (replaced by the next image)", path, problem)
        undecodable += 1
        if len(reasons) < SHOWN_REASONS:
            reasons.append(f"{path}: {problem}")
    if undecodable == len(index.paths):
        raise DatasetError(f"No image in {index.root} can be decoded ({undecodable} tried).")
    return DatasetCheck(
        root=index.root,
        fmt=index.fmt,
        images=len(index.paths),
        left_out=len(index.skipped_reasons),
        undecodable=undecodable,
        reasons=reasons,
    )
