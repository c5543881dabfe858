"""The tabular benchmark's fast mode runs end to end (measure a tiny table with real
measurements, replay methods against it), so that the scripts cannot rot; and the replay's
reading of the table (twins, interpolation, the cap) is what its docstring says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_tabular.table import Repeat, Table  # noqa: E402

from loadersearch import LoaderConfig  # noqa: E402


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True, text=True, cwd=cwd, timeout=580,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_tabular_smoke_measures_a_table_and_replays_methods_against_it(tmp_path: Path) -> None:
    table = tmp_path / "table.json.gz"
    _run("tabular_grid.py", "--smoke", "--repeats", "2", "--io-ms", "1", "--out", str(table),
         cwd=tmp_path)  # fmt: skip
    out = tmp_path / "out"
    proc = _run("tabular_replay.py", "--table", str(table), "--out", str(out), "--seeds", "2",
                "--max-budget", "10", "--methods", "structured,tpe", "--jobs", "1",
                cwd=tmp_path)  # fmt: skip
    text = (out / "tabular-benchmark.md").read_text()
    assert text.strip() in proc.stdout
    for method in ("loadersearch (structured)", "loadersearch (tpe)", "random search"):
        assert f"| {method} |" in text
    data = json.loads((out / "tabular-benchmark.json").read_text())
    assert data["landscape"]["points"] == 2 + 1  # w1 with and without persistence, w0
    assert data["landscape"]["over_cap"] == {"64": ["vram_cap"]}
    assert len(data["rows"]) == 3 * 2  # methods x seeds at the reported budget 10
    assert {b for s in data["summary"].values() for b in s["budgets"]} == {"4", "6", "8", "10"}
    assert all(0 < r["quality"] <= 1.0 + 1e-9 for r in data["rows"])
    assert (out / "tabular-benchmark.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _repeat(objective: float, seconds: float = 1.0) -> Repeat:
    return Repeat("ok", None, objective, 0.01, [(8, seconds, 0.0)] * 4, 0.5, 0.1, 5.0)


def _table() -> Table:
    repeats = {
        LoaderConfig(0, 8): [_repeat(10.0), _repeat(12.0)],
        LoaderConfig(2, 8, False, 2, True): [_repeat(40.0), _repeat(44.0)],
        LoaderConfig(4, 8, False, 2, True): [_repeat(80.0), _repeat(84.0)],
    }
    over = [Repeat("infeasible", "vram_cap", 0.0, 0.0, [], 0.0, 0.1, 0.3)]
    return Table(repeats, workers=[0, 2, 4], prefetch=[2], over_cap={16: over})


def test_a_pinned_configuration_is_read_from_its_unpinned_twin() -> None:
    table = _table()
    assert table.of(LoaderConfig(2, 8, True, 2, True)) == table.of(
        LoaderConfig(2, 8, False, 2, True)
    )


def test_worker_counts_between_the_grid_are_interpolated_repeat_by_repeat() -> None:
    table = _table()
    between = table.of(LoaderConfig(3, 8, False, 2, True))
    assert [r.objective for r in between] == [60.0, 64.0]
    assert table.true_value(LoaderConfig(3, 8, False, 2, True)) == 62.0
    assert table.optimum() == (LoaderConfig(4, 8, False, 2, True), 82.0)


def test_a_batch_over_the_cap_is_infeasible_and_never_the_answer() -> None:
    table = _table()
    assert [r.reason for r in table.of(LoaderConfig(2, 16, False, 2, True))] == ["vram_cap"]
    assert table.true_value(LoaderConfig(2, 16, False, 2, True)) == 0.0


def _model_table(gpus: int = 1) -> Table:
    from bench_tabular.zoo import Landscape, table_data

    def model(c: LoaderConfig) -> float:
        return 100.0 + 10.0 * c.num_workers + (5.0 if c.pin_memory else 0.0)

    land = Landscape("t", "a test model", model, cpus=2, physical=2, gpus=gpus,
                     batches=(8, 16), prefetch=(1, 2, 4), cap_batches=(32,),
                     noise=0.05)  # fmt: skip
    return Table.from_data(table_data(land))


def test_a_model_table_answers_with_its_truth_interpolated_between_its_points() -> None:
    table = _model_table()
    assert table.true_value(LoaderConfig(3, 8, True, 2, True)) == 135.0
    assert table.true_value(LoaderConfig(3, 8, True, 3, True)) == 135.0  # pf 3: between 2, 4
    assert table.optimum()[1] == 145.0
    assert table.true_value(LoaderConfig(3, 32, True, 2, True)) == 0.0  # over the cap
    # three repeats drawn once from the truth and its noise: the same on every read
    again = _model_table()
    assert [r.objective for r in table.of(LoaderConfig(1, 8))] == [
        r.objective for r in again.of(LoaderConfig(1, 8))
    ]


def test_a_queue_beyond_a_models_dev_shm_is_infeasible_between_its_points_too(
    tmp_path: Path,
) -> None:
    """A model host with /dev/shm for 100 images of 416 px (zoo.py's ``shm_bytes``): a point
    whose workers x prefetch x batch exceeds it fails (shm_full), so does a configuration
    between the grid's points beyond it, and one within it between a feasible and a failing
    point reads the feasible side; the table's hardware and workload say the sizes, so the
    replay bounds the search's queue as a run does (half of /dev/shm: 50 images)."""
    import random

    from bench_tabular.grid import write_table
    from bench_tabular.replay import setup
    from bench_tabular.zoo import IMAGE_BYTES, Landscape, table_data

    from loadersearch.measure import host_inflight_budget

    land = Landscape("t", "a test model", lambda c: 100.0 + c.num_workers, cpus=2, physical=2,
                     workers=(0, 1, 2, 4), batches=(8, 16), prefetch=(1, 2, 4, 8), noise=0.05,
                     shm_bytes=100 * IMAGE_BYTES, ram_bytes=2**40)  # fmt: skip
    data = table_data(land)
    failing = {LoaderConfig.from_dict(p["config"]).label() for p in data["points"]
               if p.get("infeasible") == "shm_full"}  # fmt: skip
    assert "w2 b16 pf4 persist" in failing and "w2 b16 pf2 persist" not in failing
    table = Table.from_data(data)
    assert table.true_value(LoaderConfig(2, 16, False, 4, True)) == 0.0  # 128 images > 100
    assert table.fresh(LoaderConfig(2, 16, False, 4, True), random.Random(0)).reason == "shm_full"
    assert table.true_value(LoaderConfig(3, 16, False, 4, True)) == 0.0  # between, 192 > 100
    assert table.true_value(LoaderConfig(3, 16, False, 2, True)) == 102.0  # 96: w2's side
    assert table.true_value(LoaderConfig(2, 16, False, 2, True)) == 102.0
    assert table.optimum()[1] == 104.0  # 4 workers at a queue that fits (4 x 2 x 8)
    path = write_table(tmp_path / "t.json.gz", {**data["meta"], "points": data["points"]}, [])
    s = setup(path)
    assert host_inflight_budget(s["hardware"], s["workload"], "cuda") == pytest.approx(50.0)


def test_a_gpu_table_keeps_pinned_configurations_their_own_values() -> None:
    table = _model_table(gpus=1)
    assert table.true_value(LoaderConfig(2, 8, True, 2, True)) == 125.0
    assert table.true_value(LoaderConfig(2, 8, False, 2, True)) == 120.0
    cpu = _model_table(gpus=0)  # no pinned points: a pinned configuration reads its twin
    assert cpu.true_value(LoaderConfig(2, 8, True, 2, True)) == 120.0


def test_the_fair_draw_is_a_new_measurement_around_the_truth_every_time() -> None:
    import random
    import statistics

    table = _model_table()
    rng = random.Random(0)
    config = LoaderConfig(2, 8, True, 2, True)
    draws = [table.fresh(config, rng).objective for _ in range(400)]
    assert len(set(draws)) == 400
    assert abs(statistics.mean(draws) / 125.0 - 1.0) < 0.01
    assert 0.04 < statistics.stdev(draws) / 125.0 < 0.06
    assert table.fresh(LoaderConfig(2, 32, True, 2, True), rng).status != "ok"


def _replay_quality(land: object, sampler: str, seeds: range, budget: int) -> list[float]:
    """The fair replay of ``sampler`` on a model landscape: baselines, the Wilcoxon pruner on
    noisy windows, the interleaved confirmation; the true quality of each seed's answer."""
    import tempfile

    from bench_tabular.grid import write_table
    from bench_tabular.replay import loadersearch_methods, replay_seed, setup
    from bench_tabular.zoo import table_data

    data = table_data(land)
    with tempfile.TemporaryDirectory() as tmp:
        path = write_table(Path(tmp) / "t.json.gz", {**data["meta"], "points": data["points"]},
                           [])  # fmt: skip
        s = setup(path)
    method = loadersearch_methods([sampler])[0]
    return [
        replay_seed(method, s["table"], s["space"], workload=s["workload"], plan=s["plan"],
                    hardware=s["hardware"], seed=seed, budgets=[budget], gpu=s["gpu"],
                    fair=True)[0]["quality"]
        for seed in seeds
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("peak", [3, 5, 7, 14, 20, 28])
def test_the_default_search_finds_a_peak_anywhere_through_noise_baselines_pruner(
    peak: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A 16-core host whose optimum lies at ``peak`` workers, 10% above the nearest power of
    two, measured with 4% noise: in 14 trials (3 baselines) the answer is within 7% of the
    optimum for most seeds and within 15% for every one (the search of issue 12 is not)."""
    import statistics

    from bench_tabular.zoo import Landscape, peak_at

    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path))
    land = Landscape(f"peak-{peak}", "a peak", peak_at(peak, cores=16), cpus=16, physical=16,
                     batches=(8, 16, 32, 64), prefetch=(1, 2, 4), noise=0.04)  # fmt: skip
    quality = _replay_quality(land, SAMPLER, range(5), budget=14)
    assert statistics.median(quality) >= 0.93, quality
    assert min(quality) >= 0.85, quality


SAMPLER = "structured"  # the default, host-aware (issue 23); "structured-classic" fails it
