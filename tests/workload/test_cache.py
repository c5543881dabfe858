"""The ram and memmap caches: built once, reused, invalidated, safe to build concurrently, and
the same images the dataset would decode."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from loadersearch.workload import _cache_info as cache_info
from loadersearch.workload import _memmap_cache as memmap
from loadersearch.workload import _ram_cache as ram
from loadersearch.workload._datasets import collate, open_dataset, read_index
from loadersearch.workload._datasets.decode import decode
from loadersearch.workload._spec import WorkloadSpec

SIZE = 64


def _copy(src: str, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _memmap(root: str, directory: Path, size: int = SIZE) -> cache_info.CacheInfo:
    index = read_index(root)
    return memmap.ensure_memmap(index.root, index.paths, size, directory=directory)


def test_memmap_is_built_once_then_reused_outside_the_dataset(tiny_dataset, tmp_path):
    first = _memmap(tiny_dataset, tmp_path / "c")
    assert first.built and first.build_s is not None and first.images == 16
    assert Path(first.path).parent == tmp_path / "c"
    assert not Path(first.path).is_relative_to(tiny_dataset)
    assert first.bytes == os.path.getsize(first.path)
    again = _memmap(tiny_dataset, tmp_path / "c")
    assert not again.built and again.path == first.path and again.build_s == first.build_s
    assert "reused" in again.describe() and "KiB on disk" in again.describe()  # not 0.2 MiB


def test_memmap_is_rebuilt_when_an_image_or_the_size_changes(tiny_dataset, tmp_path):
    root = _copy(tiny_dataset, tmp_path / "data")
    first = _memmap(str(root), tmp_path / "c")
    other_size = _memmap(str(root), tmp_path / "c", size=2 * SIZE)
    assert other_size.built and other_size.path != first.path  # one file per size
    image = next((root / "images").iterdir())
    st = image.stat()
    os.utime(image, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    changed = _memmap(str(root), tmp_path / "c")
    assert changed.built and changed.path == first.path  # rebuilt in place
    assert not _memmap(str(root), tmp_path / "c").built


def test_memmap_holds_each_image_decoded_and_scaled_to_fit(tiny_dataset, tmp_path):
    info = _memmap(tiny_dataset, tmp_path)
    images = memmap.MemmapImages(info.path)
    index = read_index(tiny_dataset)
    for i in (0, 5, 15):
        expected = memmap._resized(decode(os.path.join(index.root, index.paths[i])), SIZE)
        stored = images.array(i)
        assert max(stored.shape[:2]) == SIZE and stored.shape[2] == 3
        np.testing.assert_array_equal(stored, expected)


def test_a_dataset_on_the_memmap_cache_augments_per_sample(tiny_dataset, tmp_path):
    ds = open_dataset(tiny_dataset, img_size=SIZE, cache="memmap", cache_dir=str(tmp_path))
    plain = open_dataset(tiny_dataset, img_size=SIZE)
    assert ds.cache_info is not None and ds.cache_info.mode == "memmap"
    image, boxes = ds[3]
    assert image.shape == (3, SIZE, SIZE) and image.dtype == torch.uint8
    # The same boxes as without the cache: labels are normalised, so the scaled image keeps them.
    ds.augment = plain.augment = False
    _, cached_boxes = ds[3]
    _, plain_boxes = plain[3]
    np.testing.assert_allclose(cached_boxes, plain_boxes, atol=0.02)
    # Online augmentation still runs on top of the stored pixels: another epoch, another draw.
    ds.augment = True
    ds.set_epoch(1)
    assert not torch.equal(ds[3][0], image)


@pytest.mark.slow
def test_ram_cache_gives_exactly_the_decoded_samples_also_in_spawned_workers(
    tiny_dataset, tmp_path
):
    ds = open_dataset(tiny_dataset, img_size=SIZE, cache="ram")
    plain = open_dataset(tiny_dataset, img_size=SIZE)
    assert ds.cache_info.mode == "ram" and ds.cache_info.bytes > 0
    assert ds._cache.buffer.is_shared()
    for i in (0, 7):
        assert torch.equal(ds[i][0], plain[i][0])
    loader = torch.utils.data.DataLoader(
        ds, batch_size=4, num_workers=1, collate_fn=collate, multiprocessing_context="spawn"
    )
    images, _ = next(iter(loader))
    assert torch.equal(images[0], plain[0][0])


@pytest.mark.slow
def test_memmap_dataset_pickles_by_path_for_spawned_workers(tiny_dataset, tmp_path):
    ds = open_dataset(tiny_dataset, img_size=SIZE, cache="memmap", cache_dir=str(tmp_path))
    loader = torch.utils.data.DataLoader(
        ds, batch_size=4, num_workers=1, collate_fn=collate, multiprocessing_context="spawn"
    )
    images, _ = next(iter(loader))
    assert torch.equal(images[1], ds[1][0])
    assert memmap.MemmapImages(ds.cache_info.path).__getstate__() == {"path": ds.cache_info.path}


def _build_in_child(root: str, directory: str, queue) -> None:  # noqa: ANN001
    info = _memmap(root, Path(directory))
    queue.put((info.built, info.path))


@pytest.mark.slow
def test_two_processes_building_the_same_cache_build_it_once(tiny_dataset, tmp_path):
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [
        ctx.Process(target=_build_in_child, args=(tiny_dataset, str(tmp_path), queue))
        for _ in range(2)
    ]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert sorted(built for built, _ in results) == [False, True]
    assert len({path for _, path in results}) == 1
    leftovers = [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name]
    assert leftovers == []
    assert len(memmap.MemmapImages(results[0][1])) == 16


def test_a_killed_build_leaves_no_cache_that_is_used(tiny_dataset, tmp_path, monkeypatch):
    calls = []
    resized = memmap._resized

    def failing(image, size):  # noqa: ANN001
        calls.append(1)
        if len(calls) == 3:  # Ctrl-C in the middle of the build
            raise KeyboardInterrupt
        return resized(image, size)

    monkeypatch.setattr(memmap, "_resized", failing)
    with pytest.raises(KeyboardInterrupt):
        _memmap(tiny_dataset, tmp_path)
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir() if not p.name.endswith(".lock")] == []
    assert _memmap(tiny_dataset, tmp_path).built


def test_cache_dir_follows_the_option_then_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(cache_info.CACHE_ENV, str(tmp_path / "env"))
    assert cache_info.cache_dir() == tmp_path / "env"
    assert cache_info.cache_dir(tmp_path / "opt") == tmp_path / "opt"
    monkeypatch.delenv(cache_info.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_info.cache_dir() == tmp_path / "xdg" / "loadersearch"


def test_a_cache_too_big_for_the_disk_or_memory_is_refused_naming_the_fix(
    tiny_dataset, tmp_path, monkeypatch
):
    index = read_index(tiny_dataset)
    monkeypatch.setattr(ram, "available_memory", lambda: 1000)
    with pytest.raises(cache_info.CacheError, match="--cache memmap"):
        ram.check_ram(index.root, index.paths)
    monkeypatch.setattr(ram, "available_memory", lambda: None)
    monkeypatch.setattr(ram, "SHM_DIR", str(tmp_path / "no-shm"))
    ram.check_ram(index.root, index.paths)  # nothing to compare with: allowed
    real = shutil.disk_usage
    monkeypatch.setattr(
        shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(64 * 2**20, 64 * 2**20 - 10, 10)
    )
    monkeypatch.setattr(ram, "SHM_DIR", "/dev/shm")
    with pytest.raises(cache_info.CacheError, match="--shm-size"):
        ram.check_ram(index.root, index.paths)
    monkeypatch.setattr(shutil, "disk_usage", real)
    monkeypatch.setattr(
        shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 10, 10)
    )
    with pytest.raises(cache_info.CacheError, match="--cache-dir"):
        memmap.ensure_memmap(index.root, index.paths, SIZE, directory=tmp_path)


def test_workload_spec_checks_the_cache_option():
    assert WorkloadSpec(cache="memmap").cache == "memmap"
    with pytest.raises(ValueError, match="none, ram, memmap"):
        WorkloadSpec(cache="disk")
    with pytest.raises(ValueError, match="cache"):
        WorkloadSpec(cache="ram", kind="loader", pipeline={"dataset": "m:make"})


def test_a_measurement_uses_the_cache_its_configuration_names(tiny_dataset, tmp_path, monkeypatch):
    from loadersearch import LoaderConfig
    from loadersearch.measure import MeasurePlan, measure

    monkeypatch.setenv(cache_info.CACHE_ENV, str(tmp_path))
    spec = WorkloadSpec(kind="loader", data=tiny_dataset, img_size=SIZE, device="cpu")
    plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_steps=1)
    result = measure(spec, LoaderConfig(0, 4, cache="memmap"), plan)
    assert result.ok, result.message
    assert any(n.startswith("memmap cache: 16 images") for n in result.notes)
    assert len(list(tmp_path.glob("*.lscache"))) == 1  # built by the parent, before the child


def test_a_large_build_decodes_in_threads_to_the_same_file(tiny_dataset, tmp_path, monkeypatch):
    serial = _memmap(tiny_dataset, tmp_path / "serial")
    monkeypatch.setattr(memmap, "PARALLEL_FROM", 4)  # 16 images: a "large" dataset
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    parallel = _memmap(tiny_dataset, tmp_path / "parallel")
    a, b = memmap.MemmapImages(serial.path), memmap.MemmapImages(parallel.path)
    for i in range(16):
        np.testing.assert_array_equal(a.array(i), b.array(i))


def test_an_undecodable_image_stops_the_build_naming_it_unless_skipped(tiny_dataset, tmp_path):
    from loadersearch.errors import BadSampleError

    root = _copy(tiny_dataset, tmp_path / "data")
    bad = sorted((root / "images").iterdir())[2]
    bad.write_bytes(b"not a jpeg")
    with pytest.raises(BadSampleError, match=bad.name):
        _memmap(str(root), tmp_path / "c")
    assert not list((tmp_path / "c").glob("*.lscache"))
    index = read_index(str(root))
    info = memmap.ensure_memmap(
        index.root, index.paths, SIZE, directory=tmp_path / "c", skip_bad_samples=True
    )
    assert memmap.MemmapImages(info.path).array(2) is None
