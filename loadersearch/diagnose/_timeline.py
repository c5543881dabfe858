"""What the source article watched by hand, sampled while a measurement runs: a timeline.

``nvidia-smi`` (GPU utilisation jumping between 0 and 100%), ``top -H`` (per-core load) and
``iostat`` (disk reads), sampled by a thread of this (the parent) process every ``interval``
seconds while :func:`loadersearch.measure.measure` runs, plus the trainer's data-wait per step,
which the measuring child reports with its result. Everything is kept for the measured epochs
only (the warm-up and the process start are cut off), on one clock: ``time.monotonic()``,
which the child's step times use too (one system-wide clock on Linux).

The machine-wide figures (CPU per core, disk) include whatever else runs on the machine; the
diagnosis says so rather than hiding it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import psutil

logger = logging.getLogger(__name__)


@dataclass
class Timeline:
    """One measurement's timeline; times in seconds from the start of the measured epochs."""

    t: list[float] = field(default_factory=list)  # sample times
    cpu: list[list[float]] = field(default_factory=list)  # per sample: % busy of each core
    disk_read_mb_s: list[float] = field(default_factory=list)  # machine-wide reads, MB/s
    gpu_util: list[float | None] = field(default_factory=list)  # NVML %, None without NVML
    gpu_mem_mib: list[float | None] = field(default_factory=list)  # NVML device memory used
    step_t: list[float] = field(default_factory=list)  # when each step got its batch
    step_wait_s: list[float] = field(default_factory=list)  # how long it waited for it
    epoch_t: list[float] = field(default_factory=list)  # each measured epoch's iter(loader)
    nvml: str = "absent"  # "ok", or why there is no GPU line

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timeline:
        return cls(**data)

    @property
    def duration(self) -> float:
        ends = [*self.t[-1:], *self.step_t[-1:]]
        return max(ends) if ends else 0.0

    def mean_cpu(self) -> float | None:
        """Mean busy % over all cores and samples."""
        values = [v for row in self.cpu for v in row]
        return sum(values) / len(values) if values else None

    def mean_gpu_util(self) -> float | None:
        values = [v for v in self.gpu_util if v is not None]
        return sum(values) / len(values) if values else None


def _nvml_handle() -> tuple[Any, Any, str]:
    """``(pynvml, handle, status)`` for the GPU the measurement uses: the first one
    ``CUDA_VISIBLE_DEVICES`` names (an index or a UUID), else GPU 0."""
    import pynvml

    try:
        pynvml.nvmlInit()
        if pynvml.nvmlDeviceGetCount() == 0:
            return None, None, "absent: no GPU"
        first = os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0].strip() or "0"
        if first.isdigit():
            handle = pynvml.nvmlDeviceGetHandleByIndex(int(first))
        else:
            handle = pynvml.nvmlDeviceGetHandleByUUID(first)
        return pynvml, handle, "ok"
    except pynvml.NVMLError as e:  # no driver, a hidden GPU
        return None, None, f"absent: {e}"


class Sampler:
    """Samples the machine in a thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, interval: float = 0.1, gpu: bool = True) -> None:
        if interval <= 0:
            raise ValueError(f"interval must be positive but got {interval}.")
        self.interval = interval
        self.samples: list[tuple[float, list[float], float, float | None, float | None]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.pynvml, self.handle, self.nvml = _nvml_handle() if gpu else (None, None, "absent")

    def _gpu(self) -> tuple[float | None, float | None]:
        if self.handle is None:
            return None, None
        try:
            util = float(self.pynvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
            mem = self.pynvml.nvmlDeviceGetMemoryInfo(self.handle).used / 2**20
            return util, mem
        except self.pynvml.NVMLError:
            return None, None

    def _run(self) -> None:
        psutil.cpu_percent(percpu=True)  # the first call only sets the reference
        last_t = time.monotonic()
        last_read = _read_bytes()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            cpu = psutil.cpu_percent(percpu=True)
            read = _read_bytes()
            dt = max(now - last_t, 1e-6)
            disk = (read - last_read) / dt / 1e6 if read is not None and last_read else 0.0
            util, mem = self._gpu()
            self.samples.append((now, cpu, max(0.0, disk), util, mem))
            last_t, last_read = now, read

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="timeline", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def timeline(self, steps: list[dict[str, Any]] | None, end: float | None = None) -> Timeline:
        """The samples of the measured epochs, with the child's per-step waits (``steps``: the
        result's per-epoch ``t0``, ``arrivals``, ``waits``). Without ``steps`` (a failed
        measurement) every sample is kept, from the first."""
        start = steps[0]["t0"] if steps else (self.samples[0][0] if self.samples else 0.0)
        if end is None and steps:
            end = steps[-1]["t0"] + (steps[-1]["arrivals"] or [0.0])[-1]
        tl = Timeline(nvml=self.nvml)
        for now, cpu, disk, util, mem in self.samples:
            if now < start or (end is not None and now > end + self.interval):
                continue
            tl.t.append(now - start)
            tl.cpu.append(cpu)
            tl.disk_read_mb_s.append(disk)
            tl.gpu_util.append(util)
            tl.gpu_mem_mib.append(mem)
        for epoch in steps or []:
            tl.epoch_t.append(epoch["t0"] - start)
            for arrival, wait in zip(epoch["arrivals"], epoch["waits"], strict=False):
                tl.step_t.append(epoch["t0"] - start + arrival)
                tl.step_wait_s.append(wait)
        return tl


def _read_bytes() -> int | None:
    try:
        counters = psutil.disk_io_counters(perdisk=False)
    except (OSError, RuntimeError):
        return None
    return counters.read_bytes if counters is not None else None
