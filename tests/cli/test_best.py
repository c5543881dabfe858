"""The answer for scripts: `loadersearch best` in each format, `load_best`, `report`."""

from __future__ import annotations

import json
import os

import pytest
from helpers.studies import EmulatedStudy, run_cli

import loadersearch
from loadersearch import LoaderConfig


def test_best_as_json_is_the_confirmed_winner(emulated_study: EmulatedStudy) -> None:
    result = run_cli(["best", "--storage", emulated_study.storage, "--study", "e2e"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["confirmed"] is True and data["emulated"] is True
    assert data["images_per_s"] > 0
    config = LoaderConfig.from_dict(data["config"])
    assert config.batch_size == 16  # twice the images/s of batch 8 on this emulated device


def test_best_as_python_is_a_dataloader_line(emulated_study: EmulatedStudy) -> None:
    result = run_cli(["best", "--storage", emulated_study.storage, "--format", "python"])
    assert result.exit_code == 0, result.output
    line = result.output.strip()
    assert line.startswith("DataLoader(dataset, ") and "batch_size=16" in line


def test_best_as_env_gives_one_variable_per_knob(emulated_study: EmulatedStudy) -> None:
    result = run_cli(["best", "--storage", emulated_study.storage, "--format", "env"])
    assert result.exit_code == 0, result.output
    env = dict(line.split("=", 1) for line in result.output.split())
    assert env["LOADERSEARCH_BATCH_SIZE"] == "16"
    assert env["LOADERSEARCH_PIN_MEMORY"] in ("true", "false")


def test_load_best_returns_the_same_config_as_best(emulated_study: EmulatedStudy) -> None:
    config = loadersearch.load_best(emulated_study.storage, "e2e")
    data = json.loads(run_cli(["best", "--storage", emulated_study.storage]).output)
    assert config == LoaderConfig.from_dict(data["config"])


@pytest.mark.slow
def test_best_names_the_studies_when_the_storage_holds_several(tmp_path) -> None:
    import optuna

    storage = f"sqlite:///{tmp_path / 'two.db'}"
    for name in ("a", "b"):
        optuna.create_study(study_name=name, storage=storage)
    result = run_cli(["best", "--storage", storage])
    assert result.exit_code == 2
    assert "holds 2 studies (a, b); name one with --study" in result.output


def test_report_writes_the_ranked_table_importance_and_plots(
    emulated_study: EmulatedStudy, tmp_path
) -> None:
    out = tmp_path / "plots"
    result = run_cli(["report", "--storage", emulated_study.storage, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "Trials of e2e, best first" in result.output
    assert "Parameter importance, PED-ANOVA on" in result.output
    assert "Against the baselines" in result.output
    assert "Where the trials' time went" in result.output
    assert "planned measured epochs" in result.output
    assert "the trials took" in result.output and "the time of the epochs they measured" in (
        result.output
    )
    files = set(os.listdir(out))
    assert {"history.html", "importance.html", "history.png", "importance.png"} <= files
    assert "contour_workers_batch.html" in files
