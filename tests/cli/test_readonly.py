"""Commands that only read (``report``, ``best``, ``dashboard``) write nothing anywhere: not to
another application's SQLite file, not to a study database (no table, no journal-mode switch,
no file beside it), and they work on read-only media (issue 10, fault 5). They answer only
for studies loadersearch created (fault 6). And no -wal, -shm or -artifacts/ is left beside a
WAL-mode study, and `run` refuses another application's SQLite file (issue 22)."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner
from helpers.cliproc import FAST
from helpers.private_mounts import read_only, skip_without_private_mounts
from helpers.studies import EmulatedStudy, dashboard_server, get_json
from helpers.wait import wait_for

from loadersearch.cli import cli
from loadersearch.errors import LoaderSearchError
from loadersearch.report import load_best
from loadersearch.storage import open_storage


def _state(directory) -> dict[str, tuple[str, int]]:
    """Every file and folder under ``directory`` (the trials' pictures included), each file
    with its content hash and mtime (an empty folder left behind counts too)."""
    out = {}
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), directory)] = ("folder", 0)
        for name in sorted(files):
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(path, directory)] = (digest, os.stat(path).st_mtime_ns)
    return out


def _one_error_line(output: str) -> str:
    assert "Traceback" not in output, output
    [line] = [ln for ln in output.splitlines() if ln.startswith("Error")]
    return line


@pytest.fixture
def other_app_db(tmp_path) -> str:
    """Another application's SQLite database, in WAL mode, in a directory of its own."""
    directory = tmp_path / "app"
    directory.mkdir()
    path = directory / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('mine')")
    conn.commit()
    conn.close()  # the last connection checkpoints and removes -wal and -shm
    return str(path)


@pytest.mark.parametrize(
    "command", [["report"], ["best"], ["dashboard", "--port", "1"]], ids=lambda c: c[0]
)
def test_another_application_s_database_is_refused_and_left_as_it_was(other_app_db, command):
    directory = os.path.dirname(other_app_db)
    before = _state(directory)
    result = CliRunner().invoke(cli, [*command, "--storage", f"sqlite:///{other_app_db}"])
    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert "holds no Optuna study (tables found: notes)" in line and "unchanged" in line
    assert _state(directory) == before  # not a byte, not a file beside it


def test_a_run_on_another_application_s_database_is_refused_and_left_as_it_was(
    other_app_db, tiny_dataset
):
    directory = os.path.dirname(other_app_db)
    before = _state(directory)
    result = CliRunner().invoke(
        cli, ["run", "--storage", f"sqlite:///{other_app_db}", "--data", tiny_dataset,
              "--trials", "1", *FAST],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.output)
    assert "holds no Optuna study (tables found: notes)" in line and "unchanged" in line
    assert "--storage sqlite:///" in line and "new file" in line
    assert _state(directory) == before  # not Optuna's 12 tables, no artifacts folder beside it


def _copy_db(emulated_study: EmulatedStudy, directory) -> Path:
    """The study database (and its -wal, if any) copied alone into the new ``directory``."""
    directory.mkdir()
    path = directory / "e2e.db"
    for suffix in ("", "-wal"):
        if os.path.exists(emulated_study.db_path + suffix):
            shutil.copy(emulated_study.db_path + suffix, str(path) + suffix)
    return path


@pytest.fixture
def rollback_copy(emulated_study: EmulatedStudy, tmp_path) -> str:
    """A copy of the study database in SQLite's rollback-journal mode, alone in a directory."""
    path = _copy_db(emulated_study, tmp_path / "copy")
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode=DELETE").fetchone() == ("delete",)
    conn.close()
    return str(path)


@contextlib.contextmanager
def _dashboard(storage: str) -> Iterator[Callable[[], list[str]]]:
    """``loadersearch dashboard`` on ``storage``, serving; yields a function that returns the
    names of the studies it shows now."""
    with dashboard_server(storage) as base:
        yield lambda: [s["study_name"] for s in get_json(f"{base}/api/studies")["study_summaries"]]


def test_report_best_and_dashboard_read_a_study_without_writing(rollback_copy):
    directory = os.path.dirname(rollback_copy)
    storage = f"sqlite:///{rollback_copy}"
    before = _state(directory)
    report = CliRunner().invoke(cli, ["report", "--storage", storage])
    assert report.exit_code == 0, report.output
    best = CliRunner().invoke(cli, ["best", "--storage", storage])
    assert best.exit_code == 0, best.output
    assert json.loads(best.output)["study"] == "e2e"
    with _dashboard(storage) as studies:
        assert studies() == ["e2e"]
    assert _state(directory) == before  # no table, no WAL switch, no lock file
    conn = sqlite3.connect(f"file:{rollback_copy}?mode=ro", uri=True)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()


def _wal_copy(emulated_study: EmulatedStudy, directory) -> str:
    """A copy of the study database alone in ``directory``, as a finished run leaves it: WAL
    mode, every write checkpointed into the file, no -wal or -shm beside it."""
    path = _copy_db(emulated_study, directory)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()  # the last connection checkpoints and removes -wal and -shm
    assert sorted(os.listdir(directory)) == ["e2e.db"]
    return str(path)


def _read_with(command: str, storage: str) -> None:
    """One read-only command on ``storage``, which must succeed."""
    if command == "dashboard":
        with _dashboard(storage) as studies:
            assert studies() == ["e2e"]
    elif command == "load_best":
        assert load_best(storage).batch_size >= 1
    else:
        args = {"report": ["report"], "best": ["best"], "machines": ["report", "--machines"]}
        result = CliRunner().invoke(cli, [*args[command], "--storage", storage])
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", ["report", "best", "machines", "load_best", "dashboard"])
def test_a_read_only_command_on_a_wal_study_leaves_its_directory_as_it_was(
    emulated_study, tmp_path, command
):
    path = _wal_copy(emulated_study, tmp_path / "study")
    before = _state(tmp_path / "study")
    _read_with(command, f"sqlite:///{path}")
    # No -wal, no -shm (SQLite's read-only connections create them and cannot remove them),
    # no empty e2e.db-artifacts/ from the dashboard.
    assert _state(tmp_path / "study") == before


def test_a_dashboard_opened_on_a_finished_study_shows_what_a_later_run_writes(
    emulated_study, tmp_path
):
    path = _wal_copy(emulated_study, tmp_path / "study")
    storage = f"sqlite:///{path}"
    with _dashboard(storage) as studies:
        assert studies() == ["e2e"]
        # A writer, as a run is (its WAL now holds what the file does not).
        optuna.create_study(study_name="later", storage=open_storage(storage, heartbeat=False))
        wait_for(lambda: "later" in studies(), what="the new study on the dashboard")


def test_a_study_database_on_read_only_media_can_be_read(emulated_study, tmp_path):
    path = _wal_copy(emulated_study, tmp_path / "media")
    skip_without_private_mounts(tmp_path / "media")
    done = read_only(tmp_path / "media", [sys.executable, "-m", "loadersearch", "best",
                     "--format", "python", "--storage", f"sqlite:///{path}"])  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("DataLoader(dataset")


@pytest.fixture
def foreign_study(tmp_path) -> str:
    """An Optuna study another tool made: minimises, with parameters of its own."""
    storage = f"sqlite:///{tmp_path / 'other.db'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="lr-search", storage=storage, direction="minimize")
    study.optimize(
        lambda t: t.suggest_int("batch_size", 8, 64) * t.suggest_float("lr", 1e-4, 1.0),
        n_trials=3,
    )
    return storage


@pytest.mark.parametrize("command", ["best", "report"])
def test_a_study_loadersearch_did_not_create_is_refused_naming_what_it_lacks(
    foreign_study, command
):
    before = _state(os.path.dirname(foreign_study.removeprefix("sqlite:///")))
    result = CliRunner().invoke(cli, [command, "--storage", foreign_study])
    assert result.exit_code == 2
    line = _one_error_line(result.output)
    assert "study 'lr-search'" in line and "was not created by loadersearch" in line
    assert "no loadersearch spec" in line and "minimizes" in line and "(lr)" in line
    assert "DataLoader(" not in result.output
    assert _state(os.path.dirname(foreign_study.removeprefix("sqlite:///"))) == before
    with pytest.raises(LoaderSearchError, match="was not created by loadersearch"):
        load_best(foreign_study)
