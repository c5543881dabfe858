"""The machine a measurement runs on: a fingerprint of what matters for loader throughput.

A study is tied to one hardware class; :func:`fingerprint` describes this host and
:func:`differences` says what separates two of them.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

# Keys whose difference changes throughput enough to refuse mixing machines in one study.
THROUGHPUT_KEYS = ("gpu_model", "gpu_count", "cpu_count")


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _physical_cores() -> int:
    try:
        with open("/proc/cpuinfo") as f:
            pairs = set()
            phys = core = None
            for line in f:
                if line.startswith("physical id"):
                    phys = line.split(":", 1)[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":", 1)[1].strip()
                    pairs.add((phys, core))
            if pairs:
                return len(pairs)
    except OSError:
        pass
    return os.cpu_count() or 1


def _gpus() -> list[dict[str, Any]]:
    """GPUs through NVML; an empty list when there is no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return []
    try:
        gpus = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            gpus.append(
                {
                    "name": name.decode() if isinstance(name, bytes) else name,
                    "memory_bytes": int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
                }
            )
        return gpus
    finally:
        pynvml.nvmlShutdown()


def _shm_bytes() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
        return st.f_blocks * st.f_frsize
    except OSError:
        return None


def fingerprint() -> dict[str, Any]:
    """This host's hardware class (JSON-serialisable). Cheap: no torch import."""
    gpus = _gpus()
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = None
    return {
        "host": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count() or 1,
        "physical_cores": _physical_cores(),
        "ram_bytes": ram,
        "shm_bytes": _shm_bytes(),
        "gpu_model": gpus[0]["name"] if gpus else None,
        "gpu_memory_bytes": gpus[0]["memory_bytes"] if gpus else None,
        "gpu_count": len(gpus),
        "python": platform.python_version(),
    }


def differences(a: dict[str, Any], b: dict[str, Any], keys=THROUGHPUT_KEYS) -> list[str]:
    """Human-readable differences between two fingerprints in ``keys``."""
    return [f"{k}: {a.get(k)!r} vs {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]
