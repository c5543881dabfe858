"""The Hugging Face Trainer: :class:`DataLoaderTuner`, a ``TrainerCallback`` that tunes the
train DataLoader during the first epoch (through :class:`loadersearch.AutoLoader`) or applies
a stored study's winner, and writes the choice into the ``TrainingArguments``'
``dataloader_*`` fields; and :func:`dataloader_arguments`, those fields from a stored study::

    from transformers import Trainer, TrainingArguments
    from loadersearch.integrations.huggingface import DataLoaderTuner, dataloader_arguments

    trainer = Trainer(model, args, train_dataset=ds, callbacks=[DataLoaderTuner()])
    trainer.train()          # trainer.args.dataloader_num_workers, ...: the tuned values

    # a later run, from the study `loadersearch run` stored (no tuning):
    args = TrainingArguments("out", **dataloader_arguments(study="my-study"))

How the loader is swapped: the Trainer keeps its train DataLoader in a local variable of its
training loop, so nothing can replace it mid-training. It is, though, Accelerate's
``DataLoaderShard`` (``accelerator.prepare`` wraps every Trainer DataLoader: it moves batches
to the device and, under DDP, holds the rank's ``BatchSamplerShard``), which iterates the plain
DataLoader it holds in ``base_dataloader`` afresh each epoch. In ``on_train_begin``, before the
first ``iter()``, the callback replaces that inner DataLoader with an AutoLoader over the same
batch sampler, collate and worker seeding (or, with a study, with a DataLoader of the study's
knobs), so the Trainer, Accelerate's device placement and sharding stay as they are.

Requires ``transformers`` and ``accelerate`` (``pip install 'loadersearch[transformers]'``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from loadersearch.integrations import _loaders, require

require("transformers", "transformers")

from transformers import TrainerCallback  # noqa: E402 - after the one-line check above

if TYPE_CHECKING:
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from loadersearch import LoaderConfig
    from loadersearch.online import AutoLoader, OnlineReport

__all__ = ["FIELDS", "DataLoaderTuner", "dataloader_arguments", "fill_training_arguments"]

_logger = logging.getLogger(__name__)

#: The TrainingArguments field of each loader knob.
FIELDS = {
    "num_workers": "dataloader_num_workers",
    "prefetch_factor": "dataloader_prefetch_factor",
    "pin_memory": "dataloader_pin_memory",
    "persistent_workers": "dataloader_persistent_workers",
}


def _fields(knobs: dict[str, Any]) -> dict[str, Any]:
    return {FIELDS[k]: knobs[k] for k in FIELDS}


def dataloader_arguments(study: str | None = None, storage: str | None = None) -> dict[str, Any]:
    """The ``TrainingArguments`` fields ``dataloader_num_workers``,
    ``dataloader_prefetch_factor``, ``dataloader_pin_memory`` and
    ``dataloader_persistent_workers`` of a stored study's winner
    (:func:`loadersearch.load_best`; ``storage`` and ``study`` as there)::

        args = TrainingArguments("out", per_device_train_batch_size=32,
                                 **dataloader_arguments(study="my-study"))

    Pinned memory only with an accelerator. The study's batch size is not among them (it
    changes training): set ``per_device_train_batch_size`` yourself. Raises
    :class:`loadersearch.errors.StudyError` when the study is missing or has no finished
    trial, and when it was measured on other hardware (the hardware guard)."""
    return _fields(_loaders.knobs_of(_loaders.study_winner(study, storage)[0]))


def fill_training_arguments(args: TrainingArguments, config: LoaderConfig) -> None:
    """Set ``args``' four ``dataloader_*`` fields to ``config``'s knobs (as this host may use
    them: pinned memory only with an accelerator)."""
    _fill(args, _loaders.knobs_of(config))


def _fill(args: TrainingArguments, knobs: dict[str, Any]) -> None:
    for field, value in _fields(knobs).items():
        setattr(args, field, value)


class DataLoaderTuner(TrainerCallback):
    """Tunes the Trainer's train DataLoader (``num_workers``, ``prefetch_factor``, with a GPU
    ``pin_memory``) while the first epoch trains, then keeps the best, its workers persistent
    (:class:`loadersearch.AutoLoader`: every sample once, in the Trainer's sampler order; the
    objective is the loop's own images/s, the training step included). The batch size is not
    changed.

    ``study`` (and ``storage``, as for ``loadersearch run``): apply that study's winner
    (:func:`loadersearch.load_best`) instead of tuning; a study that is missing, empty or of
    other hardware is logged and the callback tunes online. ``options``: AutoLoader's
    ``max_workers`` (default: this rank's share of the node's CPUs: the CPUs this process may
    use, affinity and cgroup quota, over ``$LOCAL_WORLD_SIZE``), ``tune_steps``,
    ``window_steps`` (rounded up to a multiple of ``gradient_accumulation_steps``, since the
    Trainer fetches that many batches at once), ``margin``, or a knob to fix
    (``prefetch_factor=2``).

    Once chosen: the four ``dataloader_*`` fields of the Trainer's ``TrainingArguments`` hold
    the choice (the evaluation loaders built from then on use them too, as they would had you
    set them; :meth:`arguments` gives them for your next run); a record
    ``{"loadersearch/num_workers": ..., "loadersearch/images_per_s": ...,
    "loadersearch/speedup": ..., "loadersearch/tuning_cost_s": ..., ...}`` is added to
    ``trainer.state.log_history`` (saved in ``trainer_state.json``) and to the next log event
    (the callbacks after this one in the Trainer's list see it: the console's progress
    printer; the reporting integrations, which the Trainer puts before your callbacks, do
    not); a log line goes to the logger ``loadersearch.integrations.huggingface``.

    Not tuned, logged: a Trainer DataLoader that is not Accelerate's ``DataLoaderShard``
    over a plain DataLoader (a custom ``get_train_dataloader``, an iterable dataset, torchdata's
    stateful loader), and online tuning in a training resumed from a checkpoint (it would skip
    batches of a loader the tuner has not built; a study's winner is applied).
    """

    def __init__(self, study: str | None = None, storage: str | None = None, **options: Any):
        self.study, self.storage = study, storage
        self.options = _loaders.autoloader_options(options, "DataLoaderTuner")
        self.loader: AutoLoader | None = None  # the online tuner, once training begins
        self.knobs: dict[str, Any] | None = None  # the choice, once made
        self.source: str | None = None  # "online", or "study NAME"
        self.report: OnlineReport | None = None
        self._pending: dict[str, Any] | None = None  # for the next on_log

    def arguments(self) -> dict[str, Any]:
        """The choice as ``TrainingArguments`` fields (empty before it is made)."""
        return _fields(self.knobs) if self.knobs is not None else {}

    # -- the Trainer's events ------------------------------------------------------------------

    def on_train_begin(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        train_dataloader: Any = None,
        **kwargs: Any,
    ) -> None:
        from torch.utils.data import DataLoader, IterableDataset

        base = getattr(train_dataloader, "base_dataloader", None)
        why = None
        if base is None:
            why = (
                f"the Trainer's train dataloader ({type(train_dataloader).__name__}) is not "
                "Accelerate's DataLoaderShard"
            )
        elif type(base) is not DataLoader:
            why = f"the train dataloader is a {type(base).__name__}, not a plain DataLoader"
        elif isinstance(base.dataset, IterableDataset):
            why = "an IterableDataset has no order to hand from one candidate loader to the next"
        if why is not None:
            _logger.warning("loadersearch: not tuning the train DataLoader: %s.", why)
            return
        budget = _loaders.rank_budget()  # $LOCAL_WORLD_SIZE ranks (torchrun, accelerate)
        if self.knobs is None and self.study is not None:
            winner = _loaders.stored_winner(self.study, self.storage, budget.ranks)
            if winner is not None:
                self.knobs, self.source = _loaders.knobs_of(winner), f"study {self.study}"
        if self.knobs is not None:  # a study's winner, or chosen in an earlier train()
            train_dataloader.base_dataloader = _loaders.with_knobs(base, self.knobs)
            self._chosen(args, state)
            return
        if state.global_step > 0:  # the Trainer skips the first batches of a loader it rebuilds
            _logger.warning(
                "loadersearch: not tuning the train DataLoader: the training resumes from a "
                "checkpoint (step %d).",
                state.global_step,
            )
            return
        from loadersearch.online import autoloader

        options = _loaders.ladder_options(self.options, budget)
        accumulate = max(1, args.gradient_accumulation_steps)
        window = options.get("window_steps", 8)
        options["window_steps"] = -(-window // accumulate) * accumulate
        epochs = state.num_train_epochs if args.max_steps <= 0 else None
        self.loader = autoloader(base, epochs=epochs or None, **options)
        self.source = "online"
        train_dataloader.base_dataloader = self.loader

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.loader is not None and self.knobs is None and self.loader.report is not None:
            self.report = self.loader.report
            self.knobs = _loaders.settings_of(self.loader)
            self._chosen(args, state)

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if self._pending is not None and logs is not None:
            logs.update(self._pending)
            self._pending = None

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        if self.loader is None:
            return
        if self.loader.report is None:
            _logger.warning(
                "loadersearch: training ended after %d tuning steps, before the tuner settled "
                "(it needs at least %d): the train DataLoader was not tuned.",
                self.loader.tuner.spent,
                self.loader.tuner.budget,
            )
        self.loader.close()  # the settled loader's persistent workers too

    # -- the choice ----------------------------------------------------------------------------

    def _chosen(self, args: TrainingArguments, state: TrainerState) -> None:
        assert self.knobs is not None and self.source is not None
        _fill(args, self.knobs)
        record: dict[str, Any] = _loaders.choice_params(self.knobs, self.source)
        if self.report is not None:
            record.update(_loaders.report_metrics(self.report))
        state.log_history.append({**record, "step": state.global_step})
        self._pending = record
        line = _loaders.describe(self.knobs, self.source, self.report)
        if args.world_size > 1:
            line = f"[rank {args.process_index}] {line}"
        _logger.info("%s", line)
