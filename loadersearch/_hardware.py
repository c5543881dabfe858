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

from loadersearch._cpu_budget import _cpu_limits, _physical_cores, memory_limit
from loadersearch.errors import StudyError

_logger = logging.getLogger(__name__)

# Keys whose difference changes throughput enough to refuse mixing machines in one study.
THROUGHPUT_KEYS = ("gpu_model", "gpu_count", "cpu_count", "usable_cpus")
# Keys worth showing when they differ, but which do not refuse a machine.
INFORMATIONAL_KEYS = (
    "cpu_model",
    "physical_cores",
    "ram_bytes",
    "memory_limit_bytes",
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


VISIBLE_ENV = "CUDA_VISIBLE_DEVICES"


def parse_visible_devices(value: str | None) -> list[int] | list[str] | None:
    """The devices ``CUDA_VISIBLE_DEVICES`` lets CUDA see, read as the CUDA runtime reads it
    (and as ``torch.cuda._parse_visible_devices`` mirrors it): None when unset (every device);
    a list of ordinals (``"1,0"``; each element read like ``strtoul``, so ``"1gpu"`` is 1; a
    negative or unreadable one ends the list; a repeated one empties it); or a list of UUID
    prefixes (``"GPU-8f..."``, ``"MIG-..."``; an element without the prefix ends the list).
    ``""`` hides every device."""
    if value is None:
        return None
    if value.startswith(("GPU-", "MIG-")):
        prefix = value[:4]
        uuids: list[str] = []
        for elem in value.split(","):
            if elem in uuids:
                return []
            if not elem.startswith(prefix):
                break
            uuids.append(elem)
        return uuids
    ordinals: list[int] = []
    for elem in value.split(","):
        m = re.match(r"[+-]?\d+", elem.strip())
        x = int(m.group(0)) if m else -1
        if x in ordinals:
            return []
        if x < 0:
            break
        ordinals.append(x)
    return ordinals


@dataclass(frozen=True)
class Gpu:
    """One device CUDA can be given: a whole GPU or a MIG slice of one."""

    index: int  # NVML index of the GPU (of the parent GPU for a MIG slice)
    uuid: str  # "GPU-..." or "MIG-..."
    name: str
    memory_bytes: int
    mig: bool = False


def select_visible(gpus: list[Gpu], visible: list[int] | list[str] | None) -> list[Gpu]:
    """The devices of ``gpus`` (every GPU, each followed by its MIG slices when it is in MIG
    mode) that CUDA sees under ``visible`` (:func:`parse_visible_devices`).

    Ordinals count whole GPUs in NVML's (PCI bus) order, as CUDA does with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; unset means every GPU. A GPU in MIG mode runs CUDA work
    only on a slice, and CUDA enumerates one slice of it: its first. UUIDs may be prefixes, as
    CUDA accepts; an ambiguous or unknown one ends the list, a repeated one empties it."""
    slices: dict[int, list[Gpu]] = {}
    for g in gpus:
        if g.mig:
            slices.setdefault(g.index, []).append(g)
    whole = [g for g in gpus if not g.mig]

    def as_seen(g: Gpu) -> Gpu:
        return slices[g.index][0] if g.index in slices else g

    if visible is None:
        return [as_seen(g) for g in whole]
    chosen: list[Gpu] = []
    for item in visible:
        if isinstance(item, int):
            found = [as_seen(g) for g in whole if g.index == item]
        else:
            found = [g for g in gpus if g.uuid.startswith(item)]
        if len(found) != 1:
            break
        if found[0] in chosen:
            return []
        chosen.append(found[0])
    return chosen


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _nvml_gpus(pynvml: Any) -> list[Gpu]:
    """Every GPU NVML lists, each followed by its MIG slices when it is in MIG mode."""
    gpus: list[Gpu] = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        h = pynvml.nvmlDeviceGetHandleByIndex(i)
        gpus.append(
            Gpu(
                index=i,
                uuid=_text(pynvml.nvmlDeviceGetUUID(h)),
                name=_text(pynvml.nvmlDeviceGetName(h)),
                memory_bytes=int(pynvml.nvmlDeviceGetMemoryInfo(h).total),
            )
        )
        try:
            current, _ = pynvml.nvmlDeviceGetMigMode(h)
        except pynvml.NVMLError:  # not a MIG-capable GPU
            continue
        if current != pynvml.NVML_DEVICE_MIG_ENABLE:
            continue
        for k in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(h)):
            try:
                m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(h, k)
            except pynvml.NVMLError:  # an empty slot
                continue
            name = _text(pynvml.nvmlDeviceGetName(m))
            memory = int(pynvml.nvmlDeviceGetMemoryInfo(m).total)
            if "MIG" not in name:  # name the slice as such, with its size
                name = f"{name} MIG {memory / 2**30:.0f}gb slice"
            gpus.append(Gpu(i, _text(pynvml.nvmlDeviceGetUUID(m)), name, memory, mig=True))
    return gpus


def _gpus() -> tuple[list[Gpu], str | None]:
    """The devices this process's CUDA can see (``CUDA_VISIBLE_DEVICES`` honoured, MIG slices
    named as such) and the driver version; nothing when there is no NVIDIA driver."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:
        return [], None
    driver = None
    try:
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            driver = None
        visible = parse_visible_devices(os.environ.get(VISIBLE_ENV))
        return select_visible(_nvml_gpus(pynvml), visible), driver
    except Exception:
        _logger.debug("cannot list the GPUs through NVML", exc_info=True)
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
    # What this process may use of them (CpuBudget: affinity and cgroup quota); None: a
    # fingerprint from before budgets, which counts every CPU.
    usable_cpus: int | None = None
    usable_cores: int | None = None
    cpu_limit: str | None = None  # what limits usable_cpus, in words (None: nothing)
    ram_bytes: int | None = None
    # this process's cgroup memory limit where it has one (a container's --memory), which
    # the RAM's size (the host's) does not show
    memory_limit_bytes: int | None = None
    shm_bytes: int | None = None  # size of /dev/shm (64 MiB in a default Docker container)
    # The devices CUDA_VISIBLE_DEVICES lets this process see (a MIG slice is named as such, e.g.
    # "NVIDIA A100-SXM4-40GB MIG 1g.5gb"): the first one's name and memory, and how many.
    gpu_model: str | None = None  # None without an NVIDIA driver (or with none visible)
    gpu_memory_bytes: int | None = None
    gpu_count: int = 0
    nvidia_driver: str | None = None
    torch: str | None = None  # torch version
    torch_cuda: str | None = None  # the CUDA version torch was built with
    python: str | None = None

    @property
    def memory_bytes(self) -> int | None:
        """The RAM this process may use: the RAM, or the cgroup's limit where that is lower."""
        sizes = [b for b in (self.ram_bytes, self.memory_limit_bytes) if b]
        return min(sizes, default=None)

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
    usable, cores, limit, _ = _cpu_limits()
    return Hardware(
        host=host_name(),
        cpu_model=_cpu_model(),
        cpu_count=os.cpu_count() or 1,
        physical_cores=_physical_cores(),
        usable_cpus=usable,
        usable_cores=cores,
        cpu_limit=limit,
        ram_bytes=ram,
        memory_limit_bytes=memory_limit(),
        shm_bytes=_shm_bytes(),
        gpu_model=gpus[0].name if gpus else None,
        gpu_memory_bytes=gpus[0].memory_bytes if gpus else None,
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
    count, CPU count, the CPUs this process may use: :class:`CpuBudget`), then informational
    ones (RAM, /dev/shm, versions, ...) marked ``(informational)``. Raises
    :class:`StudyError` listing the throughput differences when there are any and
    ``allow_mixed`` is False. A study without a stored fingerprint matches any host.
    """
    if not stored:
        return []
    now = current.to_dict()
    # usable_cpus None (a fingerprint built by hand) counts every CPU; a fingerprint from
    # before CPU budgets lacks the key, which is no difference (below).
    if "usable_cpus" in stored:
        stored = {**stored, "usable_cpus": stored["usable_cpus"] or stored.get("cpu_count")}
    now["usable_cpus"] = now.get("usable_cpus") or now.get("cpu_count")

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
