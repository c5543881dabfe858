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
import math
import os
import platform
import re
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from loadersearch.errors import StudyError

_logger = logging.getLogger(__name__)

# Keys whose difference changes throughput enough to refuse mixing machines in one study.
THROUGHPUT_KEYS = ("gpu_model", "gpu_count", "cpu_count", "usable_cpus")
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


def _physical_cores(allowed: set[int] | None = None, cpuinfo: str = "/proc/cpuinfo") -> int:
    """Physical cores (distinct physical id, core id pairs) among the logical CPUs
    ``allowed`` (every CPU when None); the logical count when /proc/cpuinfo does not say."""
    try:
        with open(cpuinfo) as f:
            pairs = set()
            processor = phys = None
            for line in f:
                if line.startswith("processor"):
                    processor = int(line.split(":", 1)[1])
                elif line.startswith("physical id"):
                    phys = line.split(":", 1)[1].strip()
                elif line.startswith("core id"):
                    core = line.split(":", 1)[1].strip()
                    if allowed is None or processor in allowed:
                        pairs.add((phys, core))
            if pairs:
                return len(pairs)
    except (OSError, ValueError):
        pass
    return len(allowed) if allowed is not None else os.cpu_count() or 1


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
        shm_bytes=_shm_bytes(),
        gpu_model=gpus[0].name if gpus else None,
        gpu_memory_bytes=gpus[0].memory_bytes if gpus else None,
        gpu_count=len(gpus),
        nvidia_driver=driver,
        torch=torch_version,
        torch_cuda=torch_cuda,
        python=platform.python_version(),
    )


# -- the CPU budget ----------------------------------------------------------------------------

RANKS_ENV = "LOCAL_WORLD_SIZE"  # torchrun: the processes of the job on this node
MAX_WORKERS = 32  # beyond this, start-up and shared memory cost more than any machine gains


@dataclass(frozen=True)
class CpuBudget:
    """The CPUs this process may use and the training processes (ranks) that share them.

    ``cpus`` is the smallest of: the CPUs of this process's affinity
    (``os.sched_getaffinity(0)``: ``taskset``, a cpuset, Slurm's binding) and the cgroup CPU
    quota (cgroup v2 ``cpu.max``, or v1 ``cpu.cfs_quota_us``, on this process's cgroup and
    each cgroup above it) rounded *down* to whole CPUs, at least 1. Down, because a cgroup
    that runs over its quota is throttled for the rest of the period (100 ms by default),
    its training process included: a worker too many stalls every process at once, a half
    CPU left idle costs only that half. ``cores``: the physical cores among those CPUs (at
    most ``cpus``).

    ``ranks``: the training processes on this node that share them (``LOCAL_WORLD_SIZE``
    under torchrun, a study's ``--gpus``; 1 otherwise). Each rank gets ``cpus // ranks``
    CPUs (:attr:`cpus_per_rank`, at least 1) and keeps one of them for its training process:
    :attr:`workers_per_rank` is ``cpus // ranks - 1``, at least 1 (on one CPU per rank the
    worker shares it with the training process). That is Lightning's
    ``suggested_max_num_workers`` arithmetic, applied to the quota as well as the affinity.
    """

    cpus: int
    ranks: int = 1
    cores: int | None = None  # physical cores among the CPUs (None: not known)
    machine_cpus: int | None = None  # os.cpu_count(): every CPU of the machine
    limit: str | None = None  # what limits cpus below machine_cpus, in words (None: nothing)
    ranks_source: str | None = None  # where ranks came from ("LOCAL_WORLD_SIZE", "--gpus")

    def __post_init__(self) -> None:
        if self.cpus < 1 or self.ranks < 1:
            raise ValueError(f"a CPU budget needs cpus and ranks >= 1, got {self}")

    @property
    def cpus_per_rank(self) -> int:
        return max(1, self.cpus // self.ranks)

    @property
    def workers_per_rank(self) -> int:
        """Loader workers per rank that keep one CPU for the rank's training process
        (``cpus // ranks - 1``, at least 1): no oversubscription of CPU-bound workers."""
        return max(1, self.cpus_per_rank - 1)

    @property
    def worker_bound(self) -> int:
        """The top of a ``num_workers`` search range per rank. One rank: 2 x ``cpus`` (at most
        32): deliberately above the CPUs, because a load that waits on storage latency pays
        off with more workers than cores. Several ranks: ``cpus // ranks``, so that every
        rank's workers together stay within the CPUs they share."""
        if self.ranks > 1:
            return min(self.cpus_per_rank, MAX_WORKERS)
        return min(2 * self.cpus, MAX_WORKERS)

    def with_ranks(self, ranks: int, source: str | None = None) -> CpuBudget:
        return dataclasses.replace(self, ranks=max(1, int(ranks)), ranks_source=source)

    def describe(self) -> str:
        """One line, e.g. ``12 CPUs allowed by the cgroup CPU quota (...), 4 ranks
        (LOCAL_WORLD_SIZE): 3 CPUs each, up to 2 workers each, one CPU kept for each training
        process``."""
        head = f"{self.cpus} CPU{_s(self.cpus)}"
        if self.limit:
            head += f" allowed by {self.limit}"
        elif self.machine_cpus:
            head += " (all of this machine's)"
        w = self.workers_per_rank
        if self.ranks > 1:
            source = f" ({self.ranks_source})" if self.ranks_source else ""
            per = self.cpus_per_rank
            tail = f"{self.ranks} ranks{source}: {per} CPU{_s(per)} each, "
            if self.cpus < self.ranks:
                tail = (
                    f"{self.ranks} ranks{source}: fewer CPUs than ranks, 1 worker each, "
                    "sharing the CPUs with the training processes"
                )
            elif per > 1:
                tail += f"up to {w} worker{_s(w)} each, one CPU kept for each training process"
            else:
                tail += "1 worker each, sharing its CPU with the rank's training process"
        elif self.cpus > 1:
            tail = f"1 process: up to {w} worker{_s(w)}, one CPU kept for the training process"
        else:
            tail = "1 process: 1 worker, sharing the CPU with the training process"
        return f"{head}, {tail}"

    def to_dict(self) -> dict[str, Any]:
        """The stored form (a study's ``cpu_budget`` attribute), with the derived figures and
        :meth:`describe`'s line."""
        return {
            **dataclasses.asdict(self),
            "cpus_per_rank": self.cpus_per_rank,
            "workers_per_rank": self.workers_per_rank,
            "worker_bound": self.worker_bound,
            "line": self.describe(),
        }

    @classmethod
    def of(cls, hardware: Hardware, ranks: int = 1, source: str | None = None) -> CpuBudget:
        """The budget a fingerprint recorded, for ``ranks`` processes; a fingerprint from
        before budgets (or one built by hand) counts every CPU of the machine."""
        cpus = hardware.usable_cpus or hardware.cpu_count
        cores = hardware.usable_cores or min(hardware.physical_cores, cpus)
        return cls(
            cpus=max(1, cpus),
            ranks=max(1, int(ranks)),
            cores=cores,
            machine_cpus=hardware.cpu_count,
            limit=hardware.cpu_limit,
            ranks_source=source if ranks > 1 else None,
        )


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def cpu_budget(
    ranks: int | None = None,
    *,
    ranks_source: str | None = None,
    cgroup_root: str | None = None,
    proc: str = "/proc",
    environ: Mapping[str, str] | None = None,
    affinity: Iterable[int] | None = None,
) -> CpuBudget:
    """The CPUs this process may use and the ranks sharing them (:class:`CpuBudget`).

    ``ranks``: the training processes on this node (a study's ``--gpus``, a Trainer's
    devices); None reads ``LOCAL_WORLD_SIZE`` from ``environ`` (torchrun sets it; default
    ``os.environ``), and 1 without it. The rest is injectable for tests: ``cgroup_root`` a
    cgroup v2 tree to read instead of this host's (then only that tree is read; this
    process's path in it comes from ``proc``/self/cgroup when that names one), ``proc`` a
    /proc (self/cgroup, self/mountinfo, cpuinfo), ``affinity`` the allowed CPUs' numbers.
    """
    environ = os.environ if environ is None else environ
    if ranks is None:
        ranks, ranks_source = _env_ranks(environ), RANKS_ENV
    elif ranks < 1:
        raise ValueError(f"ranks must be at least 1, got {ranks}")
    cpus, cores, limit, machine = _cpu_limits(
        cgroup_root=cgroup_root, proc=proc, affinity=affinity
    )
    return CpuBudget(
        cpus=cpus,
        ranks=ranks,
        cores=cores,
        machine_cpus=machine,
        limit=limit,
        ranks_source=ranks_source if ranks > 1 else None,
    )


def _env_ranks(environ: Mapping[str, str]) -> int:
    text = environ.get(RANKS_ENV)
    if not text:
        return 1
    try:
        ranks = int(text)
    except ValueError:
        ranks = 0
    if ranks < 1:
        _logger.warning("%s=%r is not a count of processes; counting 1 rank", RANKS_ENV, text)
        return 1
    return ranks


def _cpu_limits(
    *, cgroup_root: str | None = None, proc: str = "/proc", affinity: Iterable[int] | None = None
) -> tuple[int, int, str | None, int]:
    """(usable CPUs, physical cores among them, what limits them in words or None, the
    machine's CPUs)."""
    machine = os.cpu_count() or 1
    if affinity is None:
        try:
            allowed = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):  # not Linux
            allowed = set(range(machine))
    else:
        allowed = set(affinity)
    machine = max(machine, len(allowed))  # (an injected affinity: the machine holds it)
    cpus = max(1, len(allowed))
    limit = None
    if cpus < machine:
        limit = f"this process's CPU affinity ({cpus} of the machine's {machine})"
    quota = cpu_quota(cgroup_root=cgroup_root, proc=proc)
    if quota is not None:
        quota_cpus, where = quota
        whole = max(1, math.floor(quota_cpus + 1e-9))
        if whole < cpus:
            rounded = "" if whole == quota_cpus else ", rounded down"
            limit = f"the cgroup CPU quota ({where} = {quota_cpus:g} CPUs{rounded})"
            if len(allowed) < machine:
                limit += f"; the affinity allows {len(allowed)}"
            cpus = whole
    cores = min(cpus, _physical_cores(allowed, os.path.join(proc, "cpuinfo")))
    return cpus, cores, limit, machine


def cpu_quota(*, cgroup_root: str | None = None, proc: str = "/proc") -> tuple[float, str] | None:
    """This process's cgroup CPU quota in CPUs (quota / period) and where it was read, e.g.
    ``(2.0, "/sys/fs/cgroup/cpu.max 200000 100000")``; None without a quota ("max").

    The tightest of its cgroup's and every ancestor's (each one caps the ones below it):
    cgroup v2 ``cpu.max`` in the unified hierarchy (found in ``proc``/self/mountinfo, or
    ``cgroup_root``), and the v1 ``cpu`` controller's ``cpu.cfs_quota_us`` /
    ``cpu.cfs_period_us`` where one is mounted (not with ``cgroup_root``)."""
    paths = _cgroup_paths(os.path.join(proc, "self", "cgroup"))
    found: list[tuple[float, str]] = []
    if cgroup_root is not None:
        found += _v2_quotas(_cgroup_dirs(cgroup_root, "/", paths.get("", "/")))
    else:
        for root, point, fstype, options in _mounts(os.path.join(proc, "self", "mountinfo")):
            if fstype == "cgroup2" and "" in paths:
                found += _v2_quotas(_cgroup_dirs(point, root, paths[""]))
            elif fstype == "cgroup" and "cpu" in options.split(",") and "cpu" in paths:
                found += _v1_quotas(_cgroup_dirs(point, root, paths["cpu"]))
    return min(found, default=None)


def _mounts(mountinfo: str) -> list[tuple[str, str, str, str]]:
    """(root in its hierarchy, mount point, file system type, super options) per mount."""
    out = []
    try:
        with open(mountinfo) as f:
            for line in f:
                fields = line.split()
                if "-" not in fields:
                    continue
                sep = fields.index("-")
                if len(fields) < sep + 2 or sep < 5:
                    continue
                options = fields[sep + 3] if len(fields) > sep + 3 else ""
                out.append((_unescape(fields[3]), _unescape(fields[4]), fields[sep + 1], options))
    except OSError:
        pass
    return out


def _unescape(text: str) -> str:
    """A mountinfo field as written there: a space is \\040, a tab \\011, ..."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), text)


def _cgroup_paths(cgroup_file: str) -> dict[str, str]:
    """This process's cgroup per hierarchy: ``""`` the unified (v2) one, each v1 controller by
    name (``cpu``, ``memory``, ...)."""
    paths: dict[str, str] = {}
    try:
        with open(cgroup_file) as f:
            for line in f:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) != 3:
                    continue
                hid, controllers, path = parts
                if hid == "0" and not controllers:
                    paths[""] = path
                else:
                    for c in controllers.split(","):
                        paths[c] = path
    except OSError:
        pass
    return paths


def _cgroup_dirs(point: str, root: str, path: str) -> list[str]:
    """The directories of the cgroup ``path`` and of each cgroup above it, up to the mount
    point of the hierarchy mounted from ``root``. A path outside the mounted part (a
    container without its own cgroup namespace sees its host's path) starts at the mount."""
    if root != "/" and (path == root or path.startswith(root.rstrip("/") + "/")):
        path = path[len(root.rstrip("/")) :]
    point = os.path.normpath(point)
    leaf = os.path.normpath(os.path.join(point, path.lstrip("/")))
    if not os.path.isdir(leaf) or not (leaf + "/").startswith(point + "/"):
        leaf = point
    dirs = [leaf]
    while dirs[-1] != point:
        dirs.append(os.path.dirname(dirs[-1]))
    return dirs


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _v2_quotas(dirs: list[str]) -> list[tuple[float, str]]:
    out = []
    for d in dirs:
        path = os.path.join(d, "cpu.max")
        text = _read(path)
        parts = (text or "max").split()
        if parts[0] == "max":
            continue
        try:
            quota, period = int(parts[0]), int(parts[1]) if len(parts) > 1 else 100_000
        except ValueError:
            _logger.debug("cannot read %s: %r", path, text)
            continue
        if quota > 0 and period > 0:
            out.append((quota / period, f"{path} {quota} {period}"))
    return out


def _v1_quotas(dirs: list[str]) -> list[tuple[float, str]]:
    out = []
    for d in dirs:
        path = os.path.join(d, "cpu.cfs_quota_us")
        try:
            quota = int(_read(path) or -1)
            period = int(_read(os.path.join(d, "cpu.cfs_period_us")) or 100_000)
        except ValueError:
            continue
        if quota > 0 and period > 0:
            out.append((quota / period, f"{path} {quota} (period {period})"))
    return out


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
