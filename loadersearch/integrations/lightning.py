"""PyTorch Lightning: :class:`DataLoaderTuner`, a callback that tunes the train DataLoader
during the first epoch (through :class:`loadersearch.AutoLoader`), or applies a stored study's
winner, and logs the choice through the Trainer's loggers::

    from lightning.pytorch import Trainer
    from loadersearch.integrations.lightning import DataLoaderTuner

    trainer = Trainer(max_epochs=30, callbacks=[DataLoaderTuner()])   # nothing else changes
    trainer.fit(model, datamodule)

How the loader is swapped: Lightning builds the train DataLoader in its fit loop's
``setup_data`` (calling your ``train_dataloader()``, injecting the ``DistributedSampler``
under DDP, adding its worker seeding), then calls ``on_train_start``. There the callback wraps
exactly that processed DataLoader (:func:`loadersearch.autoloader` keeps its sampler, batches,
collate and ``worker_init_fn``) and puts the wrapper in the fit loop's combined loader, so
every epoch, ``set_epoch`` of the sampler included, iterates it. Wrapping the hook's result
before Lightning processes it instead would lose the DDP sampler (Lightning injects it only
into DataLoaders). The fit loop's combined loader and data fetcher are Lightning internals
(``fit_loop._combined_loader``, ``fit_loop._data_fetcher``): :func:`_swap_train_loader` is the
one place that touches them, and when they are not there the callback logs why and leaves the
training as it is.

Requires the ``lightning`` package (``pip install 'loadersearch[lightning]'``; the standalone
``pytorch_lightning`` package has its own Callback class and is not supported).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from loadersearch.integrations import _loaders, require

require("lightning", "lightning")

from lightning.pytorch import Callback  # noqa: E402 - after the one-line check above

if TYPE_CHECKING:
    from lightning.pytorch import LightningModule, Trainer

    from loadersearch.online import AutoLoader, OnlineReport

__all__ = ["DataLoaderTuner"]

_logger = logging.getLogger(__name__)


class DataLoaderTuner(Callback):
    """Tunes the train DataLoader's ``num_workers``, ``prefetch_factor`` and (with a GPU)
    ``pin_memory`` while the first epoch trains, then keeps the best, its workers persistent
    (:class:`loadersearch.AutoLoader`: every sample of the epoch once, in your sampler's
    order; the objective is the loop's own images/s, your step included). The batch size is
    not changed.

    ``study`` (and ``storage``, as for ``loadersearch run``): apply that study's winner
    (:func:`loadersearch.load_best`; your batch size kept) instead of tuning; a study that is
    missing, empty or of other hardware is logged and the callback tunes online.
    ``options``: AutoLoader's ``max_workers`` (default: this rank's share of the node's CPUs,
    see below), ``tune_steps``, ``window_steps``, ``margin``, or a knob to fix
    (``prefetch_factor=2``).

    The choice goes to every logger of the Trainer (``log_hyperparams``:
    ``loadersearch/num_workers``, ...; ``log_metrics``: ``loadersearch/images_per_s``,
    ``loadersearch/speedup``, ``loadersearch/tuning_cost_s``,
    ``loadersearch/saved_per_epoch_s``, ...) and to a log line (logger
    ``loadersearch.integrations.lightning``); :attr:`report` holds AutoLoader's report.

    Under DDP each rank tunes its own loader over its ``DistributedSampler`` shard, its worker
    ladder bounded by its share of the node's CPUs (the CPUs this process may run on, divided
    by ``$LOCAL_WORLD_SIZE`` or the Trainer's devices per node, cgroup CPU quota included:
    :func:`loadersearch._cpu_budget.cpu_budget`). Not tuned, logged: several
    train dataloaders, an iterable dataset, a DataLoader subclass, ``limit_train_batches``
    below the epoch's length (the epoch is cut where a segment may be running).
    """

    def __init__(self, study: str | None = None, storage: str | None = None, **options: Any):
        super().__init__()
        self.study, self.storage = study, storage
        self.options = _loaders.autoloader_options(options, "DataLoaderTuner")
        self.loader: AutoLoader | None = None  # the online tuner, once training starts
        self.knobs: dict[str, Any] | None = None  # the choice, once made
        self.source: str | None = None  # "online", or "study NAME"
        self.report: OnlineReport | None = None
        self._logged = False

    # -- Lightning's hooks ---------------------------------------------------------------------

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        _swap_train_loader(trainer, lambda loader: self._replacement(trainer, loader))
        if self.knobs is not None and not self._logged:  # a study's winner: chosen already
            self._log(trainer)

    def on_train_batch_end(self, trainer: Trainer, *args: Any, **kwargs: Any) -> None:
        if self.loader is not None and not self._logged and self.loader.report is not None:
            self.report = self.loader.report
            self.knobs = _loaders.settings_of(self.loader)
            self._log(trainer)

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.loader is not None and self.loader.report is None:
            _logger.warning(
                "loadersearch: training ended after %d tuning steps, before the tuner settled "
                "(it needs at least %d): the train DataLoader was not tuned.",
                self.loader.tuner.spent,
                self.loader.tuner.budget,
            )

    def teardown(self, trainer: Trainer, pl_module: LightningModule, stage: str) -> None:
        if self.loader is not None:
            self.loader.close()  # the settled loader's persistent workers too

    # -- the loader ------------------------------------------------------------------------------

    def _replacement(self, trainer: Trainer, loader: Any) -> Any:
        """What serves instead of Lightning's processed train DataLoader ``loader``."""
        from loadersearch.online import autoloader

        budget = _loaders.rank_budget(
            trainer.num_devices if trainer.world_size > 1 else None, "the Trainer's devices"
        )
        if self.knobs is None and self.study is not None:
            winner = _loaders.stored_winner(self.study, self.storage, budget.ranks)
            if winner is not None:
                self.knobs, self.source = _loaders.knobs_of(winner), f"study {self.study}"
                if winner.batch_size != loader.batch_size and loader.batch_size is not None:
                    _logger.info(
                        "loadersearch: study %r's batch size %d not applied (it changes "
                        "training): yours (%d) is kept.",
                        self.study,
                        winner.batch_size,
                        loader.batch_size,
                    )
        if self.knobs is not None:  # a study's winner, or chosen in an earlier fit()
            return _loaders.with_knobs(loader, self.knobs)
        batches = trainer.num_training_batches
        if batches < len(loader):
            _logger.warning(
                "loadersearch: not tuning: the Trainer takes %s of the %d batches of each "
                "epoch (limit_train_batches), and a tuning segment cut there is lost.",
                batches,
                len(loader),
            )
            return loader
        options = _loaders.ladder_options(self.options, budget)
        max_epochs = trainer.max_epochs
        epochs = max_epochs if max_epochs and max_epochs > 0 and trainer.max_steps < 0 else None
        self.loader = autoloader(loader, epochs=epochs, **options)
        self.source = "online"
        return self.loader

    def _log(self, trainer: Trainer) -> None:
        assert self.knobs is not None and self.source is not None
        params = _loaders.choice_params(self.knobs, self.source)
        metrics = _loaders.report_metrics(self.report) if self.report is not None else {}
        for logger in trainer.loggers:
            logger.log_hyperparams(params)
            if metrics:
                logger.log_metrics(metrics, step=trainer.global_step)
        line = _loaders.describe(self.knobs, self.source, self.report)
        if trainer.world_size > 1:
            line = f"[rank {trainer.global_rank}] {line}"
        _logger.info("%s", line)
        self._logged = True


def _swap_train_loader(trainer: Trainer, replace: Callable[[Any], Any]) -> bool:
    """Put ``replace(loader)`` in place of the fit loop's train DataLoader (after Lightning's
    ``setup_data`` processed it, before the first batch), stopping the workers that
    ``setup_data``'s ``iter()`` started for it. Whether it swapped; when Lightning's internals
    are not as expected, or there is not exactly one map-style train DataLoader, it logs why
    and changes nothing."""
    from torch.utils.data import DataLoader, IterableDataset

    loop = trainer.fit_loop
    combined = getattr(loop, "_combined_loader", None)
    fetcher = getattr(loop, "_data_fetcher", None)
    if combined is None or fetcher is None or not hasattr(combined, "flattened"):
        _logger.warning(
            "loadersearch: this Lightning version's fit loop has no combined loader and data "
            "fetcher where DataLoaderTuner looks (fit_loop._combined_loader, _data_fetcher): "
            "the train DataLoader is left as it is."
        )
        return False
    loaders = combined.flattened
    why = None
    if len(loaders) != 1:
        why = f"{len(loaders)} train dataloaders (it tunes one)"
    elif type(loaders[0]) is not DataLoader:  # a subclass may need its own arguments
        why = f"the train dataloader is a {type(loaders[0]).__name__}, not a plain DataLoader"
    elif isinstance(loaders[0].dataset, IterableDataset):
        why = "an IterableDataset has no order to hand from one candidate loader to the next"
    if why is not None:
        _logger.warning("loadersearch: not tuning: %s.", why)
        return False
    new = replace(loaders[0])
    if new is loaders[0]:
        return False
    # setup_data already called iter(): the first epoch's iterator (its workers, if any) is
    # running; stop it now rather than at garbage collection, then start the fetcher afresh.
    for iterator in getattr(getattr(combined, "_iterator", None), "iterators", None) or []:
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
    combined.reset()
    combined.flattened = [new]
    iter(fetcher)
    return True
