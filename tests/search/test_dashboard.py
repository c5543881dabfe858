"""The real optuna-dashboard server on the study's database, read over HTTP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

from search_helpers import EmulatedStudy

from loadersearch.search.space import KNOBS


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.load(response)


def test_dashboard_serves_the_study_and_the_importance_of_the_five_knobs(
    emulated_study: EmulatedStudy,
) -> None:
    port = _free_port()
    cmd = [sys.executable, "-m", "loadersearch", "dashboard", "--storage",
           emulated_study.storage, "--port", str(port)]  # fmt: skip
    server = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                studies = _get(f"{base}/api/studies")["study_summaries"]
                break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode()
                assert time.monotonic() < deadline, "the dashboard did not start in 60 s"
                time.sleep(0.5)
        study = next(s for s in studies if s["study_name"] == emulated_study.name)
        importances = _get(f"{base}/api/studies/{study['study_id']}/param_importances")
        names = {p["name"] for p in importances["param_importances"][0]}
        assert names == set(KNOBS) - {"start_method"}  # fixed by default: not a parameter
    finally:
        server.terminate()
        server.wait(timeout=30)
