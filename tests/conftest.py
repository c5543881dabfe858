"""Shared fixtures: small generated datasets (session-scoped, written once per test run)."""

from __future__ import annotations

import pytest

TINY_IMAGES = 16
TINY_SEED = 7


def _generate(tmp_path_factory: pytest.TempPathFactory, fmt: str) -> str:
    from loadersearch.workload.synthetic import make_dataset

    root = tmp_path_factory.mktemp(f"tiny-{fmt}")
    make_dataset(root, images=TINY_IMAGES, fmt=fmt, seed=TINY_SEED)
    return str(root)


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A generated YOLO-layout dataset of 16 VOC-like images (500x375 / 375x500, 20 classes).

    Shared by the whole session: copy it before changing anything in it.
    """
    return _generate(tmp_path_factory, "yolo")


@pytest.fixture(scope="session")
def tiny_voc(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same 16 images as ``tiny_dataset``, in Pascal VOC layout. Read-only."""
    return _generate(tmp_path_factory, "voc")


@pytest.fixture(scope="session")
def tiny_coco(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The same 16 images as ``tiny_dataset``, in COCO layout. Read-only."""
    return _generate(tmp_path_factory, "coco")
