"""How busy the machine was: a real CPU-burning process outside the measurement flags it; the
measurement's own processes (its child, its DataLoader workers) never count as outside load."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from loadersearch.errors import LoaderSearchError
from loadersearch.measure._hostload import BUSY_SHARE_ENV, HostLoad, HostLoadMeter, busy_share

# On this 2-core machine other test suites run beside ours: a threshold of 3/4 of the CPUs is
# well above what a quiet-enough machine shows and well below what two burners take.
SHARE = "0.75"

# Run in a separate process, so that the burners (started by the test) are outside its tree.
_MEASURE = """
import json, sys
from loadersearch import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure import measure
kind, workers = sys.argv[2], int(sys.argv[3])
# 128 px JPEG decoding: the loader's measured part lasts a second or two, as the emulated one
spec = WorkloadSpec(kind=kind, data=sys.argv[1], img_size=128, device="cpu",
                    emulated_ms=(150.0, 0.0))
plan = MeasurePlan(epochs=2, steps=6, windows_per_epoch=2, warmup_epochs=1, timeout_s=120)
r = measure(spec, LoaderConfig(num_workers=workers, batch_size=8), plan)
print(json.dumps({"status": r.status, "message": r.message, "outside_load": r.outside_load,
                  "outside_share": r.outside_share, "busy_host": r.busy_host,
                  "cpu_util_mean": r.cpu_util_mean, "notes": r.notes}))
"""


def _measure(data: str, kind: str, workers: int) -> dict:
    env = {**os.environ, BUSY_SHARE_ENV: SHARE}
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, data, kind, str(workers)],
        env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["status"] == "ok", out["message"]
    return out


def test_a_cpu_burning_process_outside_the_measurement_flags_it(tiny_dataset, burners):
    # the emulated device sleeps: the measurement itself needs little CPU
    out = _measure(tiny_dataset, "emulated", 0)
    assert out["busy_host"] is True, out
    assert out["outside_share"] >= float(SHARE)
    assert any("busy machine" in note for note in out["notes"])


def _background_share() -> float:
    """The outside share of the CPUs over one second in which this test runs nothing."""
    meter = HostLoadMeter()
    meter.start()
    time.sleep(1.0)  # the span measured, not a wait for something
    return meter.stop().outside_share


def test_the_measurements_own_workers_are_not_outside_load(tiny_dataset):
    # Two loader workers decoding JPEGs keep both CPUs busy: all of it is the measurement's.
    # Other test suites share this machine, so the outside share during the measurement is
    # compared with the machine's own just before and after it (nothing of this test runs
    # then): counting the workers as outside would add most of two CPUs to it.
    seen = []
    for _ in range(3):  # a burst of other work during one try: try again
        before = _background_share()
        out = _measure(tiny_dataset, "loader", 2)
        after = _background_share()
        seen.append((round(before, 2), round(out["outside_share"], 2), round(after, 2)))
        assert out["cpu_util_mean"] > 20  # the measurement itself ran
        # what others used and what the measurement used cannot add up to more than the CPUs
        # (on a saturated machine too): the workers were not counted twice
        cpus = len(os.sched_getaffinity(0))
        assert out["outside_load"] + out["cpu_util_mean"] / 100 <= cpus + 0.25, out
        if not out["busy_host"] or out["outside_share"] <= max(before, after) + 0.15:
            return
    raise AssertionError(f"outside share (before, during, after) {seen}: workers counted?")


def test_the_flag_follows_the_share_of_the_cpus_and_steal(monkeypatch):
    monkeypatch.delenv(BUSY_SHARE_ENV, raising=False)  # the default (the suite sets its own)
    quiet = HostLoad(wall_s=10.0, cpus=4, outside_cpu_s=4.0, steal_s=0.0)
    assert quiet.outside_load == pytest.approx(0.4) and quiet.outside_share == pytest.approx(0.1)
    assert not quiet.busy()
    assert HostLoad(wall_s=10.0, cpus=4, outside_cpu_s=10.0, steal_s=0.0).busy()  # 25 %
    assert HostLoad(wall_s=10.0, cpus=4, outside_cpu_s=0.0, steal_s=4.0).busy()  # 10 % steal
    monkeypatch.setenv(BUSY_SHARE_ENV, "0.05")
    assert busy_share() == 0.05 and quiet.busy()
    for bad in ("lots", "0", "-1", "nan"):
        monkeypatch.setenv(BUSY_SHARE_ENV, bad)
        with pytest.raises(LoaderSearchError, match="LOADERSEARCH_BUSY_SHARE=.* is not a pos"):
            busy_share()
