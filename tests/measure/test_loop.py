"""The timed loop on its own: windows at the same positions, the clock's parts add up, each
epoch starts its iterator (workers) again, and every epoch draws the same images."""

from __future__ import annotations

import time
from collections import namedtuple
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from torch.utils.data import Dataset

from loadersearch import LoaderConfig
from loadersearch.measure._epoch import move_to_device, window_edges
from loadersearch.measure._loop import ShortEpochSampler, make_loader, run_loop
from loadersearch.measure._plan import MeasurePlan


class _Indices(Dataset):
    """Sample i is (a tiny uint8 image, a box row carrying i): what was served can be read back."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(3, 4, 4, dtype=torch.uint8), torch.tensor([[float(i), 0, 0, 1, 1]])


def _collate(batch):
    images = torch.stack([b[0] for b in batch])
    targets = torch.cat([torch.cat([torch.full((1, 1), float(k)), b[1]], 1)
                         for k, b in enumerate(batch)])  # fmt: skip
    return images, targets


@dataclass
class _Workload:
    served: list[list[int]] = field(default_factory=list)
    dataset: Any = field(default_factory=_Indices)
    collate_fn: Any = staticmethod(_collate)
    worker_init_fn: Any = None
    device: Any = torch.device("cpu")
    cuda: bool = False

    def step(self, batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        images, targets = batch
        self.served.append([int(x) for x in targets[:, 1]])


def test_window_edges_cut_every_epoch_at_the_same_steps() -> None:
    assert window_edges(8, 4) == [2, 4, 6, 8]
    assert window_edges(5, 2) == [2, 5]
    assert window_edges(20, 4) == [5, 10, 15, 20]  # a sized epoch: the same fractions


class _Many(_Indices):
    def __len__(self) -> int:
        return 200


def _sized_run(plan: MeasurePlan, **kw: Any) -> tuple[Any, list[int], _Workload]:
    workload = _Workload(dataset=_Many())
    warm: list[int] = []
    config = LoaderConfig(num_workers=2, batch_size=2, prefetch_factor=2)
    record = run_loop(workload, config, plan, seed=1, on_window=lambda w: None,
                      on_warmup=lambda e, s: warm.append(len(workload.served)), **kw)  # fmt: skip
    return record, warm, workload


def test_a_configuration_with_batches_in_flight_measures_epochs_long_enough_for_them() -> None:
    # 2 workers x prefetch 2 = 4 batches in flight: 2 x 4 + 2 = 10 steps per measured epoch,
    # cut into windows at the same fractions; a warm-up of 2 batches per worker.
    plan = MeasurePlan(epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2,
                       epoch_limit_s=3600)  # fmt: skip
    record, warm, workload = _sized_run(plan)
    assert warm == [4]
    assert record.steps == record.target_steps == 10
    assert [len(e["arrivals"]) for e in record.epochs] == [10, 10]
    assert [w.images for w in record.windows] == [10] * 4  # 5 steps x batch 2
    assert all(w.epoch_images == 20 for w in record.windows)
    assert len(workload.served) == 4 + 2 * 10


def test_a_sized_epoch_is_cut_to_the_time_limit_and_ranks_agree_on_its_length() -> None:
    plan = MeasurePlan(epochs=1, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2,
                       epoch_limit_s=1e-9)  # fmt: skip
    record, _, _ = _sized_run(plan)
    assert (record.steps, record.target_steps) == (4, 10)  # never below plan.steps
    plan = MeasurePlan(epochs=1, steps=4, windows_per_epoch=2, warmup_epochs=1, epoch_limit_s=3600)
    asked: list[int] = []
    record, _, _ = _sized_run(plan, agree=lambda n: asked.append(n) or 6)
    assert asked == [10] and record.steps == 6  # another rank could only fit 6
    assert all(w.epoch_images == 12 for w in record.windows)


@pytest.mark.parametrize("workers", [0, 2])
def test_the_loop_reports_each_window_once_with_parts_that_add_up(workers: int) -> None:
    workload = _Workload()
    config = LoaderConfig(num_workers=workers, batch_size=2)
    plan = MeasurePlan(epochs=3, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2,
                       in_flight_rounds=0)  # fmt: skip
    windows, warmups, measuring = [], [], []
    record = run_loop(
        workload,
        config,
        plan,
        seed=3,
        on_window=windows.append,
        on_warmup=lambda epoch, seconds: warmups.append(epoch),
        on_measuring=measuring.append,
    )
    assert warmups == [0] and measuring == [True, False]
    assert [w.index for w in windows] == list(range(6))
    assert [w.epoch for w in windows] == [0, 0, 1, 1, 2, 2]
    assert all(w.images == 4 for w in windows)  # 2 steps x batch 2
    for w in windows:
        assert w.seconds > 0
        assert w.wait_s + w.compute_s + w.h2d_s == pytest.approx(w.seconds, abs=1e-6)
    # the first batch of each epoch is in its first window (the epoch's start cost)
    assert [w.start_s > 0 for w in windows] == [True, False] * 3
    assert record.windows == windows and len(record.epochs) == 3
    assert all(len(e["arrivals"]) == 4 for e in record.epochs)
    # 2 warm-up steps, then 3 epochs x 4 steps, each batch of 2 distinct images
    assert len(workload.served) == 2 + 12 and all(len(set(b)) == 2 for b in workload.served)


def test_every_trial_draws_the_same_images_in_the_same_order() -> None:
    def drawn(workers: int) -> list[list[int]]:
        workload = _Workload()
        plan = MeasurePlan(epochs=2, steps=3, windows_per_epoch=1, warmup_epochs=1)
        run_loop(workload, LoaderConfig(num_workers=workers, batch_size=4), plan, seed=11,
                 on_window=lambda w: None, on_warmup=lambda e, s: None)  # fmt: skip
        return workload.served

    assert drawn(0) == drawn(2)


def test_the_short_epoch_sampler_spans_permutations_when_an_epoch_outgrows_the_dataset() -> None:
    sampler = ShortEpochSampler(dataset_len=5, num_samples=12, seed=0)
    drawn = list(sampler)
    assert len(drawn) == 12 and len(sampler) == 12
    assert sorted(drawn[:5]) == list(range(5)) and sorted(drawn[5:10]) == list(range(5))


def test_ranks_draw_disjoint_shards_of_the_one_epoch_order_as_distributed_sampler() -> None:
    whole = list(ShortEpochSampler(dataset_len=7, num_samples=12, seed=5))
    shards = [list(ShortEpochSampler(7, 6, 5, rank=r, world_size=2)) for r in (0, 1)]
    # rank r takes every 2nd index from r of the order one process would draw, epoch by epoch
    assert shards == [whole[0::2], whole[1::2]]
    assert all(len(s) == 6 for s in shards)
    with pytest.raises(ValueError, match="rank must be in 0..1"):
        ShortEpochSampler(7, 6, 5, rank=2, world_size=2)


def test_a_rank_waits_at_every_window_edge_and_epoch_end() -> None:
    workload = _Workload()
    barriers: list[int] = []
    plan = MeasurePlan(epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2)
    run_loop(
        workload,
        LoaderConfig(batch_size=2),
        plan,
        seed=1,
        on_window=lambda w: barriers.append(-1),
        on_warmup=lambda e, s: None,
        rank=1,
        world_size=2,
        barrier=lambda: barriers.append(len(workload.served)),
    )
    # the warm-up's start and end, then per measured epoch its start, its inner edge and end;
    # each window is reported after the barrier that ends it
    assert barriers == [0, 2, 2, 4, -1, 6, -1, 6, 8, -1, 10, -1]


def _collate_with_extra(batch):
    images, targets = _collate(batch)
    return images, targets, targets[:, 1].long()  # as the workload's collate adds the layout


def test_every_tensor_of_the_batch_reaches_the_step_and_the_first_warmup_step_is_hooked() -> None:
    events: list[str] = []

    class ThreeTensors(_Workload):
        def step(self, batch) -> None:  # noqa: ANN001
            images, targets, extra = batch
            assert torch.equal(extra, targets[:, 1].long())
            events.append("step")

    plan = MeasurePlan(epochs=1, steps=2, windows_per_epoch=1, warmup_epochs=2, warmup_steps=2)
    run_loop(
        ThreeTensors(collate_fn=_collate_with_extra),
        LoaderConfig(num_workers=0, batch_size=2),
        plan,
        on_window=lambda w: None,
        on_warmup=lambda epoch, seconds: events.append("warmup"),
        on_measuring=lambda measuring: events.append(f"measuring={measuring}"),
        after_first_step=lambda: events.append("settle"),
    )
    # once, right after the very first step: never in another warm-up epoch or a measured one
    assert events == ["step", "settle", "step", "warmup", "step", "step", "warmup",
                      "measuring=True", "step", "step", "measuring=False"]  # fmt: skip


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_workers_start_by_the_configured_method(start_method: str) -> None:
    config = LoaderConfig(num_workers=1, batch_size=2, start_method=start_method)
    loader = make_loader(_Workload(), config, ShortEpochSampler(10, 2, 0))
    assert loader.multiprocessing_context.get_start_method() == start_method


def test_every_tensor_of_a_batch_reaches_the_device_whatever_the_collate_returns() -> None:
    Pair = namedtuple("Pair", "x y")

    class Graph:  # a custom batch class with its own `to`, as torch_geometric's Batch
        def to(self, device: torch.device, non_blocking: bool = False) -> tuple:
            return ("moved", device, non_blocking)

    meta = torch.device("meta")  # a device without memory: shows the move, needs no GPU
    batch = {
        "images": torch.zeros(2, 3),
        "masks": [torch.zeros(4), (torch.ones(2), "id-7")],
        "pair": Pair(torch.zeros(1), 3),
        "graph": Graph(),
    }
    moved = move_to_device(batch, meta, non_blocking=True)
    assert moved["images"].device == meta and moved["masks"][0].device == meta
    assert moved["masks"][1][0].device == meta and moved["masks"][1][1] == "id-7"
    assert isinstance(moved["pair"], Pair) and moved["pair"].x.device == meta
    assert moved["pair"].y == 3
    assert moved["graph"] == ("moved", meta, True)
    assert batch["images"].device.type == "cpu"  # the loader's batch is left as it was


def test_measured_epochs_walk_on_through_the_dataset_instead_of_restarting_it() -> None:
    # After continuing(), each epoch takes the next indices of one walk: 3 epochs of 4 from 10
    # images read 10 distinct images before any comes back, and every trial walks alike.
    def walk() -> list[int]:
        sampler = ShortEpochSampler(dataset_len=10, num_samples=4, seed=3)
        list(sampler)  # a warm-up epoch, drawn as before
        sampler.continuing()
        return [i for _ in range(3) for i in sampler]

    drawn = walk()
    assert sorted(drawn[:10]) == list(range(10)) and len(drawn) == 12
    assert walk() == drawn
    # ranks keep their shard of the same walk
    shards = []
    for rank in (0, 1):
        sampler = ShortEpochSampler(10, 2, 3, rank=rank, world_size=2)
        list(sampler)
        sampler.continuing()
        shards.append([i for _ in range(3) for i in sampler])
    assert sorted(shards[0] + shards[1]) == sorted(drawn)


class _UnevenReads(_Many):
    """Reads that vary a lot (EMULATED storage, 3 ms mean, CV 2 per file), with 0 workers."""

    def __init__(self) -> None:
        from loadersearch.workload import EmulatedStorage

        self.storage = EmulatedStorage(_Many(), 3.0, 2.0)

    def __getitem__(self, i: int) -> Any:
        return self.storage[i]


def _extended(plan: MeasurePlan) -> tuple[Any, list[Any]]:
    workload = _Workload(dataset=_UnevenReads())
    windows: list[Any] = []
    record = run_loop(workload, LoaderConfig(batch_size=2), plan, seed=1,
                      on_window=windows.append, on_warmup=lambda e, s: None)  # fmt: skip
    return record, windows


def test_a_measurement_goes_on_until_its_epoch_time_is_known_to_the_precision_asked() -> None:
    base = dict(epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2)
    # Off (the default): exactly the plan's epochs, and the precision they reached is kept.
    record, windows = _extended(MeasurePlan(**base))
    assert (len(record.epochs), record.extra_epochs, len(windows)) == (2, 0, 4)
    assert record.precision is not None and record.precision > 0
    # 0.1% is out of reach of such reads: more epochs until the 1.5 s allowed are spent, each
    # counted in the projection (the epoch list) but none cut into windows for the pruner.
    record, windows = _extended(MeasurePlan(**base, precision=0.001, extend_limit_s=1.5))
    assert record.extra_epochs >= 2 and len(record.epochs) == 2 + record.extra_epochs
    assert len(windows) == 4 and all(w.epoch < 2 for w in windows)
    assert all(len(e["arrivals"]) == 4 for e in record.epochs)
    assert record.precision > 0.001
    # However long the limit, the added epochs take at most 3x the planned ones (and one more
    # epoch's overshoot): short epochs cost little.
    record, _ = _extended(MeasurePlan(**base, precision=0.001, extend_limit_s=600))
    planned, added = record.epochs[:2], record.epochs[2:]
    longest = max(e["seconds"] for e in record.epochs)
    assert added and sum(e["seconds"] for e in added) <= 3 * sum(
        e["seconds"] for e in planned) + longest  # fmt: skip
    # Two epochs are too few to judge a spread: a third always follows, then a precision
    # already met stops the measurement.
    record, _ = _extended(MeasurePlan(**base, precision=0.99, extend_limit_s=60))
    assert record.extra_epochs == 1 and record.precision < 0.99


def test_ranks_extend_while_any_of_them_wants_to_and_all_have_the_time() -> None:
    # agree(n) is the smallest n of all ranks. Each pass asks "wants?" as -agree(-wants) (a
    # max) and "fits?" as agree(fits). Here the other rank always wants more and has the time
    # for two more epochs only; this rank is content (precision 99%) after its third epoch.
    calls: list[int] = []

    def agree(n: int) -> int:
        calls.append(n)
        if len(calls) == 1:
            return n  # the epochs' length
        other = -1 if len(calls) % 2 == 0 else (1 if len(calls) < 7 else 0)
        return min(n, other)

    workload = _Workload(dataset=_UnevenReads())
    plan = MeasurePlan(epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2,
                       precision=0.99, extend_limit_s=60)  # fmt: skip
    record = run_loop(workload, LoaderConfig(batch_size=2), plan, seed=1, agree=agree,
                      on_window=lambda w: None, on_warmup=lambda e, s: None)  # fmt: skip
    assert record.extra_epochs == 2
    # the length, then per pass (wants, fits): this rank wants its third epoch, then not
    assert calls[0] == 4 and calls[1:3] == [-1, 1] and calls[3] == 0 and len(calls) == 7


def test_added_epochs_wait_at_the_planned_epochs_edges_so_they_are_timed_alike() -> None:
    # A rank's barrier (and a CUDA sync) runs at every window edge of a planned epoch; an added
    # epoch has no windows to send but must pause at the same points, or its time is another
    # measurement's (on a GPU each edge idles the device).
    events: list[Any] = []
    workload = _Workload(dataset=_UnevenReads())
    plan = MeasurePlan(epochs=2, steps=6, windows_per_epoch=3, warmup_epochs=1, warmup_steps=2,
                       precision=0.99, extend_limit_s=60)  # fmt: skip
    record = run_loop(workload, LoaderConfig(batch_size=2), plan, seed=1,
                      barrier=lambda: events.append("edge"), before_epoch=events.append,
                      on_window=lambda w: None, on_warmup=lambda e, s: None)  # fmt: skip
    assert record.extra_epochs == 1
    starts = [i for i, e in enumerate(events) if e != "edge"]
    per_epoch = [b - a - 1 for a, b in zip(starts, starts[1:] + [len(events)], strict=True)]
    assert per_epoch == [4, 4, 4]  # the start, 2 inner edges, the end: in every epoch


def test_added_epochs_stop_at_the_measurements_time_limit_and_the_note_names_it() -> None:
    from loadersearch.measure._notes import precision_note

    workload = _Workload(dataset=_UnevenReads())
    plan = MeasurePlan(epochs=2, steps=4, windows_per_epoch=2, warmup_epochs=1, warmup_steps=2,
                       precision=0.001, extend_limit_s=60)  # fmt: skip
    record = run_loop(workload, LoaderConfig(batch_size=2), plan, seed=1,
                      finish_by=time.monotonic(),  # no time left for any added epoch
                      on_window=lambda w: None, on_warmup=lambda e, s: None)  # fmt: skip
    assert record.extra_epochs == 0 and record.extend_bound == "the measurement's time limit"
    note = precision_note(
        record.precision, len(record.epochs), plan, record.extend_bound, record.extend_budget_s
    )
    assert "only 2 measured epochs fitted" in note and "raise the time limit" in note
    assert "+/-0.1% asked for" in note
    # the 3x cap is named as what it is, with advice that changes it (not extend_limit_s)
    bound = "3x the planned epochs' time"
    note = precision_note(0.0549, 5, plan, bound, 0.6)
    assert "+/-5.5%" in note and "0.6 s allowed for more epochs (3x the planned" in note
    assert "extend_limit_s" not in note and "steps" in note
    assert precision_note(0.0009, 5, plan, bound, 0.6) == ""  # known well enough: nothing to say
