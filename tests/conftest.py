"""Shared fixtures: small generated datasets and one real finished study (session-scoped,
made once per test run)."""

from __future__ import annotations

import os

import pytest
from search_helpers import E2E_OPTIONS, EmulatedStudy, run_cli

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


@pytest.fixture(scope="session")
def emulated_study(tiny_dataset: str, tmp_path_factory: pytest.TempPathFactory) -> EmulatedStudy:
    """A real study on the emulated accelerator, run once per session and shared (read-only)
    by the study, report, best and dashboard tests: real measuring child processes, a real
    SQLite file, a resume that confirms."""
    db_path = os.path.join(str(tmp_path_factory.mktemp("study")), "e2e.db")
    storage = f"sqlite:///{db_path}"
    base = ["run", *E2E_OPTIONS, "--data", tiny_dataset, "--storage", storage, "--study", "e2e"]
    first = run_cli([*base, "--trials", "6", "--confirm-rounds", "0"])
    assert first.exit_code == 0, first.output
    second = run_cli([*base, "--trials", "8", "--confirm-rounds", "1"])
    assert second.exit_code == 0, second.output
    return EmulatedStudy(storage=storage, db_path=db_path, name="e2e", first=first, second=second)
