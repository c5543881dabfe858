"""The emulated accelerator: a stand-in for a GPU that consumes batches without using the CPU;
and emulated storage: a dataset whose every sample read first waits, as on slow storage.

Each batch of ``B`` images takes ``a + b*B`` milliseconds of wall time, spent *sleeping* (so the
host CPU stays free for the data pipeline, as with a real accelerator), and the step "allocates"
``m0 + m1*B`` MiB of device memory, checked against the VRAM cap at the first step as a real
out-of-memory error would be. Its results are labelled as emulated everywhere they appear.
"""

from __future__ import annotations

import math
import random
import time
from typing import Any

MIB = 1024 * 1024


class VramCapExceeded(Exception):
    """A step needs more device memory than the cap allows (real CUDA OOM or emulated)."""

    def __init__(self, batch_size: int, needs_bytes: int | None, cap_bytes: int | None) -> None:
        self.batch_size = batch_size
        self.needs_bytes = needs_bytes
        self.cap_bytes = cap_bytes
        msg = f"over the VRAM cap at batch {batch_size}"
        if needs_bytes is not None and cap_bytes is not None:
            msg += f": needs {needs_bytes / MIB:,.0f} MiB, cap {cap_bytes / MIB:,.0f} MiB"
        elif cap_bytes is not None:
            msg += f": CUDA out of memory under a cap of {cap_bytes / MIB:,.0f} MiB"
        else:
            msg += ": CUDA out of memory (no cap set: the device itself is full)"
        super().__init__(msg)

    def __reduce__(self):
        return (type(self), (self.batch_size, self.needs_bytes, self.cap_bytes))


def describe(ms: tuple[float, float], mib: tuple[float, float]) -> str:
    """The label of an emulated device, e.g. ``emulated (20 ms + 2 ms/img, 600 + 150 MiB/img)``."""
    return f"emulated ({ms[0]:g} ms + {ms[1]:g} ms/img, {mib[0]:g} MiB + {mib[1]:g} MiB/img)"


class EmulatedAccelerator:
    """Consumes a batch in ``a + b*B`` ms of sleep; "allocates" ``m0 + m1*B`` MiB."""

    def __init__(
        self, ms: tuple[float, float], mib: tuple[float, float], cap_bytes: int | None
    ) -> None:
        self.ms = ms
        self.mib = mib
        self.cap_bytes = cap_bytes
        self.peak_bytes = 0

    def memory_bytes(self, batch_size: int) -> int:
        return int((self.mib[0] + self.mib[1] * batch_size) * MIB)

    def step(self, batch_size: int) -> None:
        need = self.memory_bytes(batch_size)
        if need > self.peak_bytes:
            if self.cap_bytes is not None and need > self.cap_bytes:
                raise VramCapExceeded(batch_size, need, self.cap_bytes)
            self.peak_bytes = need
        time.sleep((self.ms[0] + self.ms[1] * batch_size) / 1000.0)


class EmulatedStorage:
    """``dataset`` behind slow storage: every ``__getitem__`` first sleeps ``ms`` milliseconds.

    The wait is a sleep (no CPU), paid once per sample fetched, in whichever process fetches it
    (the training process at 0 workers, else a DataLoader worker): as a read from network
    storage or a hard disk, whose latency several workers overlap. Everything else (``len``,
    ``num_classes``, ``set_epoch``, ...) is the wrapped dataset's. Picklable, so workers
    started by spawn or forkserver get it too.
    """

    def __init__(self, dataset: Any, ms: float, cv: float = 0.0) -> None:
        self.dataset = dataset
        self.ms = float(ms)
        self.cv = float(cv)

    def wait_ms(self, index: int) -> float:
        """The wait of sample ``index``: ``ms``, or with a spread ``cv`` a lognormal draw of
        mean ``ms`` made once per index (seeded by it: the same in every process, trial and
        epoch, as a file's seek depends on where it lies on the disk)."""
        if not self.cv:
            return self.ms
        sigma = math.sqrt(math.log1p(self.cv**2))
        mu = math.log(self.ms) - sigma**2 / 2 if self.ms > 0 else -math.inf
        z = random.Random(int(index) * 1_000_003 + 17).gauss(0.0, 1.0)
        return math.exp(mu + sigma * z) if self.ms > 0 else 0.0

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.wait_ms(index) / 1000.0)
        return self.dataset[index]

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found here. Unpickling looks up __setstate__ before
        # __dict__ is filled: never recurse then.
        dataset = self.__dict__.get("dataset")
        if dataset is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(dataset, name)

    def __repr__(self) -> str:
        spread = f", CV {self.cv:g}" if self.cv else ""
        return f"EmulatedStorage({self.dataset!r}, {self.ms:g} ms/sample{spread})"
