"""The machine a measurement runs on: a fingerprint of what matters for loader throughput.

A study is tied to one hardware class; :func:`fingerprint` describes this host,
:func:`check_compatible` says what separates a study's stored fingerprint from this host and
refuses a machine of another class joining the study.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import importlib.util
import logging
import os
import platform
import re
import socket
from dataclasses import dataclass
from typing import Any

from loadersearch.errors import StudyError

_logger = logging.getLogger(__name__)

# Keys whose difference changes throughput enough to refuse mixing machines in one study.
THROUGHPUT_KEYS = ("gpu_model", "gpu_count", "cpu_count")
# Keys worth showing when they differ, but which do not refuse a machine.
INFORMATIONAL_KEYS = (
    "cpu_model",
    "physical_cores",
    "ram_bytes",
    "shm_bytes",
    "gpu_memory_bytes",
    "nvidia_driver",
    "torch",
    "torch_cuda",
    "python",
)
# Overrides the host name in fingerprints, trial records and the host lock (tests, containers
# that all report the same hostname).
HOST_ENV = "LOADERSEARCH_HOST"
ALLOW_MIXED_OPTION = "--allow-mixed-hardware"


def host_name() -> str:
    """This machine's name as loadersearch records it: ``$LOADERSEARCH_HOST`` or the hostname."""
    return os.environ.get(HOST_ENV) or socket.gethostname()


def _torch_versions() -> tuple[str | None, str | None]:
    """(torch version, CUDA version torch was built with), read without importing torch."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None, None
    cuda = None
    try:
        spec = importlib.util.find_spec("torch")
        for location in (spec.submodule_search_locations or []) if spec else []:
            with open(os.path.join(location, "version.py")) as f:
                match = re.search(r"^cuda\b[^=]*=\s*['\"]([^'\"]+)['\"]", f.read(), re.M)
            cuda = match.group(1) if match else None
            break
    except (OSError, ValueError, ImportError):
        match = re.search(r"\+cu(\d+)(\d)$", version)  # e.g. 2.4.0+cu124 -> 12.4
        cuda = f"{match.group(1)}.{match.group(2)}" if match else None
    return version, cuda


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


def _gpus() -> tuple[list[dict[str, Any]], str | None]:
    """GPUs through NVML and the driver version; nothing when there is no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return [], None
    try:
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            driver = driver.decode() if isinstance(driver, bytes) else str(driver)
        except Exception:
            driver = None
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
        return gpus, driver
    except Exception:
        return [], driver
    finally:
        pynvml.nvmlShutdown()


def _shm_bytes() -> int | None:
    try:
        st = os.statvfs("/dev/shm")
        return st.f_blocks * st.f_frsize
    except OSError:
        return None


@dataclass(frozen=True)
class Hardware:
    """A host's hardware class: what loader throughput depends on, plus versions worth showing.

    Stored in a study (user attribute ``hardware``) as :meth:`to_dict`; :meth:`from_dict`
    reads the stored form, tolerating keys an older or newer loadersearch wrote.
    """

    host: str = "unknown"  # host name (or $LOADERSEARCH_HOST)
    cpu_model: str = "unknown"
    cpu_count: int = 1  # logical CPUs
    physical_cores: int = 1
    ram_bytes: int | None = None
    shm_bytes: int | None = None  # size of /dev/shm (64 MiB in a default Docker container)
    gpu_model: str | None = None  # the first GPU's name; None without an NVIDIA driver
    gpu_memory_bytes: int | None = None
    gpu_count: int = 0
    nvidia_driver: str | None = None
    torch: str | None = None  # torch version
    torch_cuda: str | None = None  # the CUDA version torch was built with
    python: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | Hardware | None) -> Hardware:
        if isinstance(data, Hardware):
            return data
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in (data or {}).items() if k in known and v is not None})


def fingerprint() -> Hardware:
    """This host's hardware class. Cheap: no torch import."""
    gpus, driver = _gpus()
    torch_version, torch_cuda = _torch_versions()
    try:
        ram = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        ram = None
    return Hardware(
        host=host_name(),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count() or 1,
        physical_cores=_physical_cores(),
        ram_bytes=ram,
        shm_bytes=_shm_bytes(),
        gpu_model=gpus[0]["name"] if gpus else None,
        gpu_memory_bytes=gpus[0]["memory_bytes"] if gpus else None,
        gpu_count=len(gpus),
        nvidia_driver=driver,
        torch=torch_version,
        torch_cuda=torch_cuda,
        python=platform.python_version(),
    )


def _describe(key: str, value: Any) -> str:
    if isinstance(value, int) and key.endswith("_bytes"):
        return f"{value / 2**30:.1f} GiB"
    return "none" if value is None else str(value)


def check_compatible(
    stored: dict[str, Any] | None, current: Hardware, *, allow_mixed: bool
) -> list[str]:
    """Compare the fingerprint a study stored (its creator's) with this host's.

    Returns the differences, one line each, throughput-relevant ones first (GPU model and
    count, CPU count), then informational ones (RAM, /dev/shm, versions, ...) marked
    ``(informational)``. Raises :class:`StudyError` listing the throughput differences when
    there are any and ``allow_mixed`` is False. A study without a stored fingerprint matches
    any host.
    """
    if not stored:
        return []
    now = current.to_dict()

    def line(key: str) -> str:
        return (
            f"{key}: study {_describe(key, stored.get(key))}, "
            f"this host {_describe(key, now.get(key))}"
        )

    # A key the stored fingerprint lacks (older loadersearch) is not a difference.
    def differs(key: str) -> bool:
        return key in stored and stored.get(key) != now.get(key)

    relevant = [line(k) for k in THROUGHPUT_KEYS if differs(k)]
    informational = [f"{line(k)} (informational)" for k in INFORMATIONAL_KEYS if differs(k)]
    host = current.host
    if relevant and not allow_mixed:
        raise StudyError(
            f"{host}'s hardware differs from the machine that created the study "
            f"({stored.get('host', 'unknown')}) in what matters for loader throughput: "
            + "; ".join(relevant)
            + ". Measurements from different hardware classes are not comparable: use a "
            f"separate study for this machine, or pass {ALLOW_MIXED_OPTION} to join anyway "
            "(each trial records its host and the differences)."
        )
    if relevant:
        _logger.warning(
            "Joining a study created on different hardware (%s): %s",
            ALLOW_MIXED_OPTION,
            "; ".join(relevant),
        )
    if informational:
        _logger.info("Hardware differences that do not refuse: %s", "; ".join(informational))
    return relevant + informational
