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


class _Items:
    """A dataset of its indices, with one attribute of its own."""

    num_classes = 3

    def __init__(self) -> None:
        self.epoch = 0

    def __len__(self) -> int:
        return 5

    def __getitem__(self, index: int) -> int:
        return index

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


def test_emulated_storage_waits_before_every_sample_and_is_the_dataset_otherwise():
    import pickle
    import time

    from loadersearch.workload.emulated import EmulatedStorage

    slow = EmulatedStorage(_Items(), 30.0)
    assert len(slow) == 5 and slow.num_classes == 3
    slow.set_epoch(2)
    assert slow.dataset.epoch == 2
    t0 = time.perf_counter()
    assert [slow[i] for i in range(3)] == [0, 1, 2]
    assert time.perf_counter() - t0 >= 3 * 0.030  # a sleep never returns early
    # spawn and forkserver workers receive the dataset pickled
    copy = pickle.loads(pickle.dumps(slow))
    assert copy.ms == 30.0 and copy[4] == 4 and copy.num_classes == 3
    assert not hasattr(slow, "missing_attribute")  # an AttributeError, not a KeyError
