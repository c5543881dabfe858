"""Waiting for a quieter machine before a confirmation round is measured again: bounded in
time (``$LOADERSEARCH_QUIET_WAIT_S``), said while it waits."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

QUIET_WAIT_ENV = "LOADERSEARCH_QUIET_WAIT_S"
QUIET_WAIT_S = 300.0  # the longest a confirmation waits for quiet, in all
QUIET_SAMPLE_S = 2.0  # the span over which the machine's load is read while waiting


def quiet_wait_limit() -> float:
    """``$LOADERSEARCH_QUIET_WAIT_S`` (0 = never wait) or :data:`QUIET_WAIT_S`."""
    text = os.environ.get(QUIET_WAIT_ENV)
    if text is None or not text.strip():
        return QUIET_WAIT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if value < 0:
        raise ValueError(
            f"{QUIET_WAIT_ENV}={text!r} is not a number of seconds; give how long the "
            f"confirmation may wait for a quiet machine (e.g. {QUIET_WAIT_S:.0f}, or 0)"
        )
    return value


class QuietWait:
    """The confirmation's budget of waiting for a quiet machine: :meth:`wait` reads the
    machine's outside load every :data:`QUIET_SAMPLE_S` seconds until it is below the busy
    share (True) or the budget is spent (False)."""

    def __init__(self, limit_s: float, notice: Callable[[str], None] | None = None) -> None:
        self.limit_s = limit_s
        self.waited_s = 0.0
        self.busy_rounds = 0  # rounds kept although busy: the budget was spent
        self.notice = notice or (lambda text: None)

    def wait(self) -> bool:
        from loadersearch.measure import HostLoadMeter, busy_share

        left = self.limit_s - self.waited_s
        if left <= 0:
            return False
        self.notice(
            f"a confirmation round was measured while other processes used more than "
            f"{busy_share():.0%} of the CPUs: waiting for a quieter moment to measure it again "
            f"(up to {left:.0f} s more)"
        )
        meter = HostLoadMeter()
        while self.waited_s < self.limit_s:
            span = min(QUIET_SAMPLE_S, self.limit_s - self.waited_s)
            meter.start()
            time.sleep(span)  # the span the load is read over, not a guess at a condition
            load = meter.stop()
            self.waited_s += span
            if load is not None and not load.busy():
                self.notice(f"quiet again ({load.describe()}): measuring the round again")
                return True
        self.notice(
            f"the machine stayed busy for {self.waited_s:.0f} s: the confirmation keeps its "
            "busy rounds and its answer is inconclusive"
        )
        return False
