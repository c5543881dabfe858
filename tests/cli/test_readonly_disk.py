"""A run whose study database, artifacts directory or memmap cache would be written to a
read-only file system, or whose cache directory is full (issue 22, item 3): one line naming
the directory and the fix, exit 2, nothing created. The read-only disk is a real read-only
bind mount in a private mount namespace (helpers/private_mounts.py); skipped where mounts are
not permitted."""

from __future__ import annotations

import os
import re
import sys

import pytest
from helpers.cliproc import FAST, cli_env
from helpers.private_mounts import read_only, skip_without_private_mounts, small_tmpfs


def _error_line(done) -> str:
    output = done.stdout + done.stderr
    assert "Traceback" not in output, output
    [line] = [ln for ln in output.splitlines() if ln.startswith("Error")]
    return line


def _listing(directory) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(root, name), directory)
        for root, dirs, files in os.walk(directory)
        for name in dirs + files
    )


def _run(storage: str, data: str, *extra: str) -> list[str]:
    return [sys.executable, "-m", "loadersearch", "run", "--study", "ro", "--storage", storage,
            "--trials", "1", "--data", data, "--no-baselines", *FAST, *extra]  # fmt: skip


@pytest.fixture
def ro_dir(tmp_path):
    """A directory the tests mount read-only (with a file in it, as a disk has)."""
    directory = tmp_path / "ro"
    directory.mkdir()
    (directory / "README").write_text("read-only media\n")
    skip_without_private_mounts(directory)
    return directory


def test_a_run_with_its_database_on_a_read_only_disk_is_one_line_naming_the_fix(
    ro_dir, tmp_path, tiny_dataset
):
    before = _listing(ro_dir)
    done = read_only(ro_dir, _run(f"sqlite:///{ro_dir}/x.db", tiny_dataset), cli_env(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    line = _error_line(done)
    assert f"the study database {ro_dir}/x.db and its artifacts directory {ro_dir}/x.db-" in line
    assert f"{ro_dir} is on a read-only file system" in line
    assert "--storage sqlite:///" in line and "$LOADERSEARCH_ARTIFACTS=DIR" in line
    assert _listing(ro_dir) == before


def test_artifacts_on_a_read_only_disk_are_named_alone_with_their_variable(
    ro_dir, tmp_path, tiny_dataset
):
    env = cli_env(tmp_path, LOADERSEARCH_ARTIFACTS=str(ro_dir / "pictures"))
    done = read_only(ro_dir, _run(f"sqlite:///{tmp_path}/x.db", tiny_dataset), env)
    assert done.returncode == 2, done.stdout + done.stderr
    line = _error_line(done)
    assert f"the study's artifacts directory {ro_dir}/pictures" in line
    assert "study database" not in line and "$LOADERSEARCH_ARTIFACTS=DIR" in line
    assert not os.path.exists(tmp_path / "x.db")  # refused before the study was created


def test_a_memmap_cache_on_a_read_only_disk_is_one_line_naming_cache_dir(
    ro_dir, tmp_path, tiny_dataset
):
    storage = f"sqlite:///{tmp_path}/x.db"
    argv = _run(storage, tiny_dataset, "--cache", "memmap", "--cache-dir", str(ro_dir))
    done = read_only(ro_dir, argv, cli_env(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    line = _error_line(done)
    assert f"the memmap cache directory {ro_dir} is on a read-only file system" in line
    assert "--cache-dir DIR" in line
    assert not os.path.exists(tmp_path / "x.db")  # refused before the study was created
    # nor its artifacts folder (red team: an empty one was left behind)
    assert not os.path.exists(tmp_path / "x.db-artifacts")


def test_a_full_cache_directory_names_the_sizes_in_the_unit_that_shows_them(
    tmp_path, tiny_dataset
):
    cache = tmp_path / "cache"
    cache.mkdir()
    skip_without_private_mounts(cache)
    argv = _run(f"sqlite:///{tmp_path}/x.db", tiny_dataset, "--cache", "memmap", "--cache-dir",
                str(cache))  # fmt: skip
    done = small_tmpfs(cache, "64k", argv, cli_env(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    line = _error_line(done)
    # 16 images at 64 px: up to ~208 KiB; it was "needs up to 0.00 GiB ... has 0.00 GiB free".
    assert re.search(rf"needs up to [\d.]+ KiB and {cache} has 64\.0 KiB free", line), line
    assert "--cache-dir DIR" in line


def test_any_other_write_to_a_read_only_disk_is_one_line_naming_the_place(ro_dir, tmp_path):
    # Nothing checks make-dataset's target up front: the one-line fallback for EROFS names it.
    argv = [sys.executable, "-m", "loadersearch", "make-dataset", str(ro_dir / "data"), "-n", "2"]
    done = read_only(ro_dir, argv, cli_env(tmp_path))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"cannot write {ro_dir}/data: its file system is read-only" in _error_line(done)
