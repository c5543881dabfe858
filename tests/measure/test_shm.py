"""/dev/shm: what a configuration needs there, and a real measurement under a 1 MiB /dev/shm
(a private mount namespace: the machine's /dev/shm is never touched)."""

from __future__ import annotations

import json
import sys

import pytest
from helpers.small_shm import skip_without_private_mounts, under_small_shm

from loadersearch.measure._shm import (
    ShmSpace,
    batch_bytes,
    check_shm,
    host_inflight_budget,
    inflight_budget,
    inflight_bytes,
    shm_space,
    shm_warning,
)
from loadersearch.workload import WorkloadSpec

MiB = 2**20


def test_batches_in_flight_are_batch_bytes_times_workers_times_prefetch():
    assert inflight_bytes(1000, 0, None) == 0  # no workers: nothing passes through /dev/shm
    assert inflight_bytes(1000, 4, None) == 8000  # PyTorch's default prefetch_factor 2
    assert inflight_bytes(1000, 4, 8) == 32000


def test_a_built_in_batch_is_its_uint8_images_and_boxes():
    spec = WorkloadSpec(kind="loader")
    one = batch_bytes(spec, 16, 416)
    assert 16 * 3 * 416 * 416 <= one <= 16 * 3 * 416 * 416 * 1.01
    check = check_shm(spec, "cuda", num_workers=8, batch_size=16, prefetch_factor=4)
    assert check.need_bytes == one * 8 * 4
    assert "this configuration (8 workers x batch 16 x prefetch 4) needs about" in check.line()
    ranks = WorkloadSpec(kind="loader", gpus=2)
    largest = check_shm(ranks, "cuda", num_workers=8, batch_size=16, prefetch_factor=4,
                        largest=True)  # fmt: skip
    assert largest.need_bytes == 2 * one * 8 * 4  # every rank has its workers
    assert "the largest configuration (8 workers x batch 16 x prefetch 4 x 2 ranks)" in \
        largest.line()  # fmt: skip
    none = check_shm(spec, "cuda", num_workers=0, batch_size=16, prefetch_factor=None)
    assert none.need_bytes == 0
    assert none.line().endswith("this configuration (no workers) needs none")


def test_the_queue_the_search_allows_is_half_of_dev_shm_or_a_tenth_of_ram_per_rank():
    from loadersearch._hardware import Hardware

    GiB = 2**30
    image = 3 * 416 * 416 + 512
    # a container's 1 GiB /dev/shm on a 64 GiB host: /dev/shm decides (~1,033 images)
    assert inflight_budget(GiB, 64 * GiB, image) == pytest.approx(0.5 * GiB / image)
    # a VM's 8 GiB of RAM with a 4 GiB /dev/shm: the RAM's tenth decides
    assert inflight_budget(4 * GiB, 8 * GiB, image) == pytest.approx(0.1 * 8 * GiB / image)
    assert inflight_budget(GiB, None, image, ranks=2) == pytest.approx(0.25 * GiB / image)
    assert inflight_budget(None, None, image) is None  # nothing known: no bound
    assert inflight_budget(GiB, GiB, None) is None  # a pipeline's batches: unknown size
    host = Hardware(shm_bytes=GiB, ram_bytes=64 * GiB)
    spec = WorkloadSpec(kind="loader")  # 416 px on CUDA and for the loader on a CPU
    assert host_inflight_budget(host, spec, "cuda") == pytest.approx(0.5 * GiB / image)
    train = WorkloadSpec(kind="train")  # 128 px on a CPU: ~10x the images
    assert host_inflight_budget(host, train, "cpu") > 9 * host_inflight_budget(host, spec, "cpu")


def test_the_warning_names_the_need_the_space_and_the_fix():
    space = ShmSpace(size_bytes=64 * MiB, free_bytes=60 * MiB)
    assert shm_warning(space, 10 * MiB, "the largest configuration") is None
    warning = shm_warning(space, 400 * MiB, "the largest configuration")
    assert warning.startswith("the largest configuration needs about 400.0 MiB of /dev/shm")
    assert "60.0 MiB free of 64.0 MiB" in warning and "--shm-size" in warning
    assert shm_warning(None, 400 * MiB, "x") is None  # no /dev/shm: nothing to say


# Run in the private namespace: measure two configurations, print their outcomes as JSON.
_MEASURE = """
import json, sys
from loadersearch import LoaderConfig, MeasurePlan, WorkloadSpec
from loadersearch.measure import measure
from loadersearch.measure._shm import shm_space
spec = WorkloadSpec(kind="loader", data=sys.argv[1], img_size=256, device="cpu")
plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_epochs=0, timeout_s=120)
out = {"shm": shm_space().size_bytes}
for workers in (2, 0):
    r = measure(spec, LoaderConfig(num_workers=workers, batch_size=16), plan)
    out[workers] = [r.status, r.reason, r.message]
print(json.dumps(out))
"""


def test_under_a_1_mib_dev_shm_workers_are_infeasible_shm_full_and_0_workers_measure(
    tiny_dataset,
):
    skip_without_private_mounts()
    done = under_small_shm("1m", [sys.executable, "-c", _MEASURE, tiny_dataset], timeout=300)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["shm"] == MiB
    # a batch of 16 images at 256 px is 3 MiB: no worker can hand one over in 1 MiB
    status, reason, message = out["2"]
    assert (status, reason) == ("infeasible", "shm_full"), message
    assert "/dev/shm ran out (1.0 MiB in all)" in message and "--shm-size" in message
    assert out["0"][0] == "ok", out["0"]
    assert shm_space().size_bytes != MiB  # this process's /dev/shm was never touched
