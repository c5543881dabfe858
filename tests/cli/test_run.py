"""`loadersearch run` with bad input: non-zero exit, one clear line, the database untouched."""

from __future__ import annotations

import hashlib
import os

import optuna
import pytest
from click.testing import CliRunner

from loadersearch.cli import cli


@pytest.fixture
def existing_db(tmp_path) -> str:
    path = tmp_path / "existing.db"
    study = optuna.create_study(study_name="kept", storage=f"sqlite:///{path}")
    study.enqueue_trial({"x": 1})
    return str(path)


def _fingerprint(path: str) -> tuple[str, int]:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_mtime_ns


PIPE = ["--dataset", "helpers.pipelines:make_dataset"]  # tests/helpers/pipelines.py


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workload", "gpu"], "Invalid value for '--workload'"),
        (["--space", "num_workers=12:2"], "inverted"),
        (["--space", "workers=2:4"], "unknown knob 'workers'"),
        (["--fix", "batch_size=big"], "whole numbers"),
        (["--trials", "0"], "Invalid value for '--trials'"),
        (["--data", "/nonexistent/dataset"], "dataset directory /nonexistent/dataset does not"),
        (["--vram-cap", "lots"], "cannot read the size 'lots'"),
        (["--vram-cap", "12"], "has no unit: 12GiB?"),
        (["--storage", "postgresql+psycopg://u:secret@127.0.0.1:1/db"], "cannot open"),
        (["--dataset", "nopkg_xyz.data:make"], "no module named 'nopkg_xyz' on the path"),
        (["--dataset", "helpers/pipelines.py"], "must read 'module:name'"),
        (["--model", "helpers.pipelines:make_model"], "needs its dataset"),
        ([*PIPE, "--arg", "datset.n=3"], "is not PART.KEY=VALUE with PART one of dataset,"),
        ([*PIPE, "--img-size", "64"], "img_size applies to the built-in YOLOv4-tiny workload"),
        ([*PIPE, "--step", "helpers.pipelines:make_step"], "emulated workload runs no model"),
    ],
)
def test_bad_input_exits_with_one_line_and_leaves_the_database_alone(
    existing_db: str, args: list[str], message: str
) -> None:
    before = _fingerprint(existing_db)
    storage = [] if "--storage" in args else ["--storage", f"sqlite:///{existing_db}"]
    result = CliRunner().invoke(cli, ["run", "--workload", "emulated", *storage, *args])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output
    assert "secret" not in result.output
    assert _fingerprint(existing_db) == before
    errors = [line for line in result.output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1


def test_a_missing_spec_file_is_one_clear_line(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOADERSEARCH_STORAGE", raising=False)
    result = CliRunner().invoke(cli, ["run", "--config", "nope.toml"])
    assert result.exit_code == 2
    assert "nope.toml not found" in result.output
    assert not (tmp_path / "studies").exists()


@pytest.mark.slow
def test_a_run_of_two_gloo_ranks_answers_per_rank_with_a_sampler_and_torchrun(
    tiny_dataset, tmp_path
) -> None:
    storage = f"sqlite:///{tmp_path / 'ddp.db'}"
    args = ["--workload", "emulated", "--data", tiny_dataset, "--img-size", "64"]
    plan = ["--epochs", "1", "--steps", "4", "--windows", "2", "--warmup-steps", "1"]
    result = CliRunner().invoke(
        cli,
        ["run", "--gpus", "2", *args, *plan, "--storage", storage, "--trials", "1"]
        + ["--no-baselines", "--confirm-rounds", "0", "--fix", "batch_size=4"],
    )
    assert result.exit_code == 0, result.output
    # the per-rank bound on this machine's CPUs is stated
    assert "num_workers and batch_size are per rank" in result.output
    assert "per rank: 2 x " in result.output
    assert "sampler = DistributedSampler(dataset, shuffle=True)" in result.output
    assert "DataLoader(dataset, sampler=sampler, drop_last=True, batch_size=4" in result.output
    assert "torchrun --standalone --nproc_per_node=2" in result.output

    best = CliRunner().invoke(cli, ["best", "--storage", storage, "--format", "python"])
    assert best.exit_code == 0, best.output
    sampler, loader, launch = best.output.strip().splitlines()
    assert sampler.startswith("sampler = DistributedSampler(")
    assert loader.startswith("loader = DataLoader(dataset, sampler=sampler,")
    assert "EMULATED" in loader and launch.startswith("# launch: torchrun")
    (trial,) = optuna.load_study(study_name=None, storage=storage).trials
    assert [r["rank"] for r in trial.user_attrs["ranks"]] == [0, 1]
    bound = max(1, (os.cpu_count() or 1) // 2)  # 2 ranks' workers within the CPUs
    assert f"num_workers 0..{bound} per rank" in result.output
    assert trial.params.get("num_workers", 0) <= bound


@pytest.mark.slow  # it measures (a user pipeline: no data fixture says so)
def test_a_run_of_a_user_pipeline_generates_no_built_in_dataset(tmp_path, monkeypatch) -> None:
    # Issue 22, 8: the dataset check generated the 49 MB built-in dataset in ./studies/data,
    # which a user pipeline never reads.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOADERSEARCH_STORAGE", raising=False)
    result = CliRunner().invoke(cli, [
        "run", *PIPE, "--arg", "dataset.n=16", "--arg", "dataset.size=8", "--workload",
        "emulated", "--emulated-ms", "1,0", "--epochs", "1", "--steps", "2",
        "--windows-per-epoch", "1", "--warmup-epochs", "0", "--fix", "batch_size=8",
        "--fix", "num_workers=0", "--trials", "1", "--no-baselines", "--confirm-rounds", "0",
        "--storage", f"sqlite:///{tmp_path / 'p.db'}", "--quiet",
    ])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "studies").exists()
