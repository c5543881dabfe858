"""A database holds data, not code: a study's stored pipeline (``module:callable`` references
with JSON arguments) is imported by ``worker`` and ``diagnose`` only when it names the user's
own code, and ``report``, ``best``, ``dashboard``, ``load_best`` and a resume by ``run``
import nothing from it. Each database here is a real pipeline study (emulated workload,
tests/helpers/pipelines.py) whose stored references were then rewritten, as an attacker with
write access to the database, or whoever sent it, could."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid

import optuna
import pytest
from click.testing import CliRunner
from helpers.cliproc import cli_env
from helpers.studies import dashboard_server, get_json, study_id

from loadersearch.cli import cli

STUDY = "piped"
# the smallest real study of a user pipeline: one 2-step window a trial, no probe, no baselines
PIPE_RUN = [
    "--dataset", "helpers.pipelines:make_dataset", "--arg", "dataset.n=32",
    "--arg", "dataset.size=8", "--workload", "emulated", "--emulated-ms", "1,0.1",
    "--epochs", "1", "--steps", "2", "--windows-per-epoch", "1", "--warmup-epochs", "0",
    "--space", "num_workers=0:1", "--fix", "batch_size=8", "--no-probe", "--no-baselines",
    "--confirm-rounds", "0", "--quiet",
]  # fmt: skip

# A module that says it was imported (a file beside it) and builds a small dataset.
MARKED = """\
import os
import torch
from torch.utils.data import Dataset

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "IMPORTED"), "a") as f:
    f.write("imported\\n")


class Tiny(Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return torch.zeros(3, 8, 8), i % 2


def make_dataset(n=16):
    return Tiny(n)
"""


@pytest.fixture(scope="module")
def pipeline_db(tmp_path_factory) -> str:
    """A finished study of helpers.pipelines (2 trials), made once for the module."""
    db = tmp_path_factory.mktemp("piped") / "piped.db"
    result = CliRunner().invoke(
        cli, ["run", "--storage", f"sqlite:///{db}", "--study", STUDY, "--trials", "2", *PIPE_RUN]
    )
    assert result.exit_code == 0, result.output
    return str(db)


def _crafted(pipeline_db: str, where, dataset: str, kwargs: dict) -> str:
    """A copy of the pipeline study in ``where`` whose stored dataset is ``dataset(**kwargs)``;
    its URL."""
    url = _copy(pipeline_db, where / f"crafted-{uuid.uuid4().hex[:6]}.db")
    study = optuna.load_study(study_name=STUDY, storage=url)
    spec = study.user_attrs["spec"]
    spec["workload"]["pipeline"].update(dataset=dataset, dataset_kwargs=kwargs)
    study.set_user_attr("spec", spec)
    study.set_user_attr("pipeline", {"dataset": dataset})
    study.set_user_attr("workload_description", "a harmless description")
    return url


def _copy(db: str, to) -> str:
    """A copy of the SQLite database ``db`` at ``to`` (its write-ahead log included); its URL."""
    with sqlite3.connect(db) as src, sqlite3.connect(to) as dst:
        src.backup(dst)
    return f"sqlite:///{to}"


def _marked_module(where) -> str:
    """A module in ``where`` that leaves ``where/IMPORTED`` when imported; its name."""
    name = f"lsmark_{uuid.uuid4().hex[:8]}"
    where.mkdir(parents=True, exist_ok=True)
    (where / f"{name}.py").write_text(MARKED)
    return name


def _cli(args: list[str], cwd, env: dict[str, str], timeout: float = 240):
    proc = subprocess.run(
        [sys.executable, "-m", "loadersearch", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return proc.returncode, proc.stdout + proc.stderr


def _env(tmp_path, *path: str) -> dict[str, str]:
    env = cli_env(tmp_path)
    entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*entries, *map(str, path)])
    return env


def _one_error_line(out: str) -> str:
    assert "Traceback" not in out, out
    errors = [line for line in out.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, out
    return errors[0]


def test_a_worker_runs_no_standard_library_callable_a_database_names(pipeline_db, tmp_path):
    # the red team's case: the stored dataset set to os:system with a command as its argument
    url = _crafted(pipeline_db, tmp_path, "os:system", {"command": "touch PWNED"})
    env = _env(tmp_path)
    for extra in ([], ["--trust-pipeline"]):
        code, out = _cli(["worker", "--storage", url, "--study", STUDY, "--trials", "4", *extra],
                         tmp_path, env)  # fmt: skip
        assert code == 2, out
        line = _one_error_line(out)
        assert "os:system(command='touch PWNED')" in line and "standard library" in line
        assert not (tmp_path / "PWNED").exists()


@pytest.mark.parametrize(
    ("ref", "kwargs"),
    [
        ("subprocess:getoutput", {"cmd": "touch PWNED"}),
        ("builtins:exec", {"source": "open('PWNED', 'w')"}),
        # the user's own module, but the callable is the one it imported from the library
        ("{mine}:os.system", {"command": "touch PWNED"}),
        ("{mine}:make_dataset.__globals__", {}),
    ],
)
def test_the_standard_library_is_refused_even_through_a_trusted_module(
    pipeline_db, tmp_path, ref, kwargs
):
    mine = _marked_module(tmp_path)  # in the working directory: the user's code
    url = _crafted(pipeline_db, tmp_path, ref.format(mine=mine), kwargs)
    args = ["worker", "--storage", url, "--study", STUDY, "--trials", "4", "--trust-pipeline"]
    code, out = _cli(args, tmp_path, _env(tmp_path))
    assert code == 2, out
    line = _one_error_line(out)
    assert ref.format(mine=mine) in line
    assert "standard library" in line or "private attribute" in line
    assert not (tmp_path / "PWNED").exists()


def test_a_worker_imports_a_module_outside_its_directory_only_from_a_named_one(
    pipeline_db, tmp_path
):
    elsewhere, cwd = tmp_path / "elsewhere", tmp_path / "here"
    cwd.mkdir()
    mark = _marked_module(elsewhere)
    url = _crafted(pipeline_db, tmp_path, f"{mark}:make_dataset", {"n": 16})
    args = ["worker", "--storage", url, "--study", STUDY, "--trials", "3"]
    # importable (on PYTHONPATH), but not under the working directory: refused, not imported
    code, out = _cli(args, cwd, _env(tmp_path, elsewhere))
    assert code == 2, out
    line = _one_error_line(out)
    assert f"{mark}:make_dataset(n=16)" in line
    assert str(elsewhere / f"{mark}.py") in line
    assert "--pipeline-path" in line and "--trust-pipeline" in line
    assert not (elsewhere / "IMPORTED").exists()
    # named with --pipeline-path (and only there: not on PYTHONPATH), it is shown, then run
    code, out = _cli([*args, "--pipeline-path", str(elsewhere)], cwd, _env(tmp_path))
    assert code == 0, out
    assert f"dataset {mark}:make_dataset(n=16) from {elsewhere / mark}.py" in out
    assert out.index(f"{mark}:make_dataset(n=16)") < out.index("DataLoader(")
    # the progress line too says what runs, not the study's free-text description
    described = f"trials finished; your pipeline (emulated workload): dataset {mark}:make_dataset"
    assert f"{described}(n=16)" in out
    assert (elsewhere / "IMPORTED").exists()
    trials = optuna.load_study(study_name=STUDY, storage=url).get_trials()
    assert [t.user_attrs.get("dataset_images") for t in trials][-1] == 16


@pytest.mark.parametrize(
    "command",
    [
        ["report", "--out", "report-out"],
        ["best"],
        ["dashboard"],
        ["load_best"],
        ["run", "--trials", "3", *PIPE_RUN[6:]],  # a resume that does not give the pipeline
    ],
    ids=["report", "best", "dashboard", "load_best", "run"],
)
def test_reading_commands_import_nothing_a_database_names(
    pipeline_db, tmp_path, command, tiny_dataset
):
    # the module is in the working directory, where a worker would import it: these must not
    mark = _marked_module(tmp_path)
    url = _crafted(pipeline_db, tmp_path, f"{mark}:make_dataset", {})
    env = _env(tmp_path, tmp_path)
    if command == ["dashboard"]:
        with dashboard_server(url, cwd=tmp_path, env=env) as base:
            assert get_json(f"{base}/api/studies/{study_id(base, STUDY)}")["trials"]
    elif command == ["load_best"]:
        code = f"import loadersearch; print(loadersearch.load_best({url!r}, {STUDY!r}))"
        proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
    else:
        extra = ["--data", tiny_dataset] if command[0] == "run" else []
        code, out = _cli([*command, *extra, "--storage", url, "--study", STUDY], tmp_path, env)
        assert code == (2 if command[0] == "run" else 0), out
        if command[0] == "run":
            assert "different spec" in _one_error_line(out)
    assert not (tmp_path / "IMPORTED").exists()


def test_diagnose_refuses_a_study_pipeline_outside_the_working_directory(pipeline_db, tmp_path):
    elsewhere, cwd = tmp_path / "elsewhere", tmp_path / "here"
    cwd.mkdir()
    mark = _marked_module(elsewhere)
    url = _crafted(pipeline_db, tmp_path, f"{mark}:make_dataset", {})
    code, out = _cli(["diagnose", "--storage", url, "--study", STUDY, "--out", "d"], cwd,
                     _env(tmp_path, elsewhere))  # fmt: skip
    assert code == 2, out
    line = _one_error_line(out)
    assert f"{mark}:make_dataset()" in line and "--pipeline-path" in line
    assert not (elsewhere / "IMPORTED").exists()
    study = optuna.load_study(study_name=STUDY, storage=url)
    assert "diagnosis_pair" not in study.user_attrs


TINY = ["--device", "cpu", "--epochs", "2", "--steps", "2", "--windows", "1"]
TINY += ["--warmup-steps", "1", "--max-workers", "1", "--no-remedies"]


def test_diagnose_measures_the_study_s_own_pipeline_and_stores_only_that(pipeline_db, tmp_path):
    url = _copy(pipeline_db, tmp_path / "copy.db")
    base = ["diagnose", "--storage", url, "--study", STUDY, *TINY]
    measured = "dataset helpers.pipelines:make_dataset(n=32, size=8)"
    # another workload than the study's (the loader alone): diagnosed, not stored in the study
    other = CliRunner().invoke(cli, [*base, "--workload", "loader", "--out", str(tmp_path / "o")])
    assert other.exit_code == 0, other.output
    assert f"workload: your pipeline (loader workload): {measured}" in other.output
    assert "not stored in study 'piped'" in other.output and "kind: the study's" in other.output
    assert "diagnosis_pair" not in optuna.load_study(study_name=STUDY, storage=url).user_attrs
    # the study's own workload: its pipeline, named in the header, and stored
    out = tmp_path / "d"
    result = CliRunner().invoke(cli, [*base, "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"{measured} from {os.path.abspath('tests/helpers/pipelines.py')}" in result.output
    assert f"workload: your pipeline (emulated workload): {measured}" in result.output
    assert "YOLOv4" not in result.output
    d = json.loads((out / "diagnosis.json").read_text())
    assert d["workload"]["pipeline"]["dataset"] == "helpers.pipelines:make_dataset"
    assert d["workload"]["pipeline"]["dataset_kwargs"] == {"n": 32, "size": 8}
    pair = optuna.load_study(study_name=STUDY, storage=url).user_attrs["diagnosis_pair"]
    assert pair["summary"] == d["summary"]


def test_a_worker_writes_its_cache_where_its_machine_says_not_the_database(tmp_path):
    import dataclasses

    from helpers.studies import quick_settings

    from loadersearch import fingerprint
    from loadersearch.search import create_or_resume_study, join_study
    from loadersearch.workload import WorkloadSpec

    theirs = str(tmp_path / "their-choice")
    workload = WorkloadSpec(kind="emulated", cache="memmap", cache_dir=theirs)
    settings = dataclasses.replace(quick_settings(tmp_path), workload=workload)
    create_or_resume_study(settings, fingerprint(), create=True)
    stored = optuna.load_study(study_name="t", storage=settings.storage).user_attrs["spec"]
    assert stored["workload"]["cache_dir"] == theirs
    joined, _ = join_study("t", settings.storage, trials=3, allow_mixed_hardware=False)
    assert joined.workload.cache == "memmap" and joined.workload.cache_dir is None
