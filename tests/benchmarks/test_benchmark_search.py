"""The search benchmark's fast mode runs end to end, so that the script cannot rot."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_benchmark_search_smoke_writes_the_table_the_json_and_the_plot(tmp_path: Path) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "benchmark_search.py"),
            "--smoke",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=580,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = (out / "results.md").read_text()
    assert "| loadersearch |" in table and "| grid |" in table and "| random |" in table
    assert "| target | measured | verdict |" in table
    assert table.strip() in proc.stdout  # the table is printed too

    data = json.loads((out / "results.json").read_text())
    for key in ("meta", "grid_optimum", "remeasured", "runs", "methods", "timelines",
                "speedups", "targets", "overhead"):  # fmt: skip
        assert key in data, key
    methods = set(data["methods"])
    assert {"grid", "loadersearch", "loadersearch-nopruning", "random"} <= methods
    assert any(m.startswith("rule:") for m in methods)
    assert data["grid_optimum"]["remeasured"] > 0
    assert [r["prefilled"] for r in data["overhead"]["rows"]] == [10, 100]
    assert all(r["total_s"] > 0 for r in data["overhead"]["rows"])
    for run in data["runs"]:
        assert run["counts"]["measurements"] >= 1, run["name"]
        assert run["chosen"] is not None, run["name"]

    png = (out / "best_so_far.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000
