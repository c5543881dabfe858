"""One epoch as a training loop runs it (:func:`run_epoch`: ``iter(loader)``, then per batch
the copy to the device and the step), cut into windows at the same fractions of the epoch in
every trial (:func:`window_edges`), and the clocks it is timed with.

Per step the loop only takes two clock readings and records CUDA events: the device is
synchronised at window edges only, and one message is written per window, nothing per step.

What the clocks mean on CUDA, where the host queues device work and runs ahead of it:

* ``wait``: host time blocked in ``next(iterator)``, i.e. waiting for the DataLoader. The
  device may still be computing earlier steps meanwhile (that overlap is what a good loader
  configuration buys), so ``wait`` is the time the *training loop* stalled, not the device.
* ``h2d``: device time of the host-to-device copies, from CUDA events around them, read at
  window edges. With ``pin_memory`` the copies are asynchronous and may overlap compute; a
  pageable copy also blocks the host for its duration.
* ``compute``: the rest of the window, ``seconds - wait - h2d``: the host queuing the step plus
  every wait for the device (the synchronisation at the window's end, and any inside the step:
  AMP's GradScaler reads its inf check once per step; the loss itself never synchronises).

The three add up to the window's wall time, which is what the throughput is computed from; the
parts say where it went. On a CPU everything is synchronous and ``h2d`` is a host-side copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import DataLoader


def window_edges(steps: int, windows_per_epoch: int) -> list[int]:
    """Step counts at which each window of an epoch ends: the same fractions of the epoch in
    every trial (the same steps in every trial of the same epoch length)."""
    return [(w + 1) * steps // windows_per_epoch for w in range(windows_per_epoch)]


def move_to_device(batch: Any, device: Any, non_blocking: bool = False) -> Any:
    """``batch`` with every tensor in it on ``device``: tensors nested in tuples, lists, dicts
    and namedtuples, and objects with a ``to`` method (custom batch classes); anything else
    (strings, numbers) as it is. The structure a training loop would move, whatever the
    collate returns."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, Mapping):
        return {k: move_to_device(v, device, non_blocking) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # a namedtuple
        return type(batch)(*(move_to_device(v, device, non_blocking) for v in batch))
    if isinstance(batch, (tuple, list)):
        return type(batch)(move_to_device(v, device, non_blocking) for v in batch)
    if not isinstance(batch, (str, bytes)) and callable(getattr(batch, "to", None)):
        return batch.to(device, non_blocking=non_blocking)
    return batch


class DeviceClock:
    """Device synchronisation and host->device copy timing (CUDA events, read at edges).

    ``barrier`` (several ranks) is called after the device is synchronised, so that every rank
    starts and ends each window at the same moment and the slowest rank sets the pace."""

    def __init__(self, device: Any, cuda: bool, barrier: Callable[[], None] | None = None) -> None:
        self.torch = torch
        self.device = device
        self.cuda = cuda
        self.barrier = barrier
        self.events: list[tuple[Any, Any]] = []
        self.host_h2d = 0.0

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)
        if self.barrier is not None:
            self.barrier()

    def to_device(self, batch: Any, non_blocking: bool) -> Any:
        """Every tensor of the batch (nested in tuples, lists, dicts, ...: images, targets and
        whatever the collate adds) on the device, in the same structure."""
        if self.cuda:
            start = self.torch.cuda.Event(enable_timing=True)
            end = self.torch.cuda.Event(enable_timing=True)
            start.record()
            batch = move_to_device(batch, self.device, non_blocking)
            end.record()
            self.events.append((start, end))
            return batch
        t = time.perf_counter()
        batch = move_to_device(batch, self.device, False)
        self.host_h2d += time.perf_counter() - t
        return batch

    def take_h2d(self) -> float:
        """Copy seconds since the last call; call after :meth:`sync`."""
        seconds = self.host_h2d + sum(s.elapsed_time(e) for s, e in self.events) / 1000.0
        self.events.clear()
        self.host_h2d = 0.0
        return seconds


@dataclass
class WindowClock:
    """What accumulates between two window edges of an epoch."""

    t0: float  # when the window began (the epoch's ``iter(loader)`` for the first)
    wait: float = 0.0  # seconds the loop waited for batches
    start_s: float = 0.0  # the epoch's first-batch latency, in the window that holds it


def run_epoch(
    loader: DataLoader,
    clock: DeviceClock,
    step_fn: Callable[[Any], None],
    edges: list[int],
    non_blocking: bool,
    end_window: Callable[[int, WindowClock, float, float], None] | None,
    after_first_step: Callable[[], None] | None = None,
    waits: list[float] | None = None,
) -> tuple[float, list[float]]:
    """One epoch as a training loop runs it: ``iter(loader)``, then per batch the copy and the
    step. At each window edge the device is synchronised and ``end_window(win, window,
    seconds, h2d)`` is called (measured epochs only). ``after_first_step()`` runs once after the
    epoch's first step (unmeasured epochs only). ``waits`` (a list) gets each step's wait for
    its batch. Returns the epoch's seconds and each batch's arrival time since
    ``iter(loader)``."""
    clock.sync()
    clock.take_h2d()
    t_iter = time.perf_counter()
    it = iter(loader)
    arrivals: list[float] = []
    window = WindowClock(t_iter)
    win = step = 0
    t_ask = t_iter
    for batch in it:
        t_got = time.perf_counter()
        window.wait += t_got - t_ask
        if waits is not None:
            waits.append(t_got - t_ask)
        arrivals.append(t_got - t_iter)
        if step == 0:
            window.start_s = t_got - t_iter
        step_fn(clock.to_device(batch, non_blocking))
        del batch
        if step == 0 and after_first_step is not None:
            after_first_step()
        step += 1
        if step == edges[win] and win < len(edges) - 1:
            if end_window is not None:
                clock.sync()
                t = time.perf_counter()
                end_window(win, window, t - window.t0, clock.take_h2d())
                window = WindowClock(t)
            win += 1
        t_ask = time.perf_counter()
    window.wait += time.perf_counter() - t_ask  # StopIteration: non-persistent workers end
    clock.sync()
    t_end = time.perf_counter()
    del it
    if step != edges[-1]:
        raise RuntimeError(f"the loader gave {step} batches in an epoch instead of {edges[-1]}")
    if end_window is not None:
        end_window(win, window, t_end - window.t0, clock.take_h2d())
    return t_end - t_iter, arrivals
