"""The batch-size probe under a real CUDA cap: enough steps, and headroom below the cap (an
injected measure function stands in for the GPU, which this machine does not have)."""

from __future__ import annotations

import pytest

from loadersearch.config import WorkloadSpec
from loadersearch.measure.result import OK, MeasureResult
from loadersearch.search.batchprobe import (
    HEADROOM,
    PROBE_PLAN,
    allocator_limit,
    has_headroom,
    probe_max_batch,
)

GIB = 2**30


@pytest.fixture(autouse=True)
def own_lock_dir(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("LOADERSEARCH_LOCK_DIR", str(tmp_path / "locks"))


def test_the_probe_runs_six_steps_and_measures_under_the_tightened_cap() -> None:
    steps = PROBE_PLAN.warmup_epochs * PROBE_PLAN.warmup_steps + PROBE_PLAN.epochs * (
        PROBE_PLAN.steps
    )
    assert steps >= 6
    assert PROBE_PLAN.warmup_epochs >= 1  # the overhead is measured after the first step


def test_headroom_is_ninety_percent_of_what_the_allocator_may_use() -> None:
    assert allocator_limit(8 * GIB, GIB) == 7 * GIB
    assert allocator_limit(8 * GIB, None) == 8 * GIB
    assert allocator_limit(None, GIB) is None
    assert has_headroom(int(0.9 * 7 * GIB), 7 * GIB)
    assert not has_headroom(int(0.9 * 7 * GIB) + 1, 7 * GIB)
    assert has_headroom(None, 7 * GIB) and has_headroom(GIB, None)


def test_a_batch_that_runs_but_leaves_no_headroom_does_not_fit() -> None:
    # 1 GiB outside the allocator, 0.1 GiB of tensors per image: 7 GiB for the allocator under
    # an 8 GiB cap, 6.3 GiB with headroom: batch 63 at most; the grid is 16, 32, 48, 64.
    def measure(workload, config, plan, *, on_window=None) -> MeasureResult:
        assert plan == PROBE_PLAN
        return MeasureResult(
            config=config, status=OK,
            peak_allocated_bytes=int(config.batch_size * 0.1 * GIB),
            peak_vram_bytes=int(config.batch_size * 0.11 * GIB), cuda_overhead_bytes=GIB,
        )  # fmt: skip

    spec = WorkloadSpec(kind="train", device="cuda", vram_cap=8 * GIB)
    result = probe_max_batch(spec, [16, 32, 48, 64], measure_fn=measure)
    assert result.max_batch == 48
    over = next(p for p in result.probes if p["batch"] == 64)
    assert over["fits"] is False and over["status"] == OK
    assert f"{HEADROOM:.0%} of the 7,168 MiB" in over["message"]
