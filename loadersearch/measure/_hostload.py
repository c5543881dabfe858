"""How busy the machine was while a measurement ran: CPU used by processes outside it, and
steal time.

Other processes' CPU use silently lowers a measurement (next to another CPU-heavy job, one
configuration measured 29.9 and 5.7 img/s), so every measurement counts it. The CPU time of
the CPUs this process may run on (``/proc/stat``, per CPU, through psutil) is read at the
start and the end of the measured part, and the CPU time of this process's whole tree (this
process, the fork server, the measuring child, its DataLoader workers or ranks, and whatever
of those was reaped meanwhile) is subtracted: what is left was used by processes outside the
measurement. Steal time (a virtual machine's CPUs taken by the hypervisor for other guests) is
read from the same counters.

A measurement is flagged (``busy_host``) when the outside use averaged at least
``BUSY_SHARE`` of the CPUs (``$LOADERSEARCH_BUSY_SHARE``, default 0.25), or steal at least
``STEAL_SHARE``: its number may be low because of the machine, not the configuration.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import psutil

from loadersearch.errors import LoaderSearchError
from loadersearch.measure._probes import tree_cpu_seconds

BUSY_SHARE_ENV = "LOADERSEARCH_BUSY_SHARE"
BUSY_SHARE = 0.25  # outside CPU use, as a share of the CPUs, that flags a measurement
STEAL_SHARE = 0.10  # steal time, as a share of the CPUs' time, that flags one


def busy_share() -> float:
    """The outside-load threshold: ``$LOADERSEARCH_BUSY_SHARE`` or :data:`BUSY_SHARE`.
    Raises :class:`LoaderSearchError` (bad input) naming the variable when it is not a
    positive number."""
    text = os.environ.get(BUSY_SHARE_ENV)
    if not text:
        return BUSY_SHARE
    try:
        share = float(text)
    except ValueError:
        share = float("nan")
    if not share > 0:  # also NaN
        raise LoaderSearchError(
            f"{BUSY_SHARE_ENV}={text!r} is not a positive number; give the share of the CPUs "
            "that other processes may use before a measurement is flagged, e.g. 0.25 (a value "
            "above 1 never flags)."
        )
    return share


def _cpus() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(psutil.cpu_count() or 1))


def _machine_times(cpus: list[int]) -> tuple[float, float]:
    """(busy seconds, steal seconds) summed over ``cpus`` since boot."""
    per_cpu = psutil.cpu_times(percpu=True)
    busy = steal = 0.0
    for i in cpus:
        if i >= len(per_cpu):
            continue
        t = per_cpu[i]
        idle = t.idle + getattr(t, "iowait", 0.0)
        s = getattr(t, "steal", 0.0)
        # guest time is already counted in user (and guest_nice in nice) on Linux
        total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
        busy += total - idle - s
        steal += s
    return busy, steal


@dataclass(frozen=True)
class HostLoad:
    """The machine during one measured span."""

    wall_s: float  # length of the span
    cpus: int  # CPUs this process may run on
    outside_cpu_s: float  # CPU seconds used by processes outside the measurement
    steal_s: float  # CPU seconds taken by the hypervisor (steal)

    @property
    def outside_load(self) -> float:
        """CPUs' worth used outside the measurement, on average (1.0 = one busy CPU)."""
        return self.outside_cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    @property
    def outside_share(self) -> float:
        """:attr:`outside_load` as a share of the CPUs (0..1)."""
        return self.outside_load / self.cpus

    @property
    def steal_share(self) -> float:
        cpu_time = self.wall_s * self.cpus
        return self.steal_s / cpu_time if cpu_time > 0 else 0.0

    def busy(self, share: float | None = None) -> bool:
        """Whether the span was measured under significant outside load or steal."""
        limit = busy_share() if share is None else share
        return self.outside_share >= limit or self.steal_share >= STEAL_SHARE

    def describe(self) -> str:
        text = (
            f"outside the measurement, other processes used {self.outside_load:.2f} of "
            f"{self.cpus} CPUs ({100 * self.outside_share:.0f} %)"
        )
        if self.steal_s > 0:
            text += f"; steal {100 * self.steal_share:.1f} %"
        return text


class HostLoadMeter:
    """Counts the machine's CPU time and this process tree's between :meth:`start` and
    :meth:`stop`. Call both from the process whose tree is the measurement (the parent of the
    measuring child): :func:`~loadersearch.measure._probes.tree_cpu_seconds` is about the
    caller."""

    def __init__(self) -> None:
        self._proc = psutil.Process()
        self._cpus = _cpus()
        self._start: tuple[float, float, float, float] | None = None

    def _read(self) -> tuple[float, float, float, float]:
        busy, steal = _machine_times(self._cpus)
        return time.monotonic(), busy, steal, tree_cpu_seconds(self._proc)

    def start(self) -> None:
        """(Re)start the span now."""
        self._start = self._read()

    @property
    def started(self) -> bool:
        return self._start is not None

    def stop(self) -> HostLoad | None:
        """The span since :meth:`start`, or None when it was never started."""
        if self._start is None:
            return None
        t1, busy1, steal1, own1 = self._read()
        t0, busy0, steal0, own0 = self._start
        outside = max(0.0, (busy1 - busy0) - (own1 - own0))
        return HostLoad(
            wall_s=t1 - t0,
            cpus=len(self._cpus),
            outside_cpu_s=outside,
            steal_s=max(0.0, steal1 - steal0),
        )
