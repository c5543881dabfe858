"""An :class:`~loadersearch.online.AutoLoader`'s arguments, checked and sorted before it builds
its loaders: the checks a DataLoader does not make (a map-style dataset, counts in range, a
start method given by name, the batch sizes to try), the keywords sorted into those that
decide the epoch's order, the knobs the user fixes and the rest (every DataLoader it builds
gets them), and the plain DataLoader that draws the order with the user's arguments (checking
them all as DataLoader does); and an existing DataLoader's arguments, for
:func:`~loadersearch.online.autoloader`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch.utils.data import DataLoader, Dataset, IterableDataset

# Knobs the tuner may change; a knob passed to AutoLoader is fixed instead.
TUNED = ("num_workers", "prefetch_factor", "pin_memory")
# What decides the epoch's order and batches (passed to the DataLoader that draws them).
_ORDER_KWARGS = ("shuffle", "sampler", "batch_sampler", "drop_last", "generator")


def _check_arguments(
    dataset: Dataset, *, tune_steps: int | None, max_workers: int | None, epochs: int | None
) -> None:
    """The dataset (map-style) and the counts (in range), before any keyword is read."""
    if isinstance(dataset, IterableDataset):
        raise TypeError(
            "AutoLoader needs a map-style dataset (__getitem__ and __len__): an "
            "IterableDataset has no order it could hand from one loader to the next. Use a "
            "plain DataLoader for it."
        )
    if tune_steps is not None and tune_steps < 0:
        raise ValueError(f"tune_steps cannot be negative but got {tune_steps}.")
    if max_workers is not None and max_workers < 0:
        raise ValueError(f"max_workers cannot be negative but got {max_workers}.")
    if epochs is not None and epochs < 1:
        raise ValueError(f"epochs must be at least 1 but got {epochs}.")


def _sort_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], str | None]:
    """Take out of ``kwargs`` what decides the order, the knobs the user fixes (the tuned ones
    and ``persistent_workers``) and the start method (by name: it starts several loaders'
    workers); what is left goes to every DataLoader as given."""
    order = {k: kwargs.pop(k) for k in _ORDER_KWARGS if k in kwargs}
    fixed = {k: kwargs.pop(k) for k in (*TUNED, "persistent_workers") if k in kwargs}
    context = kwargs.pop("multiprocessing_context", None)
    if context is not None and not isinstance(context, str):
        raise TypeError(
            "AutoLoader takes multiprocessing_context by name ('fork', 'forkserver' or "
            f"'spawn'), not {type(context).__name__}: it builds several DataLoaders."
        )
    return order, fixed, context


def _order_drawer(
    dataset: Dataset,
    batch_size: int | None,
    collate_fn: Any,
    order: dict[str, Any],
    kwargs: dict[str, Any],
) -> DataLoader:
    """A plain DataLoader with the user's arguments: it draws the order (and checks them all:
    shuffle with a sampler, batch_sampler with batch_size, ...) as DataLoader does. It must
    serve batches."""
    drawer = DataLoader(dataset, batch_size=batch_size, collate_fn=collate_fn, **order, **kwargs)
    if drawer.batch_sampler is None:
        raise ValueError(
            "AutoLoader serves batches, and batch_size=None without a batch_sampler asks "
            "for single samples: give batch_size (or a batch_sampler)."
        )
    return drawer


def _batch_sizes_to_try(
    batch_sizes: Sequence[int] | None, batch_size: int | None, order: dict[str, Any]
) -> list[int] | None:
    """The batch sizes tuned (``batch_sizes`` and yours, sorted), or None: not tuned."""
    if batch_sizes is not None:
        if "batch_sampler" in order:
            raise ValueError(
                "batch_sizes tunes the batch size, and a batch_sampler fixes the batches: "
                "drop one of them."
            )
        bad = [b for b in batch_sizes if isinstance(b, bool) or not isinstance(b, int) or b < 1]
        if bad or not batch_sizes:
            raise ValueError(
                f"batch_sizes must be positive integers, e.g. [16, 32, 64], but got "
                f"{list(batch_sizes)!r}."
            )
    return sorted({*batch_sizes, batch_size}) if batch_sizes else None


def _arguments_of(loader: DataLoader) -> tuple[int | None, dict[str, Any]]:
    """An existing DataLoader's batch size and the keywords that keep its order (the same
    sampler or batch sampler object, the same ``drop_last`` and ``generator``), its collate,
    ``worker_init_fn`` and ``timeout``, as AutoLoader takes them."""
    kwargs: dict[str, Any] = {
        "collate_fn": loader.collate_fn,
        "worker_init_fn": loader.worker_init_fn,
        "timeout": loader.timeout,
        "generator": loader.generator,
    }
    if loader.batch_size is None and loader.batch_sampler is not None:
        kwargs["batch_sampler"] = loader.batch_sampler
        batch_size = 1  # DataLoader's default, which a batch_sampler requires
    else:
        kwargs["sampler"] = loader.sampler
        kwargs["drop_last"] = loader.drop_last
        batch_size = loader.batch_size
    return batch_size, kwargs
