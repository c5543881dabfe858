"""The emulated accelerator: a stand-in device that sleeps per batch and checks its memory."""

from __future__ import annotations

from loadersearch.workload.emulated import EmulatedAccelerator, VramCapExceeded


def test_emulated_allocation_over_the_cap_raises_with_both_figures():
    acc = EmulatedAccelerator((0.0, 0.0), (600.0, 150.0), cap_bytes=8192 * 2**20)
    acc.step(48)  # 7,800 MiB fits
    try:
        acc.step(64)
    except VramCapExceeded as e:
        assert str(e) == "over the VRAM cap at batch 64: needs 10,200 MiB, cap 8,192 MiB"
    else:
        raise AssertionError("batch 64 should be over the cap")
    assert acc.peak_bytes == 7800 * 2**20
