"""Helpers of the tests that need a finished study: the emulated study's options, a CLI
runner, and a real optuna-dashboard server on a storage."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from click.testing import CliRunner, Result

from helpers.wait import wait_for
from loadersearch import Hardware
from loadersearch.cli import cli
from loadersearch.measure import OK, MeasurePlan, MeasureResult, Window
from loadersearch.search import SearchSpace, StudySettings
from loadersearch.workload import WorkloadSpec

# A machine fingerprint for studies whose measurements are injected.
HOST = Hardware(host="test", cpu_count=2, physical_cores=2, gpu_count=0)

# One emulated step takes 150 ms whatever the batch (a + b*batch with b = 0) and the tiny 64 px
# dataset loads much faster than that, so batch 16 runs at twice the images/s of batch 8:
# batch-8 trials are clearly slower and the pruner must stop them.
E2E_OPTIONS = [
    "--workload", "emulated",
    "--img-size", "64",
    "--emulated-ms", "150,0",
    "--space", "batch_size=8:16:8",
    "--space", "num_workers=0:2",
    "--epochs", "2",
    "--steps", "4",
    "--windows-per-epoch", "4",
    "--warmup-epochs", "1",
    "--warmup-steps", "2",
    "--seed", "3",
]  # fmt: skip


@dataclass
class EmulatedStudy:
    storage: str
    db_path: str
    name: str
    first: Result  # `run --trials 6`
    second: Result  # the same command with `--trials 8`


def run_cli(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, catch_exceptions=False)


def quick_settings(tmp_path: Any, trials: int = 3) -> StudySettings:
    """A study of one one-window epoch per trial on a SQLite file in ``tmp_path``, for tests
    that inject the measurement (``run_study(..., measure_fn=...)``)."""
    return StudySettings(
        workload=WorkloadSpec(kind="emulated"),
        plan=MeasurePlan(epochs=1, steps=2, windows_per_epoch=1),
        space=SearchSpace(num_workers=(0, 2), batch_size=(8, 16)),
        trials=trials,
        study_name="t",
        storage=f"sqlite:///{tmp_path / 't.db'}",
        confirm_rounds=0,
    )


def steady_measure(rate: float = 160.0, wait: float = 0.25) -> Callable[..., MeasureResult]:
    """A measure function that reports one window of ``rate`` images/s, ``wait`` of it spent
    waiting for data, instantly."""

    def measure(workload, config, plan, *, on_window=None, on_ready=None) -> MeasureResult:
        seconds = 16 / rate
        window = Window(index=0, epoch=0, images=16, seconds=seconds, wait_s=wait * seconds,
                        compute_s=(1 - wait) * seconds, h2d_s=0.0)  # fmt: skip
        if on_window is not None:
            on_window(window)
        return MeasureResult(config=config, status=OK, windows=[window], objective=rate,
                             steady_rate=rate)  # fmt: skip

    return measure


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dashboard_server(storage: str, **popen: Any) -> Iterator[str]:
    """``loadersearch dashboard`` on ``storage`` in a real process (``popen``: e.g. its cwd
    and env); yields its base URL once it answers, stops it afterwards."""
    port = _free_port()
    cmd = [sys.executable, "-m", "loadersearch", "dashboard", "--storage", storage,
           "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **popen)
    base = f"http://127.0.0.1:{port}"

    def up() -> bool:
        assert server.poll() is None, server.stdout.read().decode()
        get_json(f"{base}/api/studies")
        return True

    try:
        wait_for(up, what="the dashboard answering")
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


def study_id(base: str, name: str) -> int:
    """The dashboard's id of the study ``name``."""
    studies = get_json(f"{base}/api/studies")["study_summaries"]
    return next(s["study_id"] for s in studies if s["study_name"] == name)
