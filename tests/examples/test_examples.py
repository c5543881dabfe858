"""The examples in examples/, run as a user runs them, at a small size: the classification
script through the Python API (its functions live in the script's __main__), the
segmentation pipeline through `loadersearch run --config` with a custom collate."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

import loadersearch
from loadersearch.cli import cli
from loadersearch.report import open_study

pytestmark = pytest.mark.slow  # every example runs a study

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(ROOT, "examples")
# The tests check that the examples run, not their speed: one torch thread per measuring
# process, because two OpenMP threads spin-wait for each other on a busy 2-core machine
# (ResNet-18 steps ~10x slower there).
ONE_THREAD = {"OMP_NUM_THREADS": "1"}


def test_the_classification_script_tunes_imagefolder_and_resnet18(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'cls.db'}"
    script = os.path.join(EXAMPLES, "classification.py")
    args = ["--root", str(tmp_path / "shapes"), "--images", "32", "--size", "32",
            "--batch-size", "8", "--trials", "2", "--confirm-rounds", "0",
            "--storage", storage, "--study", "cls"]  # fmt: skip
    # Run from elsewhere: the measuring process finds the script's module by its directory.
    env = {**os.environ, **ONE_THREAD, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, script, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Paste into your training code:" in done.stdout
    study = open_study(storage, "cls")
    assert study.user_attrs["pipeline"] == {
        "dataset": "classification:make_dataset",
        "model": "classification:make_model",
        "step": "classification:make_step",
    }
    statuses = sorted(t.user_attrs["status"] for t in study.trials if t.state.is_finished())
    assert statuses in (["ok", "ok"], ["ok", "pruned"])  # the slower one may be pruned
    assert loadersearch.load_best(storage, "cls").batch_size == 8


def test_the_segmentation_spec_runs_with_its_padding_collate(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)  # the spec names examples.segmentation, imported from here
    for key, value in ONE_THREAD.items():
        monkeypatch.setenv(key, value)  # the measuring processes inherit it
    storage = f"sqlite:///{tmp_path / 'seg.db'}"
    args = ["run", "--config", "examples/segmentation.toml", "--trials", "2",
            "--confirm-rounds", "0", "--arg", "dataset.n=32", "--arg", "dataset.size=32",
            "--fix", "batch_size=8", "--storage", storage, "--study", "seg"]  # fmt: skip
    result = CliRunner().invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "Paste into your training code:" in result.output
    study = open_study(storage, "seg")
    pipeline = study.user_attrs["spec"]["workload"]["pipeline"]
    assert pipeline["collate"] == "examples.segmentation:pad_collate"
    assert pipeline["loss_kwargs"] == {"ignore_index": 255}
    assert pipeline["dataset_kwargs"] == {"size": 32, "n": 32}
    statuses = sorted(t.user_attrs["status"] for t in study.trials if t.state.is_finished())
    assert statuses in (["ok", "ok"], ["ok", "pruned"])  # the slower one may be pruned


def test_the_ultralytics_script_answers_in_model_train_terms(tmp_path) -> None:
    pytest.importorskip("ultralytics")
    storage = f"sqlite:///{tmp_path / 'yolo.db'}"
    script = os.path.join(EXAMPLES, "ultralytics_tune.py")
    args = ["--root", str(tmp_path / "yolo"), "--images", "8", "--imgsz", "64", "--batch", "4",
            "--cache", "false", "--trials", "1", "--confirm-rounds", "0",
            "--storage", storage, "--study", "yolo"]  # fmt: skip
    env = {**os.environ, **ONE_THREAD, "YOLO_CONFIG_DIR": str(tmp_path / "yolo-config"),
           "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}  # fmt: skip
    done = subprocess.run([sys.executable, script, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    data = str(tmp_path / "yolo" / "data.yaml")
    assert f'model.train(data="{data}", imgsz=64, workers=' in done.stdout
    assert f"yolo train data={data} model=yolo11n.yaml imgsz=64 workers=" in done.stdout
    assert loadersearch.load_best(storage, "yolo-cache-false").batch_size == 4
