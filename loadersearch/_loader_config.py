"""The five DataLoader knobs loadersearch tunes, and how workers start: :class:`LoaderConfig`.

The contract between layers: the search builds one from an Optuna trial, the measurement runs
it, the answer prints it as a ``DataLoader(...)`` line. Plain data that survives a trip through
JSON (it crosses the parent -> measuring child boundary).
"""

from __future__ import annotations

import multiprocessing
import sys
from dataclasses import dataclass
from typing import Any

from loadersearch._options import FLAG, WHOLE, Record, check_fields, opt

CACHES = ("none", "ram", "memmap")  # where the images come from (WorkloadSpec.cache)
DEFAULT_PREFETCH = 2  # PyTorch's prefetch_factor when workers are used and none is given
START_METHODS = ("fork", "forkserver", "spawn")  # how DataLoader workers are started
# Python's own default on this platform (the first listed is the default, per its docs): what a
# DataLoader without multiprocessing_context uses. Python 3.14 changes it to forkserver on Linux.
PLATFORM_START_METHOD = multiprocessing.get_all_start_methods()[0]
# The start method loadersearch measures unless told otherwise: fork on Linux (the fastest
# worker start-up, and what training scripts have used for years), pinned explicitly so that a
# Python whose default is forkserver measures the same thing; elsewhere the platform's default.
DEFAULT_START_METHOD = "fork" if sys.platform.startswith("linux") else PLATFORM_START_METHOD

__all__ = [
    "CACHES",
    "DEFAULT_PREFETCH",
    "DEFAULT_START_METHOD",
    "PLATFORM_START_METHOD",
    "START_METHODS",
    "LoaderConfig",
    "check_start_method",
]


def check_start_method(name: str) -> str:
    """``name`` when it is a start method this platform has, else a ValueError naming them."""
    available = [m for m in START_METHODS if m in multiprocessing.get_all_start_methods()]
    if name not in available:
        raise ValueError(
            f"Unknown start method {name!r}; choose one of {', '.join(available)} "
            "(how DataLoader workers are started: multiprocessing_context)."
        )
    return name


@dataclass(frozen=True)
class LoaderConfig(Record):
    """One DataLoader configuration: the five knobs loadersearch tunes, and how workers start."""

    # The loader knobs: on the command line of bench and diagnose, in a spec file's [space] and
    # [space.fix], bench()'s config and tune()'s space and fix (search/_space.py reads them).
    num_workers: int = opt(  # 0 loads in the training process
        0, kind=WHOLE, low=0, help="Worker processes (0: load in the training process)."
    )
    batch_size: int = opt(  # also a training choice: fix it if it matters
        16, kind=WHOLE, low=1, help="Images per step."
    )
    pin_memory: bool = opt(  # page-locked host batches, faster and async host->device copies
        False, kind=FLAG, flags=("--pin-memory/--no-pin-memory",),
        help="Page-locked host batches (faster, asynchronous copies to the device).",
    )  # fmt: skip
    # None when 0 workers, and None with workers means PyTorch's default (2): normalised so
    # that configurations building the same DataLoader compare equal
    prefetch_factor: int | None = opt(
        None, kind=WHOLE, low=1, help="Batches each worker loads ahead (PyTorch's default "
        f"{DEFAULT_PREFETCH} when omitted). Needs workers.",
    )  # fmt: skip
    persistent_workers: bool = opt(
        False, kind=FLAG, flags=("--persistent-workers/--no-persistent-workers",),
        help="Keep workers alive between epochs. Needs workers.",
    )  # fmt: skip
    # How workers start (DataLoader's multiprocessing_context); None when 0 workers, and None
    # with workers means DEFAULT_START_METHOD (normalised like prefetch_factor).
    start_method: str | None = opt(
        None, choices=START_METHODS, help="How workers start (DataLoader's "
        f"multiprocessing_context; default {DEFAULT_START_METHOD}). Needs workers.",
    )  # fmt: skip
    # Where the images come from, when the study searches it (--search-cache); None = the
    # workload's own cache (WorkloadSpec.cache). Not a DataLoader argument: the answer names
    # it beside the pasted line.
    cache: str | None = opt(None, choices=CACHES, noun="cache", flags=())

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, bool) or int(self.num_workers) != self.num_workers:
            raise ValueError(f"num_workers must be an integer but got {self.num_workers!r}.")
        if self.prefetch_factor is not None and self.prefetch_factor < 1:
            raise ValueError(
                f"prefetch_factor must be at least 1 (or None) but got {self.prefetch_factor}."
            )
        if self.start_method is not None:
            check_start_method(self.start_method)
        check_fields(self)  # cache, num_workers, batch_size
        if self.num_workers == 0 and self.prefetch_factor is not None:
            # PyTorch itself raises here; we reject it the same way, with the fix in the message.
            raise ValueError(
                f"prefetch_factor={self.prefetch_factor} needs num_workers > 0: with "
                "num_workers=0 there is no worker to prefetch. Drop prefetch_factor or add "
                "workers."
            )
        if self.num_workers == 0 and self.persistent_workers:
            raise ValueError(
                "persistent_workers=True needs num_workers > 0: with num_workers=0 there is no "
                "worker to keep. Drop persistent_workers or add workers."
            )
        if self.num_workers > 0 and self.prefetch_factor is None:
            object.__setattr__(self, "prefetch_factor", DEFAULT_PREFETCH)
        # Without workers there is nothing to start: a fixed start method (--fix
        # start_method=spawn) applies to the configurations with workers only.
        start = (self.start_method or DEFAULT_START_METHOD) if self.num_workers > 0 else None
        object.__setattr__(self, "start_method", start)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.utils.data.DataLoader`` (only the ones that apply)."""
        kwargs: dict[str, Any] = {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
        }
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
            # Always explicit: the measured worker start-up must not depend on the Python's
            # default start method.
            kwargs["multiprocessing_context"] = self.start_method
        return kwargs


    def label(self) -> str:
        """A short human label, e.g. ``w4 b32 pin pf2 persist``."""
        parts = [f"w{self.num_workers}", f"b{self.batch_size}"]
        if self.pin_memory:
            parts.append("pin")
        if self.num_workers > 0:
            parts.append(f"pf{self.prefetch_factor}")
            if self.persistent_workers:
                parts.append("persist")
            if self.start_method != DEFAULT_START_METHOD:
                parts.append(str(self.start_method))
        if self.cache not in (None, "none"):
            parts.append(str(self.cache))
        return " ".join(parts)

    def snippet(self, dataset: str = "dataset", sampler: str | None = None) -> str:
        """A ready-to-paste ``DataLoader(...)`` call. ``multiprocessing_context`` is written
        only when the measured start method is not what this Python uses by default, so that
        the pasted line starts its workers the way they were measured. ``sampler`` (e.g.
        ``"sampler"``, a ``DistributedSampler``) takes the place of ``shuffle=True``, which
        PyTorch refuses beside a sampler."""
        kwargs = self.dataloader_kwargs()
        if kwargs.get("multiprocessing_context") == PLATFORM_START_METHOD:
            del kwargs["multiprocessing_context"]
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        order = f"sampler={sampler}" if sampler else "shuffle=True"
        return f"DataLoader({dataset}, {order}, drop_last=True, {args})"
