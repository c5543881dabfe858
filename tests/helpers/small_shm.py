"""Commands under a small /dev/shm, in a private mount namespace (``unshare -m``): the tmpfs
mounted there on /dev/shm exists only for that command, so the machine's own /dev/shm (which
other processes share) is never touched. As root, or where user namespaces allow it."""

from __future__ import annotations

import subprocess

import pytest

MOUNT = 'mount -t tmpfs -o size="$1" tmpfs /dev/shm && shift && exec "$@"'


def skip_without_private_mounts() -> None:
    """Skip the calling test, with the reason, where a private /dev/shm cannot be mounted."""
    try:
        probe = subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT, "sh", "1m",
             "true"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"unshare cannot run here: {e}")
    if probe.returncode != 0:
        pytest.skip(f"a private /dev/shm cannot be mounted here: {probe.stderr.strip()}")


def under_small_shm(
    size: str, argv: list[str], env: dict[str, str] | None = None, timeout: float = 600
) -> subprocess.CompletedProcess:
    """Run ``argv`` with a /dev/shm of ``size`` (e.g. "1m") of its own."""
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", MOUNT, "sh", size, *argv],
        env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
