"""The stream an :class:`~loadersearch.online.AutoLoader` serves, below the tuning: an epoch's
order, drawn as a DataLoader draws it (its workers' base seed first, then the sampler) and
handed out stretch by stretch to one candidate's loader after the other (:class:`_Epoch`);
the settled loader's batch sampler, the rest of a tuning epoch and then the user's batches
(:class:`_Batches`); what is done at a stretch's edges: the device synchronised before the
clock is read (:func:`_sync`), the old loader's workers stopped before the next ones start
(:func:`_shut_down`); and a segment's window rates from the clock's marks.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import Sampler


def _sync() -> None:
    """Wait for the device work the user's steps queued (only once CUDA is in use)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize(torch.cuda.current_device())  # your step's device


def _shut_down(iterator: Any) -> None:
    """Stop a DataLoader iterator's workers now (join, then terminate), not at garbage
    collection: the next candidate's workers must not share the CPUs with them."""
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if shutdown is not None:
        shutdown()


class _Batches(Sampler[list[int]]):
    """The final loader's batch sampler: the rest of a tuning epoch once (``pending``), then
    the user's batches, drawn afresh each epoch as a DataLoader draws them."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self.pending: list[list[int]] | None = None

    def __iter__(self) -> Iterator[list[int]]:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            yield from pending
        else:
            yield from self.source

    def __len__(self) -> int:
        return len(self.pending) if self.pending is not None else len(self.source)


class _Epoch:
    """One epoch's order, handed out stretch by stretch: the user's batches as drawn (a fixed
    batch size), or the sampler's indices cut at each candidate's batch size (``batch_sizes``
    tuned; the epoch's last batch is short, or dropped with ``drop_last``, as a DataLoader's)."""

    def __init__(
        self,
        batches: list[list[int]] | None = None,
        order: list[int] | None = None,
        drop_last: bool = False,
    ) -> None:
        self.batches, self.order, self.drop_last = batches, order, drop_last
        self.pos = 0  # in batches, or in indices

    def _len(self) -> int:
        return len(self.batches) if self.batches is not None else len(self.order or [])

    def done(self) -> bool:
        return self.pos >= self._len()

    def fits(self, steps: int, batch_size: int) -> bool:
        need = steps if self.batches is not None else steps * batch_size
        return self.pos + need <= self._len()

    def take(self, steps: int, batch_size: int) -> list[list[int]]:
        if self.batches is not None:
            out = self.batches[self.pos : self.pos + steps]
            self.pos += len(out)
            return out
        return self._cut(self.pos + steps * batch_size, batch_size)

    def rest(self, batch_size: int) -> list[list[int]]:
        if self.batches is not None:
            out = self.batches[self.pos :]
            self.pos = len(self.batches)
            return out
        out = self._cut(self._len(), batch_size)
        if out and self.drop_last and len(out[-1]) < batch_size:
            out.pop()
        return out

    def _cut(self, end: int, batch_size: int) -> list[list[int]]:
        assert self.order is not None
        idx = self.order[self.pos : end]
        self.pos += len(idx)
        return [idx[i : i + batch_size] for i in range(0, len(idx), batch_size)]


def _window_rates(batches: list[list[int]], edges: list[int], marks: list[float]) -> list[float]:
    """Each window's images/s: the images its batches held, as served (a short last batch
    counts short), over the time between the clock's ``marks`` at its ``edges`` (the steps at
    which each window begins, and the last ends: :meth:`SegmentShape.edges`)."""
    sizes = [len(b) for b in batches]  # the images each window served, as served
    images = [sum(sizes[a:b]) for a, b in zip(edges, edges[1:], strict=False)]
    return [
        n / (b - a) if b > a else math.inf
        for n, a, b in zip(images, marks[:-1], marks[1:], strict=True)
    ]


def _draw_worker_seed(generator: torch.Generator | None) -> None:
    """The draw a DataLoader's iterator makes for its workers' base seed, from the user's
    generator (or the global one), so that the user's random stream advances as with a plain
    DataLoader."""
    torch.empty((), dtype=torch.int64).random_(generator=generator)


def _draw_epoch(
    generator: torch.Generator | None,
    sampler: Any,
    batch_sampler: Any,
    *,
    drop_last: bool,
    by_index: bool,
) -> _Epoch:
    """The epoch's order, drawn as a DataLoader's iterator draws it: its worker seed first
    (one draw from the user's generator, or the global one), then the sampler: the batch
    sampler's batches, or (``by_index``: the batch size is tuned) the sampler's indices."""
    _draw_worker_seed(generator)
    if by_index:
        return _Epoch(order=list(sampler), drop_last=drop_last)
    return _Epoch(batches=[list(b) for b in batch_sampler])
