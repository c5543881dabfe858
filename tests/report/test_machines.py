"""``report --machines``: over every study of a (shared) storage, one row per hardware class
with its best configuration, its speedup over the rules of thumb and the studies behind it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import optuna
from helpers.studies import HOST, quick_settings, run_cli, steady_measure

from loadersearch import Hardware
from loadersearch.search import run_study

RTX = Hardware(host="gpu-box", cpu_count=4, physical_cores=4, gpu_count=1,
               gpu_model="NVIDIA GeForce RTX 2060")  # fmt: skip


def _study(url: str, name: str, hardware: Hardware, best_workers: int) -> None:
    """A finished study whose fastest configuration has ``best_workers`` workers (an emulated
    rate that peaks there), baselines included, confirmed."""

    def measure(workload, config, plan, **kw):  # noqa: ANN001, ANN003
        rate = 100.0 + 50.0 * (4 - abs(config.num_workers - best_workers)) + config.batch_size
        return steady_measure(rate)(workload, config, plan, **kw)

    settings = quick_settings(Path("."), trials=8)
    settings = dataclasses.replace(
        settings,
        study_name=name,
        storage=url,
        confirm_rounds=1,
        space=dataclasses.replace(settings.space, num_workers=(0, 4)),
    )
    run_study(settings, measure_fn=measure, hardware=hardware)


def test_one_row_per_hardware_class_with_its_studies_and_speedup(tmp_path, study_name):
    # On a SQLite file: the report reads the studies through Optuna's storage, which the
    # storage tests run on every backend (tests/storage); three whole studies on PostgreSQL
    # took 61 s against 22 s here (load 15) and checked nothing more. The file holds another
    # application's study too, as a shared server holds others'.
    shared_url = f"sqlite:///{tmp_path / 'machines.db'}"
    _study(shared_url, f"{study_name}-a", HOST, best_workers=1)
    _study(shared_url, f"{study_name}-b", HOST, best_workers=1)
    _study(shared_url, f"{study_name}-c", RTX, best_workers=3)
    optuna.create_study(study_name=f"{study_name}-foreign", storage=shared_url)
    mine = ["--storage", shared_url, "--study", f"{study_name}-*"]  # a server holds others'
    result = run_cli(["report", "--machines", "--json", *mine])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    rows = {r["gpu"]: r for r in out["machines"]}
    cpu, gpu = rows["no GPU"], rows["1 x NVIDIA GeForce RTX 2060"]
    assert cpu["cpus"] == "2 CPUs (2 cores)" and cpu["studies"] == 2
    assert cpu["emulated_studies"] == 2
    assert cpu["best"].startswith("w1 b16") and cpu["workers"] == "1"
    assert gpu["cpus"] == "4 CPUs (4 cores)" and gpu["studies"] == 1
    assert gpu["best"].startswith("w3 b16") and gpu["workers"] == "3"
    # The winner beats the rules of thumb (the article's 2 x cores, Ultralytics') it measured.
    assert cpu["speedup"] > 1.0 and gpu["speedup"] > 1.0
    assert any("foreign" in s and "not a loadersearch study" in s for s in out["skipped"])

    table = run_cli(["report", "--machines", *mine])
    assert table.exit_code == 0, table.output
    assert "NVIDIA" in table.output and "emulated)" in table.output  # the table wraps


def test_a_pattern_that_matches_no_study_is_an_error_listing_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'm.db'}"
    optuna.create_study(study_name="yolo-a", storage=url)
    result = run_cli(["report", "--machines", "--storage", url, "--study", "zz*"])
    assert result.exit_code == 2, result.output
    assert "no study name matches 'zz*' (studies there: yolo-a)" in result.output


def test_machines_refuses_the_report_page_option(tmp_path):
    result = run_cli(["report", "--machines", "--out", str(tmp_path / "r"), "--storage",
                      f"sqlite:///{tmp_path / 'x.db'}"])  # fmt: skip
    assert result.exit_code == 2 and "drop --out" in result.output
