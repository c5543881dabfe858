"""Probes of the measuring child: host memory, /dev/shm, CPU and (through NVML) the GPU.

A background thread samples every ``interval`` seconds: the RSS summed over the child and all
its DataLoader workers (copy-on-read growth shows here; shared pages count once per process, so
this is an upper bound), /dev/shm use, and with NVML the GPU utilisation and this process's
device memory (the CUDA context included; its peak is that of the measured epochs). The device
is found in NVML by its UUID, so CUDA_VISIBLE_DEVICES renumbering and MIG slices watch the GPU
(or slice) this process uses. The CPU utilisation of the process tree during the
measured epochs is exact rather than sampled: CPU time of the child, of its reaped workers
(``RUSAGE_CHILDREN``) and of its live workers, at the start and the end of the measured epochs.

Without an NVIDIA driver, NVML is reported as absent ("absent: no NVIDIA driver"), not an error.
"""

from __future__ import annotations

import logging
import resource
import threading
import time
from typing import Any

import psutil

from loadersearch.measure._shm import shm_used_bytes

logger = logging.getLogger(__name__)


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def tree_rss_bytes(proc: psutil.Process) -> int:
    """RSS of ``proc`` and all its descendants, summed."""
    total = 0
    for p in _tree(proc):
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def tree_cpu_seconds(proc: psutil.Process) -> float:
    """CPU seconds of this process, its reaped children and its live descendants (with the
    children *they* reaped: a rank's finished DataLoader workers, under several ranks).

    Only valid for ``proc`` = this process (``getrusage`` is about the caller).
    """
    own = resource.getrusage(resource.RUSAGE_SELF)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime
    for p in _tree(proc)[1:]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
            total += getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        except psutil.Error:
            pass
    return total


def nvml_uuids(torch_uuid: str) -> list[str]:
    """NVML's spellings of the device whose torch UUID is ``torch_uuid``.

    torch prints ``cudaDeviceProp.uuid`` as bare 8-4-4-4-12 hex digits; NVML names the same
    device ``GPU-<uuid>``, or ``MIG-<uuid>`` when it is a MIG slice (the UUID does not say
    which, so both are tried, the whole GPU first). A UUID that already has a prefix is kept."""
    uuid = torch_uuid.strip()
    if uuid.startswith(("GPU-", "MIG-")):
        return [uuid]
    return [f"GPU-{uuid}", f"MIG-{uuid}"]


def handle_by_uuid(pynvml: Any, torch_uuid: str) -> Any:
    """The NVML handle of the device torch names ``torch_uuid`` (``pynvml`` is the module).
    Raises ``pynvml.NVMLError_NotFound`` when NVML knows no device by that UUID."""
    for candidate in nvml_uuids(torch_uuid):
        try:
            return pynvml.nvmlDeviceGetHandleByUUID(candidate)
        except pynvml.NVMLError_NotFound:
            continue
    raise pynvml.NVMLError_NotFound()


class _Nvml:
    """NVML handle for the device this process uses; ``status`` says why when absent."""

    def __init__(self, cuda_index: int | None) -> None:
        self.handle = None
        self.status = "absent: no CUDA device in use"
        import pynvml

        self.pynvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound:
            self.status = "absent: no NVIDIA driver"
            return
        except pynvml.NVMLError as e:
            self.status = f"absent: {e}"
            return
        if cuda_index is None:
            self.status = "ok (no CUDA device in use)"
            return
        try:
            self.handle = self._handle(cuda_index)
            self.status = "ok"
        except pynvml.NVMLError as e:
            self.status = f"absent: cannot find the CUDA device in NVML ({e})"

    def _handle(self, cuda_index: int) -> Any:
        """The NVML handle of the device torch calls ``cuda_index``, found by its UUID: NVML
        indexes every GPU of the machine, torch only the visible ones (CUDA_VISIBLE_DEVICES
        renumbers them), and a MIG slice is a device of its own that a PCI bus id cannot name
        (it would watch the whole GPU)."""
        import torch

        return handle_by_uuid(self.pynvml, str(torch.cuda.get_device_properties(cuda_index).uuid))

    def sample(self, pid: int) -> tuple[float | None, int | None]:
        """(GPU utilisation %, this process's device memory in bytes)."""
        if self.handle is None:
            return None, None
        pynvml = self.pynvml
        util = used = None
        try:
            util = float(pynvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except pynvml.NVMLError:
            pass
        try:
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(self.handle):
                mem = proc.usedGpuMemory
                if proc.pid == pid and mem is not None and mem < 2**60:  # else "not available"
                    used = int(mem)
        except pynvml.NVMLError:
            pass
        return util, used


class Probes:
    """Samples memory, /dev/shm and NVML in a background thread; CPU time at the edges."""

    def __init__(self, cuda_index: int | None = None, interval: float = 0.25) -> None:
        self.interval = interval
        self.proc = psutil.Process()
        self.nvml = _Nvml(cuda_index)
        self.shm_base = shm_used_bytes()
        self.peak_rss = 0
        self.shm_peak: int | None = None
        self.nvml_peak: int | None = None
        self.gpu_util: list[float] = []
        self.measuring = False
        self._cpu0 = self._t0 = 0.0
        self.cpu_util: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="loadersearch-probes", daemon=True)

    def start(self) -> Probes:
        self._thread.start()
        return self

    def begin_measured(self) -> None:
        self._cpu0, self._t0 = tree_cpu_seconds(self.proc), time.perf_counter()
        self.nvml_peak = None  # the peak of the measured epochs, like the allocator's
        self.measuring = True

    def end_measured(self) -> None:
        self._sample()  # the measured epochs' last figures, whatever the sampling phase
        self.measuring = False
        wall = time.perf_counter() - self._t0
        if wall > 0:
            self.cpu_util = 100.0 * (tree_cpu_seconds(self.proc) - self._cpu0) / wall

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)
        self._sample()

    def process_used(self) -> int | None:
        """NVML's device memory of this process now (CUDA context included), or None."""
        return self.nvml.sample(self.proc.pid)[1]

    def _sample(self) -> None:
        self.peak_rss = max(self.peak_rss, tree_rss_bytes(self.proc))
        shm = shm_used_bytes()
        if shm is not None and self.shm_base is not None:
            self.shm_peak = max(self.shm_peak or 0, shm - self.shm_base, 0)
        util, used = self.nvml.sample(self.proc.pid)
        if used is not None and self.measuring:
            self.nvml_peak = max(self.nvml_peak or 0, used)
        if util is not None and self.measuring:
            self.gpu_util.append(util)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._sample()
            except Exception:  # a probe must never end the measurement
                logger.debug("probe sample failed", exc_info=True)

    def summary(self) -> dict[str, Any]:
        return {
            "peak_rss_bytes": self.peak_rss or None,
            "shm_peak_bytes": self.shm_peak,
            "nvml_peak_bytes": self.nvml_peak,
            "gpu_util_mean": sum(self.gpu_util) / len(self.gpu_util) if self.gpu_util else None,
            "cpu_util_mean": self.cpu_util,
            "nvml": self.nvml.status,
        }
