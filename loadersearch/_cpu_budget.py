"""The CPU budget: the CPUs this process may use (its affinity and the cgroup CPU quota) and
the training processes (ranks) on this node that share them, and so the workers each rank's
DataLoader may start. The search space's default worker range, the baselines, the settling
rule, AutoLoader's ladder and the integrations all read it (:func:`cpu_budget`)."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_logger = logging.getLogger(__name__)


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
        (LOCAL_WORLD_SIZE): 3 CPUs each, workers searched up to 3 each; 2 workers each leave one
        CPU for each training process``."""
        head = f"{self.cpus} CPU{_s(self.cpus)}"
        if self.limit:
            head += f" allowed by {self.limit}"
        elif self.machine_cpus:
            head += " (all of this machine's)"
        w, bound = self.workers_per_rank, self.worker_bound
        # Both figures: the search range's top (a storage-bound load gains workers beyond the
        # CPUs) and the workers that leave each training process its CPU (a CPU-bound one).
        if self.ranks > 1:
            source = f" ({self.ranks_source})" if self.ranks_source else ""
            per = self.cpus_per_rank
            tail = f"{self.ranks} ranks{source}: {per} CPU{_s(per)} each, workers searched up "
            tail += f"to {bound} each"
            if self.cpus < self.ranks:
                tail = (
                    f"{self.ranks} ranks{source}: fewer CPUs than ranks, 1 worker each, "
                    "sharing the CPUs with the training processes"
                )
            elif per > 1:
                tail += f"; {w} worker{_s(w)} each leave one CPU for each training process"
            else:
                tail += ", sharing its CPU with the rank's training process"
        elif self.cpus > 1:
            tail = (
                f"1 process: workers searched up to {bound} (above the CPUs, for loads that wait "
                f"on storage); {w} worker{_s(w)} leave{'s' if w == 1 else ''} one CPU for the "
                "training process"
            )
        else:
            tail = (
                f"1 process: workers searched up to {bound}; 1 worker shares the CPU with the "
                "training process"
            )
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
    def of(cls, hardware: Any, ranks: int = 1, source: str | None = None) -> CpuBudget:
        """The budget a fingerprint recorded (a :class:`~loadersearch._hardware.Hardware`, whose
        module imports this one), for ``ranks`` processes; a fingerprint from before budgets
        (or one built by hand) counts every CPU of the machine."""
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


def memory_limit(*, cgroup_root: str | None = None, proc: str = "/proc") -> int | None:
    """This process's cgroup memory limit in bytes (a container's ``--memory``, a pod's
    limit), the tightest of its cgroup's and every ancestor's; None without one. cgroup v2
    ``memory.max`` in the unified hierarchy (or under ``cgroup_root``), the v1 ``memory``
    controller's ``memory.limit_in_bytes`` (a value near 2**63 there means none)."""
    paths = _cgroup_paths(os.path.join(proc, "self", "cgroup"))
    files: list[str] = []
    if cgroup_root is not None:
        dirs = _cgroup_dirs(cgroup_root, "/", paths.get("", "/"))
        files += [os.path.join(d, "memory.max") for d in dirs]
    else:
        for root, point, fstype, options in _mounts(os.path.join(proc, "self", "mountinfo")):
            if fstype == "cgroup2" and "" in paths:
                dirs = _cgroup_dirs(point, root, paths[""])
                files += [os.path.join(d, "memory.max") for d in dirs]
            elif fstype == "cgroup" and "memory" in options.split(",") and "memory" in paths:
                dirs = _cgroup_dirs(point, root, paths["memory"])
                files += [os.path.join(d, "memory.limit_in_bytes") for d in dirs]
    limits = []
    for path in files:
        text = _read(path)
        if text and text.isdigit() and 0 < int(text) < 2**60:
            limits.append(int(text))
    return min(limits, default=None)


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
