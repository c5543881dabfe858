"""Commands that see a directory as a read-only disk, or as a small tmpfs, in a private mount
namespace (``unshare -m``, as small_shm.py does for /dev/shm): the mount exists only for that
command and goes with it (no unmount to forget), and nothing outside the test sees it. As
root a ``chmod`` does not stop writes; a read-only bind mount does. Skipped, with the reason,
where unshare or mount is not permitted."""

from __future__ import annotations

import subprocess

import pytest

READ_ONLY = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
TMPFS = 'mount -t tmpfs -o size="$1" tmpfs "$2" && shift 2 && exec "$@"'


def _in_namespace(script: str, args: list[str], **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *args],
        capture_output=True, text=True, **kwargs,
    )  # fmt: skip


def skip_without_private_mounts(where) -> None:
    """Skip the calling test where ``where`` (an existing directory) cannot be mounted
    read-only in a private namespace."""
    try:
        probe = _in_namespace(READ_ONLY, [str(where), "sh", "-c", f"! touch '{where}/probe'"],
                              timeout=30)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"unshare cannot run here: {e}")
    if probe.returncode != 0:
        pytest.skip(f"a read-only bind mount is not permitted here: {probe.stderr.strip()}")


def read_only(directory, argv: list[str], env=None, timeout: float = 300):
    """Run ``argv`` with ``directory`` (which must exist) mounted read-only."""
    return _in_namespace(READ_ONLY, [str(directory), *argv], env=env, timeout=timeout)


def small_tmpfs(directory, size: str, argv: list[str], env=None, timeout: float = 300):
    """Run ``argv`` with ``directory`` (which must exist) an empty tmpfs of ``size``."""
    return _in_namespace(TMPFS, [size, str(directory), *argv], env=env, timeout=timeout)
