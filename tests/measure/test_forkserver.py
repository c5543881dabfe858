"""The fork server: one preloaded process per run forks a fresh measuring process per trial,
keeps the isolation (own process group, nothing left behind, no CUDA before the fork) and dies
with its parent. Real processes throughout."""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest
from helpers.procs import alive, cmdline, fork_servers, measurement_processes
from helpers.wait import wait_for

from loadersearch import LoaderConfig
from loadersearch.measure import measure
from loadersearch.measure._forkserver import serving
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._result import BAD_DATASET, ERROR, INFEASIBLE, OK, TIMEOUT
from loadersearch.workload import WorkloadSpec

IMG = 64


def _spec(data: str, **kw) -> WorkloadSpec:
    return WorkloadSpec(
        kind="emulated", data=data, img_size=IMG, device="cpu", emulated_ms=(5.0, 0.0), **kw
    )


def _gone(pid: int) -> bool:
    """The process ``pid`` has ended (a zombie has ended too; reap it if it is ours)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _parent_and_group(into: list[tuple[int, int, int]]):
    """An on_window callback that records (child pid, its parent, its process group) once."""

    def on_window(window) -> bool:
        if not into:
            child = measurement_processes()[0]
            into.append((child.pid, child.ppid(), os.getpgid(child.pid)))
        return True

    return on_window


def test_one_server_forks_a_fresh_process_group_per_measurement(tiny_dataset, quick_plan):
    seen: list[tuple[int, int, int]] = []
    with serving():
        for workers in (0, 2):
            got: list[tuple[int, int, int]] = []
            config = LoaderConfig(num_workers=workers, batch_size=2)
            result = measure(_spec(tiny_dataset), config, quick_plan,
                             on_window=_parent_and_group(got))  # fmt: skip
            assert result.status == OK, result.message
            seen += got
            assert measurement_processes() == []
        servers = fork_servers()
        assert len(servers) == 1
    (pid1, parent1, group1), (pid2, parent2, group2) = seen
    assert pid1 != pid2  # a fresh process per measurement
    assert parent1 == parent2 == servers[0].pid  # both forked by the one server
    assert (group1, group2) == (pid1, pid2)  # each leads its own process group
    # the block's end stops the server
    wait_for(lambda: fork_servers() == [], what="the fork server's end", timeout=30, every=0.05)


def test_a_block_that_measures_nothing_starts_no_server():
    with serving():
        assert fork_servers() == []


def test_peak_memory_is_the_configurations_own(tiny_dataset, quick_plan):
    # Slow steps and persistent workers: the probes (every 0.25 s) see the workers alive.
    spec = dataclasses.replace(_spec(tiny_dataset), emulated_ms=(60.0, 0.0))
    configs = [LoaderConfig(0, 2), LoaderConfig(2, 2, False, 2, True), LoaderConfig(0, 2)]
    with serving():
        rss = [measure(spec, c, quick_plan).peak_rss_bytes for c in configs]
    # Workers are counted with their configuration; nothing carries over to the next one.
    assert rss[1] > rss[0]
    assert rss[2] < 1.5 * rss[0]


def test_the_server_reads_the_dataset_index_once_per_block(tiny_dataset, tmp_path, quick_plan):
    data = Path(shutil.copytree(tiny_dataset, tmp_path / "data"))
    config = LoaderConfig(batch_size=2)
    with serving():
        assert measure(_spec(str(data)), config, quick_plan).status == OK
        label = sorted((data / "labels").rglob("*.txt"))[0]
        label.write_text("this is not a YOLO label\n")
        # The index the server read before the edit serves the whole block...
        assert measure(_spec(str(data)), config, quick_plan).status == OK
    # ...and a new block reads the labels again.
    result = measure(_spec(str(data)), config, quick_plan)
    assert (result.status, result.reason) == (ERROR, BAD_DATASET)
    assert label.name in result.message


def test_the_child_runs_in_the_callers_current_directory(tiny_dataset, tmp_path, quick_plan,
                                                         monkeypatch):  # fmt: skip
    shutil.copytree(tiny_dataset, tmp_path / "data")
    with serving():
        assert measure(_spec(tiny_dataset), LoaderConfig(batch_size=2), quick_plan).ok
        monkeypatch.chdir(tmp_path)  # after the server started elsewhere
        result = measure(_spec("data"), LoaderConfig(batch_size=2), quick_plan)
    assert result.status == OK, result.message


_CUDA_SPY = textwrap.dedent(
    """
    import os, sys
    import torch
    server = os.getpid()
    log = sys.argv[1]
    def spy(real, name):
        def call(*args, **kwargs):
            with open(log, "a") as f:
                f.write(("server " if os.getpid() == server else "child ") + name + "\\n")
            return real(*args, **kwargs)
        return call
    torch._C._cuda_getDeviceCount = spy(torch._C._cuda_getDeviceCount, "device_count")
    torch.cuda._lazy_init = spy(torch.cuda._lazy_init, "lazy_init")
    del sys.argv[1]
    from loadersearch.measure._forkserver_process import main
    sys.exit(main())
    """
)


def test_the_server_never_touches_cuda_before_forking(tiny_dataset, tmp_path, quick_plan):
    log = tmp_path / "cuda-calls.txt"
    command = [sys.executable, "-c", _CUDA_SPY, str(log)]
    spec = WorkloadSpec(kind="loader", data=tiny_dataset, img_size=IMG)  # device "auto"
    with serving(command=command):
        for _ in range(2):
            assert measure(spec, LoaderConfig(batch_size=2), quick_plan).status == OK
    calls = log.read_text().splitlines()
    # Each child asked for the device itself (so the spy works); the server never did.
    assert "child device_count" in calls
    assert not [c for c in calls if c.startswith("server")]


def test_a_server_that_is_not_ready_in_time_is_a_timeout_and_is_killed(tiny_dataset):
    hang = [sys.executable, "-c", "import time; time.sleep(600)"]
    plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_epochs=0, timeout_s=2)
    with serving(command=hang):
        result = measure(_spec(tiny_dataset), LoaderConfig(batch_size=2), plan)
        assert (result.status, result.reason) == (INFEASIBLE, TIMEOUT)
        assert "during start-up" in result.message
        assert [p for p in psutil.Process().children() if "time.sleep(600)" in
                cmdline(p)] == []  # fmt: skip


def test_a_killed_server_takes_its_measurement_with_it_and_is_replaced(tiny_dataset, quick_plan):
    pids: list[int] = []

    def kill_the_server(window) -> bool:
        if not pids:
            pids.extend(p.pid for p in measurement_processes())
            os.kill(fork_servers()[0].pid, signal.SIGKILL)
        return True

    config = LoaderConfig(num_workers=2, batch_size=2, persistent_workers=True)  # alive all along
    plan = MeasurePlan(epochs=3, steps=8, windows_per_epoch=2, timeout_s=120)
    with serving():
        spec = WorkloadSpec(
            kind="emulated", data=tiny_dataset, img_size=IMG, device="cpu",
            emulated_ms=(100.0, 0.0),
        )  # fmt: skip
        result = measure(spec, config, plan, on_window=kill_the_server)
        assert result.status != OK
        assert len(pids) >= 3
        wait_for(lambda: alive(pids) == [], what="the measuring processes gone", timeout=30)
        assert measure(_spec(tiny_dataset), config, quick_plan).status == OK  # a new server


_PARENT = textwrap.dedent(
    """
    import sys, time
    from loadersearch import LoaderConfig, MeasurePlan, WorkloadSpec
    from loadersearch.measure import measure
    from loadersearch.measure._forkserver import serving
    spec = WorkloadSpec(kind="emulated", data=sys.argv[1], img_size=64, device="cpu",
                        emulated_ms=(5.0, 0.0))
    plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_epochs=0)
    with serving():
        print(measure(spec, LoaderConfig(batch_size=2), plan).status, flush=True)
        time.sleep(600)
    """
)


def test_the_server_dies_with_the_process_that_started_it(tiny_dataset):
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, tiny_dataset], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout.readline().strip() == OK
        servers = fork_servers(parent.pid)
        assert len(servers) == 1
        parent.kill()  # SIGKILL: no clean-up code runs in the parent
        parent.wait()
        wait_for(lambda: _gone(servers[0].pid), what="the fork server gone", timeout=30)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


@pytest.mark.parametrize("inside_block", [False, True])
def test_ctrl_c_during_a_served_measurement_leaves_nothing(tiny_dataset, inside_block):
    pids: list[int] = []

    def interrupt(window) -> bool:
        pids.extend(p.pid for p in measurement_processes())
        raise KeyboardInterrupt

    config = LoaderConfig(num_workers=2, batch_size=2, persistent_workers=True)  # alive all along
    plan = MeasurePlan(epochs=2, steps=4, windows_per_epoch=2, timeout_s=120)
    with pytest.raises(KeyboardInterrupt):
        if inside_block:
            with serving():
                measure(_spec(tiny_dataset), config, plan, on_window=interrupt)
        else:
            measure(_spec(tiny_dataset), config, plan, on_window=interrupt)
    assert len(pids) >= 3 and alive(pids) == []
    wait_for(lambda: fork_servers() == [], what="the fork server's end", timeout=30, every=0.05)


def test_on_ready_comes_once_before_the_first_window_with_the_full_epoch(tiny_dataset,
                                                                         quick_plan):  # fmt: skip
    events: list[tuple[str, int]] = []
    result = measure(
        _spec(tiny_dataset), LoaderConfig(num_workers=1, batch_size=3), quick_plan,
        on_ready=lambda r: events.append(("ready", r.dataset_images)),
        on_window=lambda w: events.append(("window", w.index)) is None,
    )  # fmt: skip
    assert result.status == OK, result.message
    assert events[0] == ("ready", 15)  # 16 images in batches of 3, the last one dropped
    assert [e for e in events if e[0] == "ready"] == [events[0]]
    assert [i for kind, i in events[1:]] == list(range(quick_plan.n_windows))
