"""The page cache of a dataset's files: read in, evicted, and asked with mincore."""

from __future__ import annotations

import os

import pytest

from loadersearch import LoaderConfig
from loadersearch.measure import _pagecache as pagecache
from loadersearch.measure import measure
from loadersearch.measure._plan import MeasurePlan
from loadersearch.workload import WorkloadSpec


def _file(path, size: int = 256 * 1024) -> str:
    with open(path, "wb") as f:
        f.write(os.urandom(size))
    return str(path)


def test_residency_sees_a_file_read_in_and_evicted(tmp_path):
    path = _file(tmp_path / "a.bin")
    pagecache.warm([path])
    assert pagecache.residency([path]).fraction == 1.0
    pagecache.evict([path])
    after = pagecache.residency([path])
    assert after.checked
    if after.fraction > 0.05:  # a file system that ignores the advice: the check must say so
        pytest.skip(f"{tmp_path} keeps {after.fraction:.0%} after posix_fadvise(DONTNEED)")
    assert after.fraction <= 0.05


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm")
def test_a_tmpfs_file_cannot_be_evicted_and_residency_says_so():
    # tmpfs pages are the file itself: DONTNEED cannot drop them, and mincore must tell
    import tempfile

    with tempfile.TemporaryDirectory(dir="/dev/shm") as d:
        path = _file(os.path.join(d, "a.bin"))
        pagecache.evict([path])
        assert pagecache.residency([path]).fraction == 1.0


def test_dataset_files_leave_out_hidden_files(tmp_path):
    (tmp_path / "images").mkdir()
    _file(tmp_path / "images" / "x.jpg", 10)
    _file(tmp_path / ".marker", 10)
    (tmp_path / ".lock").mkdir()
    _file(tmp_path / ".lock" / "y", 10)
    assert pagecache.dataset_files(tmp_path) == [str(tmp_path / "images" / "x.jpg")]


def test_a_cold_measurement_evicts_before_each_epoch_and_reports_it(tiny_dataset):
    spec = WorkloadSpec(kind="loader", data=tiny_dataset, img_size=64, device="cpu")
    plan = MeasurePlan(
        epochs=2, steps=2, windows_per_epoch=1, warmup_steps=1, extra={"cold_cache": True}
    )
    result = measure(spec, LoaderConfig(batch_size=2), plan)
    assert result.ok, result.message
    info = result.page_cache
    assert info["evictions"] == 2
    assert info["files"] == len(pagecache.dataset_files(tiny_dataset))
    assert info["checked"] and info["resident_after_evict"] is not None
    assert [len(e["waits"]) for e in result.steps] == [2, 2]


def test_a_resident_feed_never_waits_for_the_loader(tiny_dataset):
    spec = WorkloadSpec(kind="emulated", data=tiny_dataset, img_size=64, emulated_ms=(5, 0))
    plan = MeasurePlan(
        epochs=2, steps=3, windows_per_epoch=1, warmup_steps=1, extra={"resident": True}
    )
    result = measure(spec, LoaderConfig(batch_size=2), plan)
    assert result.ok, result.message
    waits = [w for e in result.steps for w in e["waits"]]
    steps = [w.seconds for w in result.windows]
    # 3 steps of 5 ms each per epoch: the data waits are a small part of that
    assert sum(waits) < 0.5 * sum(steps)
