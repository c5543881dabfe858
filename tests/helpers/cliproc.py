"""``loadersearch`` CLI processes for end-to-end tests: start them, read their study, finish
them (wait for a condition in the study with :func:`helpers.wait.wait_for`)."""

from __future__ import annotations

import os
import subprocess
import sys

import optuna

from loadersearch.storage import open_storage

# A study that measures fast: the emulated accelerator on a tiny 64 px dataset, one window,
# exactly the one planned epoch (a study's default precision adds two: a third less CPU time
# per run without them, measured; the added epochs have tests of their own in
# tests/measure/test_loop.py, and the API's and bench's tests keep the default).
FAST = [
    "--workload", "emulated", "--img-size", "64", "--epochs", "1", "--steps", "2",
    "--windows-per-epoch", "1", "--warmup-epochs", "0", "--no-probe", "--confirm-rounds", "0",
    "--emulated-ms", "1,0.1", "--quiet", "--precision", "0",
]  # fmt: skip
# FAST with the study's default precision (0.05: two epochs added to the planned one), for the
# tests that stop a run, or fill its disk, while a trial measures: a measurement long enough
# to be caught in, as before FAST measured exactly its plan. (The last --precision counts.)
# 100 ms steps (sleeps: no CPU), so a signal a busy test process sends late still finds the
# trial it aimed at being measured.
CATCHABLE = [*FAST, "--precision", "0.05", "--emulated-ms", "100,0"]


def cli_env(tmp_path, **extra: str) -> dict[str, str]:
    """Environment of CLI processes: a private lock directory, fast heartbeats, no storage
    from the caller's environment."""
    base = {k: v for k, v in os.environ.items() if k != "LOADERSEARCH_STORAGE"}
    return {
        **base,
        "LOADERSEARCH_LOCK_DIR": str(tmp_path / "locks"),
        "LOADERSEARCH_HEARTBEAT": "1,3",
        "LOADERSEARCH_DB_RETRY_SECONDS": "20",
        **extra,
    }


def start_cli(args: list[str], env: dict[str, str], host: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "loadersearch", *args],
        env={**env, "LOADERSEARCH_HOST": host},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def finish(proc: subprocess.Popen, timeout: float = 240) -> tuple[int, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out + err


def load(url: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=open_storage(url, heartbeat=False))
