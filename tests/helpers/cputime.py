"""Where the suite's time goes: with ``$LOADERSEARCH_TEST_CPU_LOG`` set to a file, each test
appends one tab-separated line to it: its node id, its wall seconds, the CPU seconds of this
process and of the processes it started and waited for (the CLI processes, fork servers and
measuring children: a process's CPU counts once its parent has waited for it), and the load
average before and after. On a shared machine the CPU seconds say more than the wall time:
a busy machine stretches the wall time of every test, and the CPU time much less. (Processes
a test leaves to a later one count there; a session fixture counts in its first test.)

    LOADERSEARCH_TEST_CPU_LOG=/tmp/cpu.tsv pytest -m slow tests/cli
    sort -t$'\\t' -k4 -rn /tmp/cpu.tsv | head
"""

from __future__ import annotations

import os
import resource
import time

import pytest

LOG_VARIABLE = "LOADERSEARCH_TEST_CPU_LOG"


def _cpu() -> tuple[float, float]:
    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime, children.ru_utime + children.ru_stime


class CpuLog:
    """The plugin: registered by tests/conftest.py when ``$LOADERSEARCH_TEST_CPU_LOG`` is set."""

    def __init__(self, path: str) -> None:
        self.path = path

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None):
        wall0, (mine0, children0), load0 = time.monotonic(), _cpu(), os.getloadavg()[0]
        try:
            return (yield)
        finally:
            mine1, children1 = _cpu()
            fields = [item.nodeid, time.monotonic() - wall0, mine1 - mine0,
                      children1 - children0, load0, os.getloadavg()[0]]  # fmt: skip
            with open(self.path, "a") as f:
                f.write("\t".join(f"{x:.1f}" if isinstance(x, float) else x for x in fields))
                f.write("\n")
