"""The timed loop: warm-up, then short epochs cut into windows, as real training runs them.

Each epoch creates its iterator (``iter(loader)``) as a training loop's ``for batch in loader``
does, so worker start-up without ``persistent_workers`` is measured. The sampler draws
``steps * batch_size`` indices per epoch (without replacement, several permutations if the
dataset is small) with ``drop_last=True``, so every epoch has exactly ``steps`` batches on any
dataset, and a fixed seed, so that every trial sees the same images in the same order.

How long a measured epoch is: ``plan.steps`` for a configuration with few batches in flight;
with ``w`` workers and prefetch factor ``p`` (``w * p`` batches in flight), at least
``plan.in_flight_rounds * w * p + w`` steps, so that the epoch has a steady part after the
workers' start and the prefetch ramp (:meth:`~loadersearch.measure._plan.MeasurePlan.sized_steps`),
but never more than one full epoch of the dataset, and cut to what fits in
``plan.epoch_limit_s`` at the warm-up epoch's rate (never below ``plan.steps``). The warm-up
epoch has at least two batches per worker, so every worker has started when that rate is
taken. Each measured epoch is cut into ``plan.windows_per_epoch`` windows at the same
fractions of the epoch in every trial: window ``k`` is the same part of the same measured
epoch whatever the configuration, and a window's rate (images/s) compares across lengths.

The epoch itself, its windows and what its clocks mean: :mod:`loadersearch.measure._epoch`.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils.data import DataLoader, Sampler

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._epoch import (
    DeviceClock,
    WindowClock,
    run_epoch,
    window_edges,
)
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._projection import epoch_time_precision
from loadersearch.measure._result import Window


@dataclass
class LoopRecord:
    """What the loop measured, for the projection."""

    epochs: list[dict[str, Any]] = field(default_factory=list)  # seconds, arrivals per epoch
    windows: list[Window] = field(default_factory=list)
    warmup_s: float = 0.0
    steps: int = 0  # steps of each measured epoch
    target_steps: int = 0  # what the configuration asked for, before the epoch time limit
    extra_epochs: int = 0  # measured epochs beyond the plan's, to reach its precision
    precision: float | None = None  # the projected epoch time's 90% CI half-width, relative
    # the seconds the precision's added epochs were allowed, and which limit set them
    extend_budget_s: float = 0.0
    extend_bound: str = ""


class ShortEpochSampler(Sampler[int]):
    """Random indices without replacement, ``num_samples`` per epoch (successive permutations
    when an epoch is longer than the dataset). ``num_samples`` may change between epochs (the
    warm-up epoch is shorter); the seed makes every trial draw the same images in order.

    With ``world_size`` ranks (DistributedDataParallel), every rank draws the same epoch order
    of ``num_samples * world_size`` indices and keeps every ``world_size``-th from ``rank``, as
    ``DistributedSampler`` shards an epoch: ``num_samples`` is per rank."""

    def __init__(
        self, dataset_len: int, num_samples: int, seed: int, *, rank: int = 0, world_size: int = 1
    ) -> None:
        if not 0 <= rank < world_size:
            raise ValueError(f"rank must be in 0..{world_size - 1} but got {rank}.")
        self.dataset_len = dataset_len
        self.num_samples = num_samples
        self.rank = rank
        self.world_size = world_size
        self.generator = torch.Generator()
        self.generator.manual_seed(seed)
        self._stream: Iterator[int] | None = None

    def _epoch_order(self, total: int) -> Iterator[int]:
        if self._stream is not None:  # the next indices of one long walk (see continuing)
            yield from itertools.islice(self._stream, total)
            return
        left = total
        while left > 0:
            take = torch.randperm(self.dataset_len, generator=self.generator)[:left].tolist()
            yield from take
            left -= len(take)

    def _walk(self) -> Iterator[int]:
        while True:
            yield from torch.randperm(self.dataset_len, generator=self.generator).tolist()

    def continuing(self) -> None:
        """From now on each epoch takes the next indices of one walk through successive
        permutations, instead of the start of a new one (the planned measured epochs keep
        their paired images; :func:`_extend` calls this before the epochs it adds): the added
        epochs read distinct files until they have read the whole dataset, so that the more
        they measure,
        the closer their files are to a full epoch's (reads that vary a lot then average out
        as in the full epoch). The seed still makes every trial walk the same order."""
        if self._stream is None:
            self._stream = self._walk()

    def __iter__(self) -> Iterator[int]:
        order = self._epoch_order(self.num_samples * self.world_size)
        yield from itertools.islice(order, self.rank, None, self.world_size)

    def __len__(self) -> int:
        return self.num_samples


def make_loader(workload: Any, config: LoaderConfig, sampler: ShortEpochSampler) -> DataLoader:
    """The DataLoader of ``config`` over the workload's dataset, as a training script builds it
    (``shuffle=True`` is the sampler; ``drop_last=True``)."""
    return DataLoader(
        workload.dataset,
        sampler=sampler,
        drop_last=True,
        collate_fn=workload.collate_fn,
        worker_init_fn=workload.worker_init_fn if config.num_workers > 0 else None,
        **config.dataloader_kwargs(),
    )


class _ResidentBatches:
    """One real batch, drawn from the loader once and kept on the device, handed out as many
    times per epoch as the loader would give batches: the step fed without any loading."""

    def __init__(self, loader: DataLoader, sampler: ShortEpochSampler, clock: Any, batch: int):
        self.sampler = sampler
        self.batch_size = batch
        it = iter(loader)
        self.batch = clock.to_device(next(it), False)
        del it
        clock.sync()
        clock.take_h2d()

    def __iter__(self) -> Iterator[Any]:
        for _ in range(self.sampler.num_samples // self.batch_size):
            yield self.batch

    def __len__(self) -> int:
        return self.sampler.num_samples // self.batch_size


def run_loop(
    workload: Any,
    config: LoaderConfig,
    plan: MeasurePlan,
    *,
    seed: int = 0,
    on_window: Callable[[Window], None],
    on_warmup: Callable[[int, float], None],
    on_measuring: Callable[[bool], None] = lambda measuring: None,
    after_first_step: Callable[[], None] | None = None,
    rank: int = 0,
    world_size: int = 1,
    barrier: Callable[[], None] | None = None,
    agree: Callable[[int], int] | None = None,
    resident: bool = False,
    before_epoch: Callable[[int], None] | None = None,
    on_extra: Callable[[int, float | None], None] | None = None,
    finish_by: float | None = None,
) -> LoopRecord:
    """Run the warm-up and the measured epochs; ``on_window`` gets each window as it ends.
    ``after_first_step()`` runs once, after the first warm-up step (never in a measured epoch;
    not at all without a warm-up): where the child settles the VRAM cap.

    How long each measured epoch is (:meth:`MeasurePlan.sized_steps`): ``plan.steps``, or for a
    configuration with many batches in flight, enough steps that its steady part is measured,
    within the plan's epoch time limit at the warm-up's rate. Its windows are cut at the same
    fractions of the epoch in every trial (:func:`window_edges`), so window ``k`` is the same
    part of the same epoch whatever the configuration.

    One rank of several (:mod:`loadersearch.measure._ranks`) passes its ``rank``, the
    ``world_size``, a ``barrier`` that waits for every rank, and ``agree(n)``, the smallest
    ``n`` of all ranks (so that they measure epochs of the same length): its sampler draws its
    shard of the common epoch order, and every window edge waits for all ranks.

    ``resident`` feeds the step one real batch, taken from the loader once and kept on the
    device, instead of the loader: the most the step can take (the ingestion ceiling of
    ``loadersearch diagnose``). ``on_extra(n, precision)`` follows each measured epoch added
    for ``plan.precision`` (:func:`_extend`). ``before_epoch(epoch)`` runs before each measured
    epoch, outside its timing (a cold measurement evicts the dataset's pages there);
    ``finish_by`` (``time.monotonic()``) is when the measurement must be done by (its process's
    time limit, less a margin): no added epoch runs past it. Each
    measured epoch's record also holds ``t0`` (``time.monotonic()`` at its ``iter(loader)``)
    and ``waits`` (each step's wait for its batch): the per-step timeline."""
    dataset_len = len(workload.dataset)
    sized = plan.sized_steps(config, math.ceil(dataset_len / world_size) // config.batch_size)
    sampler = ShortEpochSampler(
        dataset_len, sized * config.batch_size, seed, rank=rank, world_size=world_size
    )
    loader: Any = make_loader(workload, config, sampler)
    clock = DeviceClock(workload.device, workload.cuda, barrier)
    non_blocking = bool(config.pin_memory and workload.cuda)
    if resident:
        loader = _ResidentBatches(loader, sampler, clock, config.batch_size)
    record = LoopRecord(target_steps=sized)
    epoch_args = (loader, clock, workload.step, non_blocking)
    warm_steps = plan.warmup_steps_for(config, sized)
    warm_s = _warm_up(
        record, plan, config, epoch_args, sampler, warm_steps, after_first_step, on_warmup
    )
    # the last warm-up epoch's rate
    steps = plan.limited_steps(sized, warm_steps, warm_s, config.num_workers)
    if agree is not None:
        steps = agree(steps)
    record.steps = steps
    on_measuring(True)
    sampler.num_samples = steps * config.batch_size
    full = (math.ceil(dataset_len / world_size) // config.batch_size) * config.batch_size
    _measured_epochs(record, plan, config, epoch_args, on_window, before_epoch)
    _extend(record, plan, config, epoch_args, full, sampler, agree=agree,
            before_epoch=before_epoch, on_extra=on_extra, finish_by=finish_by)  # fmt: skip
    on_measuring(False)
    return record


def _warm_up(
    record: LoopRecord,
    plan: MeasurePlan,
    config: LoaderConfig,
    epoch_args: tuple[Any, ...],
    sampler: ShortEpochSampler,
    warm_steps: int,
    after_first_step: Callable[[], None] | None,
    on_warmup: Callable[[int, float], None],
) -> float:
    """The warm-up epochs of ``warm_steps`` each (``after_first_step`` after the first one's
    first step); their time in ``record.warmup_s``. Returns the last one's seconds."""
    loader, clock, step, non_blocking = epoch_args
    warm_t0 = time.perf_counter()
    warm_s = 0.0
    for epoch in range(plan.warmup_epochs):
        sampler.num_samples = warm_steps * config.batch_size
        first = after_first_step if epoch == 0 else None
        warm_s, _ = run_epoch(loader, clock, step, [warm_steps], non_blocking, None, first)
        on_warmup(epoch, warm_s)
    record.warmup_s = time.perf_counter() - warm_t0
    return warm_s


def _measured_epochs(
    record: LoopRecord,
    plan: MeasurePlan,
    config: LoaderConfig,
    epoch_args: tuple[Any, ...],
    on_window: Callable[[Window], None],
    before_epoch: Callable[[int], None] | None,
) -> None:
    """The plan's measured epochs of ``record.steps`` each: every window sent to
    ``on_window`` as it ends, every epoch's timeline appended to ``record.epochs``."""
    loader, clock, step, non_blocking = epoch_args
    steps = record.steps
    measured_edges = window_edges(steps, plan.windows_per_epoch)
    for epoch in range(plan.epochs):

        def end_window(win: int, clock_: WindowClock, seconds: float, h2d: float) -> None:
            steps_in_window = measured_edges[win] - (measured_edges[win - 1] if win else 0)
            window = Window(
                index=len(record.windows),
                epoch=epoch,  # noqa: B023 - called within this iteration only
                images=steps_in_window * config.batch_size,
                seconds=seconds,
                wait_s=clock_.wait,
                compute_s=max(0.0, seconds - clock_.wait - h2d),
                h2d_s=h2d,
                start_s=clock_.start_s,
                epoch_images=steps * config.batch_size,
            )
            record.windows.append(window)
            on_window(window)

        if before_epoch is not None:
            before_epoch(epoch)
        waits: list[float] = []
        t0 = time.monotonic()
        seconds, arrivals = run_epoch(
            loader, clock, step, measured_edges, non_blocking, end_window, waits=waits
        )
        record.epochs.append({"seconds": seconds, "arrivals": arrivals, "t0": t0, "waits": waits})


def _no_window(win: int, window: WindowClock, seconds: float, h2d: float) -> None:
    """An added epoch's window edge: synchronised like a planned epoch's, nothing sent."""


MIN_EPOCHS_FOR_PRECISION = 3  # a spread of two epochs (1 degree of freedom) decides nothing
# The epochs added for the precision take at most this many times the planned measured epochs'
# time (and at most plan.extend_limit_s): a measurement grows to 4x its plan at most, so that
# short, jittery epochs (a fast device) cost little, and slow ones get the whole limit.
EXTEND_FACTOR = 3.0


def _extend(
    record: LoopRecord,
    plan: MeasurePlan,
    config: LoaderConfig,
    epoch_args: tuple[Any, ...],
    full_images: int,
    sampler: ShortEpochSampler,
    *,
    agree: Callable[[int], int] | None,
    before_epoch: Callable[[int], None] | None,
    on_extra: Callable[[int, float | None], None] | None,
    finish_by: float | None = None,
) -> None:
    """More measured epochs of the same length while the projected epoch time's confidence
    interval is wider than ``plan.precision`` (:func:`epoch_time_precision`) or fewer than
    :data:`MIN_EPOCHS_FOR_PRECISION` epochs were measured, for at most ``plan.extend_limit_s``
    seconds, :data:`EXTEND_FACTOR` times the planned epochs' time and what is left before
    ``finish_by``: an epoch starts only if one more of the last one's length fits. They are
    cut at the same window edges as the planned epochs (the device is synchronised, and ranks
    wait for each other, at the same points: the same timing) but send no windows (the
    pruner compares the same windows in every trial), count in the projection, and walk on
    through the dataset
    (:meth:`ShortEpochSampler.continuing`): distinct files until every file was read.
    ``before_epoch`` runs before each (a cold measurement evicts there) and
    ``on_extra(n, precision)`` after each. Several ranks go on while any of them
    wants to and one more epoch fits for all of them (two ``agree`` calls per epoch on every
    rank: ``agree`` is the smallest answer), so that they stay in step."""

    def precision() -> float | None:
        return epoch_time_precision(
            record.epochs, config.batch_size, config.num_workers, full_images
        )

    record.precision = precision()
    if not plan.precision or not record.epochs:
        return
    loader, clock, step, non_blocking = epoch_args
    edges = window_edges(record.steps, plan.windows_per_epoch)
    planned_s = sum(e["seconds"] for e in record.epochs)
    bounds = {
        "extend_limit_s": plan.extend_limit_s,
        f"{EXTEND_FACTOR:g}x the planned epochs' time": EXTEND_FACTOR * planned_s,
    }
    if finish_by is not None:
        bounds["the measurement's time limit"] = max(0.0, finish_by - time.monotonic())
    record.extend_bound, record.extend_budget_s = min(bounds.items(), key=lambda kv: kv[1])
    deadline = time.perf_counter() + record.extend_budget_s
    sampler.continuing()
    while True:
        wants = len(record.epochs) < MIN_EPOCHS_FOR_PRECISION or (
            record.precision is None or record.precision > plan.precision
        )
        fits = time.perf_counter() + record.epochs[-1]["seconds"] <= deadline
        if agree is not None:
            wants = -agree(-int(wants)) > 0  # any rank's spread is the job's
            fits = agree(int(fits)) > 0  # every rank has the time
        if not (wants and fits):
            return
        if before_epoch is not None:
            before_epoch(len(record.epochs))
        waits: list[float] = []
        t0 = time.monotonic()
        seconds, arrivals = run_epoch(
            loader, clock, step, edges, non_blocking, _no_window, waits=waits
        )
        record.epochs.append({"seconds": seconds, "arrivals": arrivals, "t0": t0, "waits": waits})
        record.extra_epochs += 1
        record.precision = precision()
        if on_extra is not None:
            on_extra(record.extra_epochs, record.precision)
