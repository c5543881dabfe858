"""A real study on the emulated accelerator, run once per session and shared (read-only) by the
study, report, best and dashboard tests: real measuring child processes, a real SQLite file."""

from __future__ import annotations

import os

import pytest
from search_helpers import E2E_OPTIONS, EmulatedStudy, run_cli


@pytest.fixture(scope="session")
def emulated_study(tiny_dataset: str, tmp_path_factory: pytest.TempPathFactory) -> EmulatedStudy:
    db_path = os.path.join(str(tmp_path_factory.mktemp("study")), "e2e.db")
    storage = f"sqlite:///{db_path}"
    base = ["run", *E2E_OPTIONS, "--data", tiny_dataset, "--storage", storage, "--study", "e2e"]
    first = run_cli([*base, "--trials", "6", "--confirm-rounds", "0"])
    assert first.exit_code == 0, first.output
    second = run_cli([*base, "--trials", "8", "--confirm-rounds", "1"])
    assert second.exit_code == 0, second.output
    return EmulatedStudy(storage=storage, db_path=db_path, name="e2e", first=first, second=second)
