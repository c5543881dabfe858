"""AutoLoader: a DataLoader for a training loop that tunes its own settings while it serves.

The epoch's order comes from the user's sampler, drawn once per epoch as a DataLoader draws it
(same random draws, in the same order, so that a seeded run sees the same batches as with a
plain DataLoader). While tuning, each candidate configuration is a short-lived DataLoader
over the next stretch of that order (a batch sampler holding exactly those batches), so the
loop sees one uninterrupted stream: every batch of the epoch once, in order, with the batch
boundaries a plain DataLoader draws. Between two candidates the old loader's workers are shut
down before the new ones start. Once settled, one DataLoader with the chosen settings serves
the rest of the epoch and every later one (its workers persistent, unless fixed otherwise).

The clock reads the time at each request for a batch, i.e. after the user's step: a window's
rate is the loop's own step rate, step included (the device is synchronised at window edges
when CUDA is in use, as the offline loop does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset

from loadersearch._cpu_budget import CpuBudget, cpu_budget
from loadersearch._loader_config import LoaderConfig
from loadersearch.online._arguments import (
    TUNED,
    _arguments_of,
    _batch_sizes_to_try,
    _check_arguments,
    _order_drawer,
    _sort_kwargs,
)
from loadersearch.online._epochs import (
    _Batches,
    _draw_epoch,
    _draw_worker_seed,
    _shut_down,
    _sync,
    _window_rates,
)
from loadersearch.online._report import OnlineReport, build_report
from loadersearch.online._tuner import Axis, SegmentShape, Tuner, with_knob

_logger = logging.getLogger(__name__)

_LADDER = (0, 1, 2, 4, 6, 8, 12, 16, 24, 32)
_PREFETCH_VARIANTS = (4, 8)
MIN_SEGMENTS = 6  # the default budget holds at least this many segments


def default_max_workers(budget: CpuBudget | None = None) -> int:
    """The top of the worker ladder: the offline search's bound for the CPU budget (default:
    this process's, :func:`~loadersearch._cpu_budget.cpu_budget`: its affinity and cgroup
    quota, shared by the ``LOCAL_WORLD_SIZE`` ranks of a torchrun job): 2x the CPUs with one
    process, at most 32; ``cpus // ranks`` per rank under DDP."""
    from loadersearch.search import default_worker_bound

    return default_worker_bound(budget)


def _accelerator() -> bool:
    """Pinned memory helps (and is used by DataLoader) only with an accelerator."""
    acc = getattr(torch, "accelerator", None)
    return bool(acc.is_available()) if acc is not None else torch.cuda.is_available()


class AutoLoader:
    """A drop-in for ``torch.utils.data.DataLoader`` in a training loop that tunes
    ``num_workers``, ``prefetch_factor`` and ``pin_memory`` (with a GPU) while the loop runs,
    then keeps the best::

        loader = loadersearch.AutoLoader(dataset, batch_size=32, shuffle=True, drop_last=True)
        for epoch in range(epochs):
            for images, targets in loader:
                step(images, targets)
        print(loader.report.summary())

    During the first epoch (``tune_steps`` steps: default the first epoch's length, and at
    least 6 segments, which a short epoch continues into the next) it serves batches from
    short measured segments of candidate configurations, then settles. The loop sees every
    sample of each epoch once, in the sampler's order, with a plain DataLoader's batch
    boundaries; the objective is the loop's own images/s, your step included.

    Arguments as DataLoader's: ``dataset``, ``batch_size``, ``shuffle``, ``sampler``,
    ``batch_sampler``, ``drop_last``, ``generator``, ``collate_fn`` and any other keyword
    (``worker_init_fn``, ``timeout``, ...), passed to every DataLoader it builds. A tuned knob
    you pass (``num_workers=4``) is fixed at that value. ``persistent_workers``: kept after
    settling unless you pass it. ``batch_size`` is not changed (it changes training) unless
    you ask: ``batch_sizes=[32, 64]`` tries those sizes too (on the best worker count; the
    epoch's order is then cut at each candidate's size, and later epochs use the winner's:
    read ``loader.batch_size`` if your learning rate depends on it). Not with a
    ``batch_sampler``.

    Tuning: ``study`` (and ``storage``, as for ``loadersearch run``): a stored study of this
    hardware whose best configurations are raced instead of the worker ladder; the result is
    written back to it as a trial labelled ``online``. ``max_workers``: the top of the
    worker ladder (default: the offline search's bound). ``tune_steps``: the budget in steps
    (it may span several epochs). ``window_steps``: steps per measured window (4 windows per
    segment). ``epochs``: the planned epochs, for the cost report (:attr:`report`).
    """

    def __init__(
        self,
        dataset: Dataset,
        batch_size: int | None = 1,
        *,
        study: str | None = None,
        storage: str | None = None,
        max_workers: int | None = None,
        tune_steps: int | None = None,
        window_steps: int = 8,
        epochs: int | None = None,
        margin: float = 0.05,
        batch_sizes: Sequence[int] | None = None,
        **kwargs: Any,
    ) -> None:
        _check_arguments(dataset, tune_steps=tune_steps, max_workers=max_workers, epochs=epochs)
        order, self.fixed, context = _sort_kwargs(kwargs)
        self.collate_fn = kwargs.pop("collate_fn", None)
        self._extra = kwargs  # worker_init_fn, timeout, ...: every DataLoader gets them
        self._drawer = _order_drawer(dataset, batch_size, self.collate_fn, order, kwargs)
        self._batch_sizes = _batch_sizes_to_try(batch_sizes, batch_size, order)
        self.dataset = dataset
        self.batch_size = self._drawer.batch_size
        self.drop_last = self._drawer.drop_last
        self.sampler = self._drawer.sampler
        self.batch_sampler = self._drawer.batch_sampler
        self.generator = self._drawer.generator
        # The batch size the candidates carry (their label, the report's images): yours, or
        # your batch sampler's (a DataLoader with a batch_sampler has batch_size None).
        self._nominal = self.batch_size or getattr(self.batch_sampler, "batch_size", None) or 1
        self.epochs = epochs
        self._start_method = context
        self._base = self._config(
            num_workers=self.fixed.get("num_workers", 0),
            prefetch_factor=self.fixed.get("prefetch_factor"),
            pin_memory=self.fixed.get("pin_memory", False),
        )
        if not 0.0 <= margin < 1.0:
            raise ValueError(f"margin must be in [0, 1) but got {margin}.")
        # the study's best configurations, and where to write the result back (storage, name)
        seeds, self._write_back = self._seeds(study, storage) if study else ([], None)
        ladder = self._first_candidates(seeds, max_workers)
        top = max(c.num_workers for c in ladder)
        self.shape = SegmentShape(warmup=top + 2, windows=4, window_steps=window_steps)
        self.tuner = Tuner(
            ladder,
            shape=self.shape,
            budget=tune_steps if tune_steps is not None else self.default_budget(),
            variants=self._variants(),
            seeded=bool(seeds),
            margin=margin,
        )
        # The loaders built here draw their worker seeds from a generator of their own, so
        # that the user's (or the global) random stream is drawn as by one plain DataLoader.
        self._private = torch.Generator()
        self._private.seed()
        self._final: DataLoader | None = None
        self._final_config: LoaderConfig | None = None
        self._final_batches = _Batches(self.batch_sampler)
        self._active: Any = None  # the running iterator of a segment or rest-of-epoch loader
        self._serving: LoaderConfig | None = None
        self._seconds = 0.0  # wall time served while tuning
        self._images = 0  # samples served while tuning
        self.report: OnlineReport | None = None

    def default_budget(self) -> int:
        """Tuning steps when ``tune_steps`` is not given: the first epoch, and at least
        :data:`MIN_SEGMENTS` segments (a short epoch hands the rest to the next one)."""
        return max(len(self), MIN_SEGMENTS * self.shape.steps)

    # -- what a DataLoader has ---------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.batch_sampler)

    @property
    def config(self) -> LoaderConfig | None:
        """The settled configuration (None while tuning)."""
        return self._final_config if self.report is not None else None

    @property
    def serving(self) -> LoaderConfig | None:
        """The configuration serving the current batch (a candidate while tuning)."""
        return self._serving

    @property
    def num_workers(self) -> int:
        return self.config.num_workers if self.config else self._base.num_workers

    def __iter__(self) -> Iterator[Any]:
        if self.report is not None:
            assert self._final is not None
            return self._serve_final()
        return self._tuning_epoch()

    def close(self) -> None:
        """Stop every worker now (the settled loader's persistent ones too)."""
        if self._active is not None:
            _shut_down(self._active)
            self._active = None
        if self._final is not None and getattr(self._final, "_iterator", None) is not None:
            _shut_down(self._final._iterator)
            self._final._iterator = None

    def __enter__(self) -> AutoLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: nothing left to stop
            pass

    # -- the candidates ------------------------------------------------------------------------

    def _config(self, **knobs: Any) -> LoaderConfig:
        w = knobs["num_workers"]
        pf = knobs.get("prefetch_factor") if w > 0 else None
        return LoaderConfig(
            num_workers=w,
            batch_size=self._nominal,
            pin_memory=bool(knobs.get("pin_memory", False)),
            prefetch_factor=pf,
            persistent_workers=False,  # decided once settled (it matters at epoch starts only)
            start_method=self._start_method if w > 0 else None,
        )

    def _first_candidates(
        self, seeds: list[LoaderConfig], max_workers: int | None
    ) -> list[LoaderConfig]:
        """What the tuner races first: your configuration, then the study's best (``seeds``)
        or, without them, the worker ladder up to ``max_workers`` (default: the CPU budget's)."""
        ladder = seeds
        if not seeds:
            if max_workers is None:
                budget = cpu_budget()  # this process's CPUs, shared by LOCAL_WORLD_SIZE ranks
                max_workers = default_max_workers(budget)
                _logger.info("CPU budget: %s; worker ladder up to %d", budget.describe(),
                             max_workers)  # fmt: skip
            ladder = self._ladder(max_workers)
        return [self._base, *[c for c in ladder if c != self._base]]

    def _ladder(self, max_workers: int) -> list[LoaderConfig]:
        pin = self.fixed.get("pin_memory", _accelerator())
        if "num_workers" in self.fixed:
            workers = [self.fixed["num_workers"]]
        else:
            workers = [w for w in _LADDER if w <= max_workers] or [0]
        pf = self.fixed.get("prefetch_factor")
        return [self._config(num_workers=w, prefetch_factor=pf, pin_memory=pin) for w in workers]

    def _variants(self) -> list[Any]:
        """One axis per knob tried on the ladder's best: the batch sizes you listed (all of
        them), prefetch, then pinned memory (while each improves)."""
        axes: list[Any] = []
        if self._batch_sizes:  # every size you listed, on the best worker count
            sizes = self._batch_sizes
            axes.append(
                Axis(lambda best: [with_knob(best, batch_size=b) for b in sizes], every=True)
            )
        if "prefetch_factor" not in self.fixed:
            axes.append(
                lambda best: (
                    [with_knob(best, prefetch_factor=pf) for pf in _PREFETCH_VARIANTS]
                    if best.num_workers > 0
                    else []
                )
            )
        if "pin_memory" not in self.fixed and _accelerator():
            axes.append(lambda best: [with_knob(best, pin_memory=not best.pin_memory)])
        return axes

    def _seeds(
        self, study: str, storage: str | None
    ) -> tuple[list[LoaderConfig], tuple[str, str] | None]:
        from loadersearch.online._shared_study import seeds_from_study

        return seeds_from_study(study, storage, self._fit)

    def _fit(self, config: LoaderConfig) -> LoaderConfig:
        """A stored configuration as this loader may use it: your batch size and fixed knobs."""
        knobs = {k: getattr(config, k) for k in TUNED}
        knobs.update({k: v for k, v in self.fixed.items() if k in TUNED})
        if not _accelerator():
            knobs["pin_memory"] = False
        return self._config(**knobs)

    # -- serving -------------------------------------------------------------------------------

    def _loader(self, config: LoaderConfig, batch_sampler: Any) -> DataLoader:
        """A DataLoader of ``config`` serving ``batch_sampler``'s batches: a candidate's stretch
        of the epoch, or the settled loader's :class:`_Batches`."""
        kwargs = config.dataloader_kwargs()
        kwargs.pop("batch_size")
        if config.num_workers > 0 and self._start_method is None:
            kwargs.pop("multiprocessing_context")  # the user's Python's default, as given
        return DataLoader(
            self.dataset,
            batch_sampler=batch_sampler,
            collate_fn=self.collate_fn,
            generator=self._private,
            **kwargs,
            **self._extra,
        )

    def _tuning_epoch(self) -> Iterator[Any]:
        epoch = _draw_epoch(
            self.generator,
            self.sampler,
            self.batch_sampler,
            drop_last=self.drop_last,
            by_index=bool(self._batch_sizes),  # batch_sizes: cut at each candidate's size
        )
        completed = False
        t0 = time.perf_counter()
        try:
            while not epoch.done():
                config = self.tuner.next()
                if config is None:  # settled: the chosen loader serves the rest
                    self._seconds += time.perf_counter() - t0
                    self._settle()
                    self._final_batches.pending = epoch.rest(self.batch_size)
                    yield from self._serve_final()
                    break
                if not epoch.fits(self.shape.steps, config.batch_size):
                    # too short for a segment: the best so far serves the rest, unmeasured,
                    # and tuning goes on in the next epoch
                    best = self.tuner.best()
                    use = best.config if best else config
                    rest = epoch.rest(use.batch_size)
                    self.tuner.spend(len(rest))
                    self._images += sum(len(b) for b in rest)
                    yield from self._serve(use, rest)
                    break
                segment = epoch.take(self.shape.steps, config.batch_size)
                yield from self._segment(config, segment)
            completed = True
        finally:
            if self.report is None:
                self._seconds += time.perf_counter() - t0
            if not completed:
                self.close()  # an abandoned epoch (a break, or your step raised)

    def _segment(self, config: LoaderConfig, batches: list[list[int]]) -> Iterator[Any]:
        """Serve ``batches`` from ``config`` and record the segment's windows."""
        edges = self.shape.edges()
        marks: list[float] = []
        loader = self._loader(config, list(batches))
        self._serving = config
        t_iter = time.perf_counter()
        self._active = iter(loader)
        start_s = 0.0
        try:
            for k in range(len(batches)):
                if k in edges:
                    _sync()
                    marks.append(time.perf_counter())
                batch = next(self._active)
                if k == 0:
                    start_s = time.perf_counter() - t_iter
                self.tuner.spend(1)
                self._images += len(batches[k])
                yield batch
                del batch
            _sync()
            marks.append(time.perf_counter())  # your last step of the segment is done
        finally:
            _shut_down(self._active)
            self._active = None
        rates = _window_rates(batches, edges, marks)
        self.tuner.record(config, rates, start_s, marks[-1] - t_iter)
        _logger.debug("segment %s: %s images/s", config.label(), [f"{r:.1f}" for r in rates])

    def _serve(self, config: LoaderConfig, batches: list[list[int]]) -> Iterator[Any]:
        self._serving = config
        self._active = iter(self._loader(config, list(batches)))
        try:
            yield from self._active
        finally:
            _shut_down(self._active)
            self._active = None

    def _serve_final(self) -> Iterator[Any]:
        assert self._final is not None
        completed = False
        if self._final_batches.pending is None:  # a new epoch: draw as a DataLoader does
            _draw_worker_seed(self.generator)
        self._serving = self._final_config
        try:
            yield from self._final
            completed = True
        finally:
            if not completed:
                self.close()

    def _settle(self) -> None:
        """Build the settled loader, and report (and store) what tuning found and cost."""
        settled = self.tuner.settled
        assert settled is not None
        persistent = self.fixed.get("persistent_workers", settled.num_workers > 0)
        final = with_knob(settled, persistent_workers=bool(persistent and settled.num_workers))
        epoch_images = len(self) * self._nominal  # as you passed it, for the report
        if self._batch_sizes and final.batch_size != self.batch_size:  # one you listed won
            self.batch_size = final.batch_size
            self.batch_sampler = BatchSampler(self.sampler, final.batch_size, self.drop_last)
            self._final_batches.source = self.batch_sampler
        self._final = self._loader(final, self._final_batches)
        self._final_config = final
        self.report = build_report(
            self.tuner,
            final=final,
            baseline=self._base,
            tuning_s=self._seconds,
            tuning_images=self._images,
            epoch_images=epoch_images,
            epochs=self.epochs,
        )
        _logger.info("%s", self.report.summary())
        if self._write_back is not None:
            from loadersearch.online._shared_study import record_online

            record_online(self._write_back, self.report)


def autoloader(loader: DataLoader, **options: Any) -> AutoLoader:
    """An :class:`AutoLoader` with an existing DataLoader's arguments: wrap the DataLoader your
    code (or a Lightning ``train_dataloader()``) builds, and return this instead::

        loader = loadersearch.online.autoloader(DataLoader(ds, batch_size=32, shuffle=True))

    Its tuned knobs are tuned unless ``options`` fix them (``num_workers=4``); ``options``
    are AutoLoader's own (``study``, ``tune_steps``, ...). Its order is kept: the same
    sampler or batch sampler object, the same ``drop_last`` and ``generator``."""
    if not isinstance(loader, DataLoader):
        raise TypeError(f"autoloader() wraps a DataLoader but got {type(loader).__name__}.")
    batch_size, kwargs = _arguments_of(loader)
    return AutoLoader(loader.dataset, batch_size, **{**kwargs, **options})
