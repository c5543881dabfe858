"""AutoLoader in a real training loop: a dataset with an emulated storage latency (so that the
worker count matters on 2 cores) and the emulated accelerator as the step. It serves every
batch of each epoch once, in the order a plain DataLoader draws, across its switches; each
switch and the end leave no worker of the previous loader; a step that raises leaves none."""

from __future__ import annotations

import os

import psutil
import pytest
import torch
from helpers import pipelines
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

import loadersearch
from loadersearch.workload import EmulatedAccelerator

# 2 ms per sample, batches of 4: one worker loads ~100 batches/s; the step takes 4 ms.
DEVICE = EmulatedAccelerator(ms=(4.0, 0.0), mib=(0.0, 0.0), cap_bytes=None)
SMALL = {"max_workers": 2, "window_steps": 2}  # a segment: 4 warm-up + 8 measured steps


# Child processes other tests of the session left running (fork servers kept for reuse):
# not this test's DataLoader workers.
_OTHERS: set[int] = set()


@pytest.fixture(autouse=True)
def _others() -> None:
    _OTHERS.clear()
    _OTHERS.update(p.pid for p in psutil.Process(os.getpid()).children(recursive=True))


def _workers() -> list[int]:
    """This test's child processes (DataLoader workers, forked)."""
    children = psutil.Process(os.getpid()).children(recursive=True)
    return [p.pid for p in children if p.pid not in _OTHERS]


def _plain(ds, epochs: int, **kwargs) -> list[list[int]]:
    torch.manual_seed(0)
    loader = DataLoader(ds, **kwargs)
    return [b.flatten().tolist() for _ in range(epochs) for b in loader]


def _served(loader, epochs: int, on_batch=None) -> list[list[int]]:
    out = []
    for _ in range(epochs):
        for batch in loader:
            DEVICE.step(len(batch))
            if on_batch is not None:
                on_batch(batch)
            out.append(batch.flatten().tolist())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("drop_last", [False, True])
def test_every_batch_is_served_once_in_the_samplers_order_across_switches(drop_last) -> None:
    ds = pipelines.Slow(n=130, ms=2.0)  # 32.5 batches: the last one short unless dropped
    expected = _plain(ds, 3, batch_size=4, shuffle=True, drop_last=drop_last)

    torch.manual_seed(0)
    loader = loadersearch.AutoLoader(ds, batch_size=4, shuffle=True, drop_last=drop_last, **SMALL)
    served = _served(loader, 3)

    assert served == expected  # same batches, same boundaries, same order, three epochs
    assert len(loader.tuner.order) >= 2  # it switched configurations in the first epoch
    assert loader.config is not None and loader.report is not None
    loader.close()


@pytest.mark.slow
def test_tuning_the_batch_size_serves_every_index_once_and_keeps_the_winner() -> None:
    ds = pipelines.Slow(n=250, ms=0.2)  # a 4 ms step a batch, whatever its size: 8 wins
    torch.manual_seed(0)
    expected = [i for b in DataLoader(pipelines.Slow(250, 0.0), batch_size=4, shuffle=True)
                for i in b.flatten().tolist()]  # fmt: skip
    torch.manual_seed(0)
    with loadersearch.AutoLoader(
        ds, batch_size=4, shuffle=True, batch_sizes=[8], tune_steps=48, **SMALL
    ) as loader:
        first = _served(loader, 1)

        assert [i for b in first for i in b] == expected  # the sampler's order, each once
        assert {len(b) for b in first[:-1]} == {4, 8}  # both sizes served their segments
        assert {c.batch_size for c in loader.tuner.candidates} == {4, 8}
        assert loader.config.batch_size == 8 and loader.batch_size == 8 and len(loader) == 32
        later = _served(loader, 1)
        assert [len(b) for b in later] == [8] * 31 + [2]  # the last one short, as a DataLoader's
        assert sorted(i for b in later for i in b) == list(range(250))


def test_a_user_batch_sampler_keeps_its_batches() -> None:
    ds = pipelines.Slow(n=60, ms=1.0)
    batches = BatchSampler(SequentialSampler(range(60)), batch_size=5, drop_last=False)
    loader = loadersearch.AutoLoader(ds, batch_sampler=batches, **SMALL)
    assert _served(loader, 1) == [list(b) for b in batches]
    loader.close()


@pytest.mark.slow
def test_a_user_batch_sampler_keeps_its_batches_after_settling_and_counts_its_images() -> None:
    # Accelerate hands its DataLoaders a batch sampler (the Hugging Face Trainer's way): the
    # settled loader must go on drawing it, and the rates count its batches' images.
    ds = pipelines.Slow(n=120, ms=1.0)  # 24 batches of 5 an epoch: 2 segments, then settled
    expected = _plain(ds, 3, batch_sampler=BatchSampler(RandomSampler(ds), 5, drop_last=False))
    torch.manual_seed(0)
    batches = BatchSampler(RandomSampler(ds), batch_size=5, drop_last=False)
    with loadersearch.AutoLoader(ds, batch_sampler=batches, tune_steps=24, **SMALL) as loader:
        assert _served(loader, 3) == expected  # the sampler's draws, in batches of 5, 3 epochs
        report = loader.report
        assert report is not None and report.config.batch_size == 5
        assert report.epoch_images == 120 and report.tuning_images == 120
        chosen = loader.tuner.candidates[loader.tuner.settled]
        assert report.images_per_s == pytest.approx(report.steps_per_s * 5)
        assert chosen.rate == report.images_per_s


@pytest.mark.slow
def test_each_switch_stops_the_previous_workers_and_close_stops_the_last() -> None:
    ds = pipelines.Slow(n=160, ms=2.0)
    loader = loadersearch.AutoLoader(ds, batch_size=4, shuffle=True, **SMALL)
    seen: list[tuple[str, int, int]] = []

    def check(batch) -> None:
        config = loader.serving
        seen.append((config.label(), config.num_workers, len(_workers())))

    _served(loader, 2, check)

    # At every step exactly the serving configuration's workers are alive: none of a
    # previous candidate's is left.
    assert [(label, n) for label, n, alive in seen if alive != n] == []
    assert {n for _, n, _ in seen} >= {0, 1, 2}  # it went up the ladder
    final = loader.config
    assert final.num_workers == 0 or final.persistent_workers
    assert len(_workers()) == final.num_workers  # persistent between epochs, as asked
    loader.close()
    assert _workers() == []


@pytest.mark.slow
@pytest.mark.parametrize("when", ["tuning", "settled"])
def test_a_step_that_raises_leaves_no_worker_behind(when) -> None:
    ds = pipelines.Slow(n=200, ms=2.0)
    loader = loadersearch.AutoLoader(ds, batch_size=4, shuffle=True, tune_steps=50, **SMALL)
    if when == "settled":
        _served(loader, 1)
        assert loader.config is not None

    with pytest.raises(RuntimeError, match="CUDA error"):
        for batch in loader:
            if loader.serving.num_workers > 0:
                assert _workers()
                raise RuntimeError("CUDA error: an illegal memory access")
            DEVICE.step(len(batch))

    assert _workers() == []
    # and the loader still serves a whole epoch afterwards
    assert sum(len(b) for b in _served(loader, 1)) == 200
    loader.close()


def test_wrapping_a_dataloader_keeps_its_sampler_and_fixes_what_is_passed() -> None:
    ds = pipelines.Slow(n=40, ms=1.0)
    plain = DataLoader(ds, batch_size=4, shuffle=True, drop_last=True)
    loader = loadersearch.autoloader(plain, num_workers=1, window_steps=2)

    assert loader.sampler is plain.sampler and loader.drop_last and len(loader) == 10
    assert {c.num_workers for c in loader.tuner._ladder} == {1}
    served = [i for b in _served(loader, 1) for i in b]
    assert sorted(served) == list(range(40))  # each index once
    loader.close()


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(8))


def test_bad_arguments_are_refused_naming_the_fix() -> None:
    with pytest.raises(TypeError, match="map-style"):
        loadersearch.AutoLoader(_Stream())
    with pytest.raises(ValueError, match="tune_steps cannot be negative"):
        loadersearch.AutoLoader(pipelines.Slow(8), tune_steps=-1)
    with pytest.raises(TypeError, match="by name"):
        loadersearch.AutoLoader(pipelines.Slow(8), multiprocessing_context=object())
    with pytest.raises(ValueError, match="give batch_size"):
        loadersearch.AutoLoader(pipelines.Slow(8), batch_size=None)
    with pytest.raises(ValueError, match="drop one of them"):
        loadersearch.AutoLoader(pipelines.Slow(8), batch_sampler=[[0, 1]], batch_sizes=[4])
    with pytest.raises(ValueError, match="positive integers"):
        loadersearch.AutoLoader(pipelines.Slow(8), batch_sizes=[0])
    with pytest.raises(ValueError, match="shuffle"):  # DataLoader's own check
        loadersearch.AutoLoader(pipelines.Slow(8), sampler=range(8), shuffle=True)


@pytest.mark.cuda
def test_on_a_gpu_pinned_memory_is_a_candidate_and_batches_reach_the_device() -> None:
    ds = pipelines.Slow(n=400, ms=0.5)
    loader = loadersearch.AutoLoader(ds, batch_size=8, shuffle=True, **SMALL)
    weights = torch.randn(1, 256, device="cuda")
    pinned = set()
    for _ in range(2):
        for batch in loader:
            pinned.add((loader.serving.pin_memory, batch.is_pinned()))
            x = batch.to("cuda", non_blocking=True).float()
            (x @ weights).sum()  # device work the window edges wait for
    assert (True, True) in pinned  # pinned memory tried, and the batches were pinned
    assert loader.config is not None and loader.report.images_per_s > 0
    loader.close()
    assert _workers() == []


def test_the_worker_ladder_tops_at_the_cpu_budget_shared_by_torchrun_s_ranks(
    monkeypatch, caplog
) -> None:
    from loadersearch._cpu_budget import CpuBudget, cpu_budget
    from loadersearch.online._autoloader import default_max_workers

    assert default_max_workers(CpuBudget(cpus=3)) == 6  # one process: 2 x its CPUs
    assert default_max_workers(CpuBudget(cpus=12, ranks=4)) == 3  # per rank: 12 // 4
    cpus = cpu_budget(environ={}).cpus
    if cpus < 2:
        pytest.skip("needs 2 CPUs for 2 ranks of one CPU each")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cpus))  # one CPU per rank
    with caplog.at_level("INFO", logger="loadersearch.online._autoloader"):
        loader = loadersearch.AutoLoader(pipelines.Slow(n=40, ms=1.0), batch_size=4)
    assert {c.num_workers for c in loader.tuner._ladder} == {0, 1}
    assert f"CPU budget: {cpus} CPUs" in caplog.text
    assert f"{cpus} ranks (LOCAL_WORLD_SIZE)" in caplog.text
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    alone = loadersearch.AutoLoader(pipelines.Slow(n=40, ms=1.0), batch_size=4)
    assert max(c.num_workers for c in alone.tuner._ladder) <= 2 * cpus
    assert max(c.num_workers for c in alone.tuner._ladder) > 1
