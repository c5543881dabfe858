"""A full disk under a SQLite study (issue 10, fault 4), on a real small tmpfs: mounted in a
private mount namespace (``unshare -m``), so nothing outside the test sees it. Skipped where
unshare or mount is not permitted."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from helpers.cliproc import CATCHABLE, cli_env

HELPER = os.path.join(os.path.dirname(os.path.dirname(__file__)), "helpers", "full_disk.py")
MOUNT = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'


@pytest.fixture(scope="module")
def private_mounts(tmp_path_factory) -> None:
    where = tmp_path_factory.mktemp("mount-probe")
    probe = subprocess.run(
        ["unshare", "-m", "sh", "-c", MOUNT, "sh", "1m", str(where), "true"],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        pytest.skip(f"private mount namespaces are not permitted here: {probe.stderr.strip()}")


def in_small_tmpfs(directory, size: str, argv: list[str], env) -> subprocess.CompletedProcess:
    """``argv`` in a private mount namespace where ``directory`` is a tmpfs of ``size``."""
    directory.mkdir(exist_ok=True)
    return subprocess.run(
        ["unshare", "-m", "sh", "-c", MOUNT, "sh", size, str(directory), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def _run(directory, tiny_dataset) -> list[str]:
    return ["loadersearch", "run", "--study", "full", "--storage",
            f"sqlite:///{directory}/studies/s.db", "--trials", "2", "--data", tiny_dataset,
            "--no-baselines", *CATCHABLE]  # fmt: skip


def _error_line(output: str) -> str:
    assert "Traceback" not in output, output
    [line] = [ln for ln in output.splitlines() if ln.startswith("Error")]
    return line


def test_too_little_space_is_refused_at_start_naming_the_file_system(
    private_mounts, tmp_path, tiny_dataset
):
    disk = tmp_path / "disk"
    done = in_small_tmpfs(
        disk, "2m", [sys.executable, "-m", *_run(disk, tiny_dataset)], cli_env(tmp_path)
    )
    assert done.returncode == 1, done.stdout + done.stderr
    line = _error_line(done.stdout + done.stderr)
    assert "is free for the study database" in line
    assert f"tmpfs mounted at {disk}" in line and "free of 2.0 MiB" in line


def test_a_disk_that_fills_mid_trial_is_one_line_and_the_resume_loses_nothing(
    private_mounts, tmp_path, tiny_dataset
):
    disk, report = tmp_path / "disk", tmp_path / "report.json"
    # Heartbeats that go stale only after an hour: the resume must reclaim the trial the
    # full disk left RUNNING because it knows its process is gone.
    env = cli_env(tmp_path, LOADERSEARCH_DB_RETRY_SECONDS="2", LOADERSEARCH_HEARTBEAT="1,3600")
    argv = [sys.executable, HELPER, str(disk), "never", str(report), "--",
            *_run(disk, tiny_dataset)]  # fmt: skip
    done = in_small_tmpfs(disk, "24m", argv, env)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(report.read_text())
    assert seen["free_after_fill"] == 0
    assert seen["first"]["code"] == 1, seen["first"]["output"]
    line = _error_line(seen["first"]["output"])
    assert "the disk holding the study database" in line and "is full" in line
    assert f"tmpfs mounted at {disk}" in line and "run the same command again" in line
    [left] = [t for t in seen["trials_when_full"] if t["state"] == "RUNNING"]
    assert seen["resume"]["code"] == 0, seen["resume"]["output"]
    by_number = {t["number"]: t for t in seen["trials"]}
    assert by_number[left["number"]]["state"] == "FAIL"
    assert "is gone" in by_number[left["number"]]["attrs"]["reason"]
    assert len([t for t in seen["trials"] if t["state"] in ("COMPLETE", "PRUNED")]) == 2


def test_a_measurement_is_kept_when_space_is_freed_while_the_run_waits(
    private_mounts, tmp_path, tiny_dataset
):
    disk, report = tmp_path / "disk", tmp_path / "report.json"
    env = cli_env(tmp_path, LOADERSEARCH_DB_RETRY_SECONDS="120")
    argv = [sys.executable, HELPER, str(disk), "freed", str(report), "--",
            *_run(disk, tiny_dataset)]  # fmt: skip
    done = in_small_tmpfs(disk, "24m", argv, env)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(report.read_text())
    assert seen["first"]["code"] == 0, seen["first"]["output"]
    assert "Traceback" not in seen["first"]["output"]
    waited = [ln for ln in seen["first"]["output"].splitlines() if "is full" in ln]
    assert waited and "waiting up to 120 s for space" in waited[0]
    finished = [t for t in seen["trials"] if t["state"] == "COMPLETE"]
    assert len(finished) == 2 and not [t for t in seen["trials"] if t["state"] == "FAIL"]
    # The trial measured while the disk was full kept its measurement.
    assert all(t["attrs"]["status"] == "ok" and t["attrs"]["windows_done"] == 1
               for t in finished)  # fmt: skip
