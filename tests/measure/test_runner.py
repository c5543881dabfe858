"""The measurement engine with real child processes, DataLoader workers and JPEG decoding."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from helpers.procs import alive, measurement_processes
from helpers.wait import wait_for

from loadersearch import LoaderConfig
from loadersearch.measure import measure
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._result import (
    BAD_SAMPLE,
    ERROR,
    INFEASIBLE,
    KILLED,
    NO_DEVICE,
    OK,
    PRUNED,
    TIMEOUT,
    VRAM_CAP,
    WORKER_KILLED,
)
from loadersearch.workload import WorkloadSpec

IMG = 64  # small network input: the tests check the machinery, not the speed


def _spec(data: str, kind: str = "loader", **kw) -> WorkloadSpec:
    return WorkloadSpec(kind=kind, data=data, img_size=IMG, device="cpu", **kw)


def _collect_pids(into: list[int], *, then=None):
    """An on_window callback that records the measurement's pids at the first window."""

    def on_window(window) -> bool:
        if not into:
            procs = measurement_processes()
            into.extend(p.pid for p in procs)
            if then is not None:
                return then(procs)
        return True

    return on_window


@pytest.mark.parametrize(
    ("kind", "workers"), [("loader", 0), ("loader", 2), ("emulated", 0), ("emulated", 2)]
)
def test_measurement_reports_consistent_windows_and_projection(
    tiny_dataset, quick_plan, kind, workers
):
    config = LoaderConfig(num_workers=workers, batch_size=2)
    spec = _spec(
        tiny_dataset,
        kind,
        emulated_ms=(30.0, 0.0),
        emulated_mib=(100.0, 10.0),
        vram_cap=8 * 2**30,
    )
    seen = []
    result = measure(spec, config, quick_plan, on_window=lambda w: seen.append(w) is None)

    assert result.status == OK, result.message
    assert [w.index for w in result.windows] == list(range(quick_plan.n_windows))
    assert seen == result.windows
    assert [w.epoch for w in result.windows] == [0, 0, 1, 1]
    for w in result.windows:
        assert w.images == 2 * 2  # steps per window * batch size
        assert w.compute_s + w.wait_s + w.h2d_s == pytest.approx(w.seconds, rel=1e-6, abs=1e-6)
        assert 0 <= w.wait_s <= w.seconds
        # The epoch start (iterator creation to the first batch) is in each epoch's first window.
        assert (w.start_s > 0) == (w.index % 2 == 0)
        if kind == "emulated":
            assert w.compute_s >= 2 * 0.030  # two steps of 30 ms of sleep
    assert result.dataset_images == 16
    assert 0 < result.objective <= result.steady_rate
    assert result.epoch_time_s == pytest.approx(
        16 / result.steady_rate + result.start_cost_s, rel=1e-9
    )
    assert 0 <= result.wait_fraction <= 1
    assert result.overhead_s > 0 and result.warmup_s > 0
    assert result.wall_s > result.overhead_s
    # where the wall time went: every phase it passed through, adding up to it
    phases = result.phases
    assert sum(phases.values()) == pytest.approx(result.wall_s, abs=0.01)
    assert phases["build"] > 0 and phases["warmup"] > 0 and phases["planned"] > 0
    assert phases["start"] + phases["build"] == pytest.approx(result.overhead_s, abs=0.01)
    assert phases["planned"] >= sum(w.seconds for w in result.windows) * 0.99
    assert result.peak_rss_bytes and result.peak_rss_bytes > 50 * 2**20
    assert result.cpu_util_mean is not None and result.cpu_util_mean > 0
    assert result.nvml == "ok" or result.nvml.startswith("absent")
    assert result.emulated == (kind == "emulated")
    if kind == "emulated":
        assert result.device.startswith("emulated")
        assert result.peak_vram_bytes == (100 + 10 * 2) * 2**20
        assert any("EMULATED" in n for n in result.notes)
    else:  # on a CPU the cap cannot apply to a real workload, and the result says so
        assert any("VRAM cap does not apply" in n for n in result.notes)
    assert measurement_processes() == []


def test_train_workload_runs_real_yolov4_tiny(tiny_dataset):
    plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_epochs=0, timeout_s=120)
    result = measure(_spec(tiny_dataset, "train"), LoaderConfig(batch_size=2), plan)

    assert result.status == OK, result.message
    assert len(result.windows) == 1 and result.windows[0].images == 4
    assert result.steady_rate > 0 and not result.emulated
    assert result.device.startswith(("cpu", "cuda"))


def test_worker_killed_mid_epoch_is_classified(tiny_dataset):
    pids: list[int] = []

    def kill_a_worker(procs):
        child = procs[0]  # the measuring child, then its workers
        workers = child.children()
        assert workers, "the measuring child should have DataLoader workers"
        os.kill(workers[0].pid, signal.SIGKILL)
        return True

    plan = MeasurePlan(epochs=2, steps=8, windows_per_epoch=2, timeout_s=120)
    spec = _spec(tiny_dataset, "emulated", emulated_ms=(100.0, 0.0))
    result = measure(
        spec,
        LoaderConfig(num_workers=2, batch_size=2),
        plan,
        on_window=_collect_pids(pids, then=kill_a_worker),
    )

    assert (result.status, result.reason) == (INFEASIBLE, WORKER_KILLED), result.message
    assert "DataLoader worker" in result.message
    assert len(pids) >= 3 and alive(pids) == []


def test_stopped_worker_is_cut_by_the_stall_limit_and_nothing_is_left(tiny_dataset):
    pids: list[int] = []

    def stop_the_workers(procs):
        for p in procs[1:]:  # the workers; persistent, so the next epoch needs them
            os.kill(p.pid, signal.SIGSTOP)
        return True

    plan = MeasurePlan(epochs=3, steps=4, windows_per_epoch=2, timeout_s=120, stall_s=3)
    config = LoaderConfig(num_workers=2, batch_size=2, persistent_workers=True)
    result = measure(
        _spec(tiny_dataset, "emulated", emulated_ms=(20.0, 0.0)),
        config,
        plan,
        on_window=_collect_pids(pids, then=stop_the_workers),
    )

    assert (result.status, result.reason) == (INFEASIBLE, TIMEOUT)
    assert "no progress for 3 s" in result.message
    assert len(pids) >= 3 and alive(pids) == []
    assert measurement_processes() == []


def test_wall_clock_limit_cuts_a_slow_measurement(tiny_dataset):
    plan = MeasurePlan(epochs=3, steps=4, windows_per_epoch=2, timeout_s=6)
    spec = _spec(tiny_dataset, "emulated", emulated_ms=(500.0, 0.0))
    t0 = time.monotonic()
    result = measure(spec, LoaderConfig(num_workers=1, batch_size=2), plan)

    assert (result.status, result.reason) == (INFEASIBLE, TIMEOUT)
    assert "6 s limit" in result.message
    assert time.monotonic() - t0 < 6 + 5
    assert measurement_processes() == []


def test_child_killed_by_sigkill_is_reported_as_killed(tiny_dataset, quick_plan):
    pids: list[int] = []

    def kill_the_child(procs):
        os.kill(procs[0].pid, signal.SIGKILL)
        return True

    # Persistent workers live from the first window to the end of the measurement: the child
    # does not wait for on_window, and non-persistent workers may already have ended with
    # their short epoch when the processes are listed.
    result = measure(
        _spec(tiny_dataset, "emulated", emulated_ms=(50.0, 0.0)),
        LoaderConfig(num_workers=2, batch_size=2, persistent_workers=True),
        quick_plan,
        on_window=_collect_pids(pids, then=kill_the_child),
    )

    assert (result.status, result.reason) == (INFEASIBLE, KILLED)
    assert "SIGKILL" in result.message and "OOM killer" in result.message
    assert len(pids) >= 3 and alive(pids) == []


def test_pruning_from_on_window_kills_the_child_and_its_workers(tiny_dataset, quick_plan):
    pids: list[int] = []
    result = measure(
        _spec(tiny_dataset, "emulated", emulated_ms=(30.0, 0.0)),
        LoaderConfig(num_workers=2, batch_size=2, persistent_workers=True),  # see above
        quick_plan,
        on_window=_collect_pids(pids, then=lambda procs: False),
    )

    assert result.status == PRUNED
    assert len(result.windows) == 1
    assert len(pids) >= 3 and alive(pids) == []
    # a pruned measurement stops at its last window: the rest is its teardown
    assert result.phases["extra"] == 0 and result.phases["teardown"] > 0


def test_emulated_batch_over_the_vram_cap_is_infeasible(tiny_dataset, quick_plan):
    spec = _spec(tiny_dataset, "emulated", emulated_mib=(600.0, 150.0), vram_cap=2**30)
    result = measure(spec, LoaderConfig(batch_size=4), quick_plan)

    assert (result.status, result.reason) == (INFEASIBLE, VRAM_CAP)
    assert result.message == "over the VRAM cap at batch 4: needs 1,200 MiB, cap 1,024 MiB"
    assert result.emulated


def test_corrupt_jpeg_is_a_bad_sample_naming_the_file(tiny_dataset, tmp_path, quick_plan):
    data = Path(shutil.copytree(tiny_dataset, tmp_path / "data"))
    bad = sorted((data / "images").rglob("*.jpg"))[3]
    bad.write_bytes(b"\xff\xd8\xff\xe0 this is not a JPEG" + os.urandom(64))
    # 4 steps of 4 images draw every one of the 16 images in the warm-up epoch.
    result = measure(_spec(str(data)), LoaderConfig(num_workers=2, batch_size=4), quick_plan)

    assert (result.status, result.reason) == (ERROR, BAD_SAMPLE), result.message
    assert bad.name in result.message
    assert measurement_processes() == []


def test_ctrl_c_in_bench_leaves_no_measurement_process(tiny_dataset):
    cmd = [
        sys.executable,
        "-m",
        "loadersearch",
        "bench",
        "--data",
        tiny_dataset,
        "--workload",
        "emulated",
        "--emulated-ms",
        "200,0",
        "--num-workers",
        "2",
        "--batch-size",
        "2",
        "--img-size",
        str(IMG),
        "--steps",
        "20",
        "--device",
        "cpu",
    ]
    bench = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:

        def child_and_workers() -> list[psutil.Process]:
            found = measurement_processes(bench.pid)
            return found if len(found) >= 3 else []  # the child and its 2 workers

        procs = wait_for(child_and_workers, what="the measurement's workers", timeout=60)
        bench.send_signal(signal.SIGINT)
        _, err = bench.communicate(timeout=30)
    finally:
        if bench.poll() is None:
            bench.kill()
    assert bench.returncode == 130
    assert "Interrupted" in err and "Traceback" not in err
    assert alive([p.pid for p in procs]) == []


def test_a_cuda_measurement_where_torch_sees_no_gpu_fails_loudly_not_on_the_cpu(
    tiny_dataset, monkeypatch
):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # the child inherits it: torch sees no GPU
    spec = WorkloadSpec(kind="train", data=tiny_dataset, device="cuda")
    plan = MeasurePlan(epochs=1, steps=1, windows_per_epoch=1, warmup_epochs=0, timeout_s=120)
    result = measure(spec, LoaderConfig(batch_size=2), plan)
    assert (result.status, result.reason) == (ERROR, NO_DEVICE)
    assert "torch sees no CUDA device" in result.message
    assert "CUDA_VISIBLE_DEVICES=''" in result.message or "without CUDA" in result.message
    assert result.windows == [] and not result.device.startswith("cpu")


def test_workers_started_by_spawn_are_measured_and_the_method_recorded(tiny_dataset):
    config = LoaderConfig(num_workers=1, batch_size=2, start_method="spawn")
    plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_epochs=1, warmup_steps=1,
                       timeout_s=180)  # fmt: skip
    result = measure(_spec(tiny_dataset), config, plan)
    assert result.ok, result.message
    assert result.config.start_method == "spawn" and "spawn" in result.config.label()
    # no CUDA here: the CUDA memory fields stay empty rather than made up
    assert result.peak_allocated_bytes is None and result.cuda_overhead_bytes is None


@pytest.mark.parametrize("workers", [0, 4])
def test_emulated_storage_latency_slows_each_sample_and_workers_overlap_it(tiny_dataset, workers):
    io_ms = 100.0  # far above the decode of a 64 px sample here (a few ms)
    config = LoaderConfig(num_workers=workers, batch_size=1)
    # Sized to the configuration: 4 workers x prefetch 2 ask for 2 x 8 + 4 = 20 steps, one full
    # epoch of the 16 images at most; without workers the plan's 4.
    plan = MeasurePlan(epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2,
                       timeout_s=120, epoch_limit_s=60)  # fmt: skip
    result = measure(_spec(tiny_dataset, emulated_io_ms=io_ms), config, plan)

    assert result.status == OK, result.message
    assert result.emulated_io_ms == io_ms
    assert any("EMULATED storage latency 100 ms/sample" in n for n in result.notes)
    assert result.epoch_steps == (16 if workers else 4)
    serial_limit = 1000.0 / io_ms  # img/s when every sample's wait is paid in turn
    if workers == 0:
        # Every image's wait is paid inside the timed loop: no window can be faster.
        for w in result.windows:
            assert w.seconds >= w.images * io_ms / 1000.0
        assert result.steady_rate <= serial_limit
    else:
        # 4 workers wait side by side (a sleep takes no CPU): well past one at a time, once
        # the epoch is long enough to have a steady part after the workers' start.
        assert result.steady_rate > 1.5 * serial_limit
    assert measurement_processes() == []
