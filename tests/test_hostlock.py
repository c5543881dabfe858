from __future__ import annotations

import os
import select
import subprocess
import sys
import textwrap
import time

import pytest

from loadersearch._hostlock import lock_path, measurement_lock
from loadersearch.errors import StudyError

_HOLDER = textwrap.dedent(
    """
    import sys, time
    from loadersearch._hostlock import measurement_lock
    with measurement_lock():
        print("locked", flush=True)
        time.sleep(float(sys.argv[1]))
        print("done measuring", flush=True)
    """
)


@pytest.fixture
def lock_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path))
    monkeypatch.setenv("LOADERSEARCH_HOST", "host-a")
    return {**os.environ}


def _hold(env, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(seconds)], env=env, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


def test_a_second_measurement_with_no_wait_is_refused_naming_the_holder(lock_env):
    holder = _hold(lock_env, 30)
    try:
        with pytest.raises(StudyError) as info:
            with measurement_lock(wait=False):
                pass
        assert f"pid {holder.pid}" in str(info.value) and "--no-wait" in str(info.value)
    finally:
        holder.kill()
        holder.wait()


def test_a_second_measurement_waits_until_the_first_ends(lock_env, caplog):
    holder = _hold(lock_env, 5)  # held 5 s from "locked": a stalled test process still waits
    start = time.monotonic()
    with measurement_lock(wait=True):
        waited = time.monotonic() - start
        # The first one had finished measuring: it printed so just before it let go.
        assert select.select([holder.stdout], [], [], 0)[0]
        assert holder.stdout.readline().strip() == "done measuring"
    holder.wait()
    assert waited > 2
    assert any("waiting for it" in r.getMessage() for r in caplog.records)


def test_a_killed_holder_releases_the_lock(lock_env):
    holder = _hold(lock_env, 60)
    holder.kill()  # SIGKILL: the kernel releases the flock
    holder.wait()
    with measurement_lock(wait=False) as path:
        assert path == lock_path()


def test_different_host_identities_do_not_block_each_other(lock_env, monkeypatch):
    holder = _hold(lock_env, 30)
    try:
        monkeypatch.setenv("LOADERSEARCH_HOST", "host-b")
        with measurement_lock(wait=False) as path:
            assert path.endswith("loadersearch-measure-host-b.lock")
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_reentrant_within_one_process(lock_env):
    with measurement_lock(wait=False) as outer:
        with measurement_lock(wait=False) as inner:
            assert inner == outer
        holder = subprocess.run(
            [
                sys.executable,
                "-c",
                "from loadersearch._hostlock import measurement_lock as m\n"
                "with m(wait=False): pass",
            ],
            env=lock_env,
            capture_output=True,
            text=True,
        )
        assert holder.returncode != 0 and "another loadersearch measurement" in holder.stderr


def test_the_suite_takes_a_lock_directory_of_its_own():
    """A user's study on this machine holds the lock in the system temporary directory: the
    suite's measurements must not queue behind it (conftest.py sets the directory)."""
    import tempfile

    assert os.path.dirname(lock_path()) != tempfile.gettempdir()
