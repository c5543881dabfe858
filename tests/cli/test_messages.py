"""The docs promise (docs/usage.md, "Exit codes") one line naming the problem and the fix, and
no traceback without --debug: every message case of issue 10, each checked for exactly that."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner, Result

from loadersearch.cli import cli

FAST = [
    "--workload", "emulated", "--img-size", "64", "--epochs", "1", "--steps", "2",
    "--windows-per-epoch", "1", "--warmup-epochs", "0", "--no-probe", "--confirm-rounds", "0",
    "--emulated-ms", "1,0.1",
]  # fmt: skip
BENCH_FAST = ["--img-size", "64", "--epochs", "1", "--steps", "2", "--windows", "1",
              "--warmup-epochs", "0"]  # fmt: skip


def one_error_line(output: str) -> str:
    """The one "Error: ..." line of ``output``; fails on a traceback or on several."""
    assert "Traceback" not in output, output
    errors = [line for line in output.splitlines() if line.startswith("Error")]
    assert len(errors) == 1, output
    return errors[0]


def invoke(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args)


def cli_process(args: list[str], env: dict[str, str] | None = None, shell_prefix: str = ""):
    """``loadersearch ARGS`` in a fresh process (optionally after shell commands such as a
    ``ulimit``); returns (exit code, stdout + stderr)."""
    command = [sys.executable, "-m", "loadersearch", *args]
    if shell_prefix:
        command = ["sh", "-c", f'{shell_prefix}; exec "$@"', "sh", *command]
    done = subprocess.run(
        command, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=300
    )
    return done.returncode, done.stdout + done.stderr


def copy_yolo(src: str, dst: Path, n: int = 8) -> Path:
    for sub, ext in (("images", ".jpg"), ("labels", ".txt")):
        (dst / sub).mkdir(parents=True)
        for k in range(n):
            shutil.copy(Path(src) / sub / f"{k:06d}{ext}", dst / sub / f"{k:06d}{ext}")
    shutil.copy(Path(src) / "classes.txt", dst / "classes.txt")
    return dst


# ------------------------------------------------------------------------ bad values


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ('[study]\ntrials = "abc"\n', "[study] trials must be a whole number but got 'abc'"),
        ('[study]\nseed = "abc"\n', "[study] seed must be a whole number but got 'abc'"),
        ("[space]\nfix = 3\n", "[space] fix must be a table of fixed knobs"),
        ('[plan]\nsteps = "many"\n', "[plan] steps must be a whole number but got 'many'"),
        ("[workload]\nvram_cap = 0\n", "the size must be positive but got 0"),
        ("[workload]\nvram_cap = 12\n", '[workload] vram_cap: the size 12 has no unit: "12GiB"?'),
        ('[workload]\nvram_cap = "12"\n', "[workload] vram_cap: the size '12' has no unit"),
        ("[workload]\nemulated_ms = [nan, 1]\n", "must be finite numbers"),
        ("[workload]\nemulated_ms = [inf, inf]\n", "must be finite numbers"),
    ],
)
def test_a_spec_value_of_the_wrong_kind_is_one_line_naming_the_key(tmp_path, toml, message):
    spec = tmp_path / "spec.toml"
    spec.write_text(toml)
    db = tmp_path / "x.db"
    result = invoke(["run", "--config", str(spec), "--storage", f"sqlite:///{db}"])
    assert result.exit_code == 2, result.output
    assert message in one_error_line(result.output)
    assert not db.exists()


@pytest.mark.parametrize("pair", ["nan,1", "inf,inf", "1,-2"])
def test_emulated_times_that_are_not_finite_are_refused_before_any_trial(tmp_path, pair):
    db = tmp_path / "x.db"
    result = invoke(["run", *FAST, "--emulated-ms", pair, "--storage", f"sqlite:///{db}"])
    assert result.exit_code == 2
    assert "finite and not negative" in one_error_line(result.output)
    assert not db.exists()
    assert "finite" in one_error_line(invoke(["bench", "--emulated-mib", pair]).output)


def test_a_zero_vram_cap_is_named_as_not_positive_rather_than_unreadable():
    line = one_error_line(invoke(["run", "--vram-cap", "0"]).output)
    assert "must be positive" in line and "cannot read" not in line


def test_a_cap_no_batch_fits_under_is_refused_before_a_study_exists(tmp_path, tiny_dataset):
    # Issue 22, 7: a study created with an impossible cap refused the corrected one as "a
    # different spec". The emulated device's memory is a formula: known before anything runs.
    storage = f"sqlite:///{tmp_path / 'cap.db'}"
    args = ["run", *FAST, "--data", tiny_dataset, "--storage", storage, "--study", "cap",
            "--trials", "1", "--no-baselines", "--fix", "batch_size=8",
            "--fix", "num_workers=0"]  # fmt: skip
    for cap in ("12", "12B", "1GiB"):
        result = invoke([*args, "--vram-cap", cap])
        assert result.exit_code == 2, result.output
        assert not (tmp_path / "cap.db").exists()
    line = one_error_line(result.output)  # 600 + 150 x 8 MiB = 1.8 GiB at batch 8
    assert "not even batch_size=8 fits under a VRAM cap of 1.0 GiB" in line
    assert "1.8 GiB at batch 8" in line and "Raise --vram-cap" in line
    result = invoke([*args, "--vram-cap", "2GiB"])  # the corrected command creates it
    assert result.exit_code == 0, result.output
    assert optuna.load_study(study_name="cap", storage=storage).user_attrs["vram_cap"] == 2**31


# ------------------------------------------------------------------------ storage


def test_a_sqlite_file_that_is_not_a_database_is_named_as_a_file_not_a_server(tmp_path):
    db = tmp_path / "other.db"
    db.write_bytes(os.urandom(8192))
    before = db.read_bytes()
    result = invoke(["run", *FAST, "--storage", f"sqlite:///{db}", "--trials", "1"])
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert "file is not a database" in line and str(db) in line
    assert "server" not in line
    assert db.read_bytes() == before


def test_a_study_name_longer_than_the_databases_hold_is_one_line(tmp_path):
    # PostgreSQL and MySQL refused it with the driver's traceback (a red team's find, stop 50)
    db = tmp_path / "s.db"
    result = invoke(["run", *FAST, "--storage", f"sqlite:///{db}", "--trials", "1",
                     "--study", "x" * 600])  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "the study name is 600 characters long" in one_error_line(result.output)


def test_an_interruption_of_a_command_that_measures_nothing_says_no_more():
    from loadersearch.cli import _interrupted_line
    from loadersearch.errors import Interrupted

    assert _interrupted_line(Interrupted(), "dashboard") == "Interrupted (Ctrl-C)."
    assert "measuring processes were stopped" in _interrupted_line(Interrupted(), "run")


def test_a_full_disk_names_the_place_written_not_the_working_directory(tmp_path):
    import errno

    from loadersearch._limits import environment_error, naming

    nameless = OSError(errno.ENOSPC, "No space left on device")  # as write() and close() say it
    said = str(environment_error(naming(nameless, str(tmp_path / "report"))))
    assert f"writing {tmp_path / 'report'} (" in said


# ------------------------------------------------------------------------ datasets


def test_a_wrong_format_override_is_one_line_with_one_period(tiny_dataset, tmp_path):
    db = tmp_path / "x.db"
    result = invoke(
        ["run", *FAST, "--data", tiny_dataset, "--data-format", "voc",
         "--storage", f"sqlite:///{db}"]
    )  # fmt: skip
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert "does not look like a VOC dataset" in line and ".." not in line
    assert not db.exists()  # refused before any study or trial


@pytest.mark.parametrize("layout", ["empty", "yolo-without-images"])
def test_an_empty_dataset_is_refused_at_once_without_suggesting_skip_bad_samples(tmp_path, layout):
    data = tmp_path / "data"
    data.mkdir()
    if layout == "yolo-without-images":
        (data / "images").mkdir()
        (data / "labels").mkdir()
    db = tmp_path / "x.db"
    result = invoke(["run", *FAST, "--data", str(data), "--storage", f"sqlite:///{db}"])
    assert result.exit_code == 2
    line = one_error_line(result.output)
    assert str(data) in line and "--skip-bad-samples" not in line
    assert not db.exists()  # no study, no trial


def test_skipped_samples_are_counted_in_bench_run_and_the_study(tiny_dataset, tmp_path, caplog):
    data = copy_yolo(tiny_dataset, tmp_path / "data")
    (data / "labels" / "000001.txt").write_text("3 0.5 0.5 1.7 0.2\n")  # a box off the image
    bench = CliRunner().invoke(
        cli, ["bench", "--workload", "emulated", "--data", str(data), "--skip-bad-samples",
              *BENCH_FAST, "--json"]
    )  # fmt: skip
    assert bench.exit_code == 0, bench.output
    assert "--skip-bad-samples: 1 left out for bad labels of 8 images" in bench.stderr
    assert "000001.txt:1" in caplog.text  # its warning (a CLI process prints it on stderr)
    import json

    assert json.loads(bench.stdout)["skipped_samples"]["left_out"] == 1

    db = tmp_path / "s.db"
    run = invoke(
        ["run", *FAST, "--data", str(data), "--skip-bad-samples", "--no-baselines",
         "--trials", "1", "--storage", f"sqlite:///{db}", "--study", "skip"]
    )  # fmt: skip
    assert run.exit_code == 0, run.output
    assert "1 left out for bad labels" in run.output
    attrs = optuna.load_study(study_name="skip", storage=f"sqlite:///{db}").user_attrs
    assert attrs["skipped_samples"]["left_out"] == 1
    assert "000001.txt:1" in attrs["skipped_samples"]["reasons"][0]


def test_skipped_images_are_named_once_recorded_and_reported(tiny_dataset, tmp_path):
    data = copy_yolo(tiny_dataset, tmp_path / "data")
    truncated = data / "images" / "000002.jpg"
    whole = truncated.read_bytes()
    truncated.write_bytes(whole[: len(whole) // 2])  # a fine header: only decoding fails
    from PIL import Image

    with Image.open(truncated) as im:
        im.verify()  # what a check of the file would pass
    garbage = data / "images" / "000005.jpg"
    garbage.write_bytes(b"not an image")  # found by the dataset check, before any trial
    db = tmp_path / "s.db"
    code, out = cli_process(
        ["run", *FAST, "--data", str(data), "--skip-bad-samples", "--trials", "3",
         "--storage", f"sqlite:///{db}", "--study", "skip"]
    )  # fmt: skip
    assert code == 0, out
    assert "Traceback" not in out
    # each file named once with its reason, although every trial (and worker) meets it
    warned = [ln for ln in out.splitlines() if ln.startswith("WARNING") and "skipping" in ln]
    [named] = [ln for ln in warned if "000002.jpg" in ln]
    assert "truncated" in named, out
    [named] = [ln for ln in warned if "000005.jpg" in ln]
    assert "cannot identify image file" in named, out
    study = optuna.load_study(study_name="skip", storage=f"sqlite:///{db}")
    record = study.user_attrs["skipped_samples"]
    assert record["undecodable"] == 1 and "000005.jpg" in record["reasons"][0]
    assert record["failed_decoding"] == 1
    [entry] = record["failed_decoding_files"]
    assert entry.startswith(str(truncated)) and "truncated" in entry

    report = invoke(["report", "--storage", f"sqlite:///{db}", "--study", "skip"])
    assert report.exit_code == 0, report.output
    assert "1 not decodable at the dataset check, 1 failed when decoded" in report.output
    assert str(truncated) in report.output and str(garbage) in report.output
    from loadersearch.report import importances, study_note, summarize

    note = study_note(summarize(study), importances(study))  # the dashboard's study note
    assert f"`{entry}`" in note and str(garbage) in note


def test_optuna_trial_failed_warnings_are_kept_for_debug(tiny_dataset, tmp_path):
    data = copy_yolo(tiny_dataset, tmp_path / "data")
    bad = data / "images" / "000002.jpg"
    bad.write_bytes(bad.read_bytes()[:3000])  # a truncated JPEG: found when decoded
    db = tmp_path / "x.db"
    args = ["run", *FAST, "--data", str(data), "--storage", f"sqlite:///{db}", "--trials", "2"]
    code, out = cli_process(args)
    assert code == 2
    line = one_error_line(out)
    assert "000002.jpg" in line and "Trial 0 failed" not in out
    code, out = cli_process(["--debug", *args])
    assert "Trial" in out and "failed with parameters" in out  # Optuna's warning, with --debug


@pytest.mark.parametrize(
    "args",
    [
        ["run", "--workload", "emulated", "--data", "/nonexistent/dataset"],
        ["report", "--storage", "sqlite:////nonexistent/x.db"],
        ["best", "--storage", "postgresql+psycopg://u:pw@127.0.0.1:1/db"],
    ],
    ids=["run bad data", "report no database", "best unreachable server"],
)
def test_debug_adds_the_traceback_and_keeps_the_exit_code(args):
    plain, debug = invoke(args), invoke(["--debug", *args])
    assert (plain.exit_code, debug.exit_code) == (2, 2), debug.output
    assert "Traceback" not in plain.output and "Traceback" in debug.output, debug.output
    assert one_error_line(plain.output) in debug.output  # the same line, after the traceback


# ------------------------------------------------------------------------ dashboard


@pytest.mark.slow
def test_the_dashboard_on_a_busy_port_is_one_line(tmp_path):
    db = tmp_path / "s.db"
    optuna.create_study(study_name="s", storage=f"sqlite:///{db}")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, out = cli_process(["dashboard", "--storage", f"sqlite:///{db}", "--port", str(port)])
    assert code == 2
    assert f"port {port} on 127.0.0.1 is in use" in one_error_line(out)


def test_the_printed_dashboard_command_works_when_the_password_came_from_the_environment(
    monkeypatch,
):
    from loadersearch.report import dashboard_command

    url = "postgresql+psycopg://tuner:s3cret@db.example/studies"
    monkeypatch.setenv("LOADERSEARCH_STORAGE", url)
    assert dashboard_command(None) == 'loadersearch dashboard --storage "$LOADERSEARCH_STORAGE"'
    monkeypatch.delenv("LOADERSEARCH_STORAGE")
    typed = dashboard_command(url)  # given with --storage: the password is not printed
    assert "s3cret" not in typed and "***" in typed and "put the password" in typed


# ------------------------------------------------------------------------ limits


def test_too_few_file_descriptors_are_named_as_the_limit(tiny_dataset):
    code, out = cli_process(
        ["bench", "--workload", "loader", "--data", tiny_dataset, "--num-workers", "2",
         "--batch-size", "4", *BENCH_FAST, "--timeout", "60"],
        shell_prefix="ulimit -n 16",
    )  # fmt: skip
    assert code == 3, out
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if ln.startswith("INFEASIBLE")]
    assert "ulimit -n" in line and "16" in line
    # the workers hang on it: ended once the child says so and stops, not at the time limit
    assert line.startswith("INFEASIBLE (resource_limit)"), line


def test_a_configuration_needing_more_descriptors_than_the_limit_is_infeasible_not_the_end(
    tiny_dataset, tmp_path
):
    # Under ulimit -n 20, w0 fits and w4 does not: the study goes on to an answer with w0.
    db = tmp_path / "fd.db"
    code, out = cli_process(
        ["run", *FAST, "--data", tiny_dataset, "--storage", f"sqlite:///{db}", "--study", "fd",
         "--trials", "3"],
        shell_prefix="ulimit -n 20",
    )  # fmt: skip
    assert code == 0, out
    assert "Traceback" not in out and "could not run" not in out
    trials = optuna.load_study(study_name="fd", storage=f"sqlite:///{db}").trials
    assert any(t.params["num_workers"] == 0 and t.user_attrs["feasible"] for t in trials)
    short = [t for t in trials if t.user_attrs.get("infeasible_reason") == "resource_limit"]
    assert short, out  # the baseline with 4 workers
    assert all("may open 20 (ulimit -n)" in t.user_attrs["message"] for t in short)


@pytest.mark.parametrize("kib", [1_500_000, 3_000_000])
def test_an_address_space_limit_is_named_as_the_limit_in_bench_and_run(
    tiny_dataset, tmp_path, kib
):
    # Under 1.5 GB PyTorch cannot even be loaded ("failed to map segment"); under 3 GB it
    # loads and then aborts (SIGABRT) on an allocation: both are the limit, not a bug.
    code, out = cli_process(
        ["bench", "--workload", "loader", "--data", tiny_dataset, *BENCH_FAST],
        shell_prefix=f"ulimit -v {kib}",
    )
    assert code in (1, 3), out
    assert "Traceback" not in out
    # The measurement's result line, or (when not even the fork server that forks the
    # measurements can start) the command's one error line.
    [line] = [ln for ln in out.splitlines() if ln.startswith(("ERROR", "INFEASIBLE", "Error:"))]
    assert f"ulimit -v {kib}" in line
    if kib == 1_500_000:
        db = tmp_path / "x.db"
        code, out = cli_process(
            ["run", *FAST, "--data", tiny_dataset, "--storage", f"sqlite:///{db}"],
            shell_prefix=f"ulimit -v {kib}",
        )
        assert code == 1, out
        assert f"ulimit -v {kib}" in one_error_line(out)
