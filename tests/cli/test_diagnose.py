"""``loadersearch diagnose``: the verdict, the files it writes, what it says about the page
cache it could not evict, and its refusals."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pytest
from click.testing import CliRunner

from loadersearch.cli import cli

TINY = ["--img-size", "64", "--device", "cpu", "--epochs", "2", "--steps", "2", "--windows", "1"]
TINY += ["--warmup-steps", "1", "--max-workers", "1", "--no-remedies"]


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_dataset_on_tmpfs_is_diagnosed_and_the_failed_eviction_is_said(tiny_dataset, tmp_path):
    # tmpfs keeps its pages whatever posix_fadvise says: the fetch stall cannot be measured.
    # 300 ms of compute per batch of 2 (CI under load once waited >10% of 100 ms for 2 decodes)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        data = shutil.copytree(tiny_dataset, os.path.join(shm, "data"))
        out = tmp_path / "out"
        args = ["diagnose", "--workload", "emulated", "--emulated-ms", "300,0", "--data", data]
        args += ["--num-workers", "1", "--batch-size", "2", "--persistent-workers"]
        result = CliRunner().invoke(cli, [*args, *TINY, "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.output[result.output.index("{") :])
    assert d["evicted"] is False
    assert any("could not evict the dataset from the page cache" in n for n in d["notes"])
    assert d["verdict"] == "compute-bound"
    for name in ("diagnosis.json", "timelines.png", "timelines.html", "scaling.png"):
        assert (out / name).stat().st_size > 0


def test_conflicting_loader_options_exit_2_without_a_traceback():
    result = CliRunner().invoke(cli, ["diagnose", "--prefetch-factor", "4"])
    assert result.exit_code == 2
    assert "prefetch_factor=4 needs num_workers > 0" in result.output
    assert "Traceback" not in result.output


def test_a_study_winner_is_diagnosed_and_report_draws_defaults_beside_it(emulated_study, tmp_path):
    import optuna

    db = tmp_path / "copy.db"  # the session's study is shared read-only: diagnose a copy
    shutil.copy(emulated_study.db_path, db)
    storage = f"sqlite:///{db}"
    out = tmp_path / "diag"
    result = CliRunner().invoke(cli, ["diagnose", "--storage", storage, *TINY, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "diagnosing the winner of study 'e2e'" in result.output
    study = optuna.load_study(study_name="e2e", storage=storage)
    winner = json.loads(CliRunner().invoke(cli, ["best", "--storage", storage]).output)
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["config"] == winner["config"]  # the confirmed winner, as `best` names it
    pair = study.user_attrs["diagnosis_pair"]
    assert pair["summary"] == d["summary"]
    assert pair["default"]["config"]["num_workers"] == 0  # the winner may be the default too
    report = CliRunner().invoke(
        cli, ["report", "--storage", storage, "--out", str(tmp_path / "r")]
    )
    assert report.exit_code == 0, report.output
    assert (tmp_path / "r" / "default-vs-winner.png").stat().st_size > 0
    index = (tmp_path / "r" / "index.html").read_text()
    assert 'id="diagnosis"' in index and "default-vs-winner.png" in index


def test_a_corrupt_image_stops_the_diagnosis_at_its_first_measurement_naming_the_file(
    tiny_dataset, tmp_path
):
    data = tmp_path / "data"
    (data / "images").mkdir(parents=True)
    (data / "labels").mkdir()
    for k in range(2):  # batches of 2: every batch meets the bad image
        shutil.copy(os.path.join(tiny_dataset, "images", f"{k:06d}.jpg"), data / "images")
        shutil.copy(os.path.join(tiny_dataset, "labels", f"{k:06d}.txt"), data / "labels")
    shutil.copy(os.path.join(tiny_dataset, "classes.txt"), data)
    bad = data / "images" / "000001.jpg"
    bad.write_bytes(bad.read_bytes()[:3000])  # truncated: a fine header, decoding fails
    out = tmp_path / "out"
    args = ["diagnose", "--workload", "emulated", "--emulated-ms", "1,0", "--data", str(data),
            "--num-workers", "0", "--batch-size", "2", *TINY, "--out", str(out)]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    [line] = [ln for ln in result.output.splitlines() if ln.startswith("Error")]
    assert str(bad) in line and "--skip-bad-samples" in line and "resume" not in line
    assert "0.0%" not in result.output  # no table of failed measurements
    assert not (out / "diagnosis.json").exists()  # stopped before anything else was measured
