"""The study set-up lock (storage/_lock.py) on every backend: it excludes another process, and
a holder that dies releases it."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from loadersearch.storage import open_storage, study_lock

# Takes the lock of study argv[2] in argv[1], saying "waiting" if it must wait, "held" once it
# holds it; then holds it until stdin closes.
_HOLDER = textwrap.dedent(
    """
    import sys
    from loadersearch.storage import open_storage, study_lock
    storage = open_storage(sys.argv[1], heartbeat=False)
    with study_lock(storage, sys.argv[2], lambda: print("waiting", flush=True)):
        print("held", flush=True)
        sys.stdin.read()
    """
)


def _holder(url: str, name: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _HOLDER, url, name],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_study_lock_excludes_another_process_until_released(storage_url, study_name):
    storage = open_storage(storage_url, heartbeat=False)
    try:
        with study_lock(storage, study_name):
            other = _holder(storage_url, study_name)
            assert other.stdout.readline().strip() == "waiting"  # it must wait for us
            assert other.poll() is None
        assert other.stdout.readline().strip() == "held"  # ours released: it gets it
        other.stdin.close()
        assert other.wait(timeout=60) == 0
        # Another study's lock is independent (server locks are per study name).
        if not storage_url.startswith("sqlite"):
            with study_lock(storage, study_name):
                free = _holder(storage_url, f"{study_name}-other")
                assert free.stdout.readline().strip() == "held"
                free.stdin.close()
                free.wait(timeout=60)
    finally:
        storage.engine.dispose()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_holder_that_dies_releases_the_lock(storage_url, study_name):
    first = _holder(storage_url, study_name)
    assert first.stdout.readline().strip() == "held"
    first.kill()  # SIGKILL: no clean-up; the server or the kernel releases its lock
    first.wait()
    second = _holder(storage_url, study_name)
    line = second.stdout.readline().strip()
    if line == "waiting":  # the server may notice the dead session a moment later
        line = second.stdout.readline().strip()
    assert line == "held"
    second.stdin.close()
    assert second.wait(timeout=60) == 0
