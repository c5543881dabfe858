"""The measurement fork server, with an emulated storage latency in the dataset.

Every sample read waits ``$LS_BENCH_IO_MS`` milliseconds (a sleep: no CPU), as on network
storage or a hard disk, so that many DataLoader workers pay off even on 2 cores. It stands in
for ``WorkloadSpec.emulated_io_ms`` until the package has it (issue 9), without adding anything
to the package: this server wraps ``open_dataset`` and then runs the package's own fork server.
Started by ``serving(command=[python, this file])``; the environment of each measurement
reaches the child, so the latency is read there.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

IO_MS_ENV = "LS_BENCH_IO_MS"


class SlowStorage:
    """``dataset`` with ``seconds`` of waiting before every sample (DataLoader interface)."""

    def __init__(self, dataset: Any, seconds: float) -> None:
        self.dataset = dataset
        self.seconds = seconds

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        time.sleep(self.seconds)
        return self.dataset[index]

    def __getattr__(self, name: str) -> Any:  # num_classes, set_epoch, ...
        return getattr(self.__dict__["dataset"], name)


def _install() -> None:
    import loadersearch.workload._datasets as datasets

    real = datasets.open_dataset

    def open_dataset(*args: Any, **kwargs: Any) -> Any:
        dataset = real(*args, **kwargs)
        ms = float(os.environ.get(IO_MS_ENV) or 0.0)
        return SlowStorage(dataset, ms / 1000.0) if ms > 0 else dataset

    datasets.open_dataset = open_dataset


if __name__ == "__main__":
    _install()
    from loadersearch.measure import main

    sys.exit(main())
