"""The suite's own helpers: the one wait (helpers/wait.py) and what the fast lane's guard
counts as a measuring process (helpers/lanes.py)."""

from __future__ import annotations

import sys

import pytest
from helpers.lanes import measuring_process
from helpers.procs import SERVER_ENTRY
from helpers.wait import wait_for


def test_wait_for_returns_the_first_true_value_and_counts_not_yet_errors_as_not_yet():
    calls = []

    def condition():
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionRefusedError  # an OSError: a server not up yet
        if len(calls) == 2:
            raise KeyError("study")  # a study not created yet
        return ["found"] if len(calls) >= 4 else []

    assert wait_for(condition, what="the thing", every=0.01) == ["found"]
    assert len(calls) == 4


def test_wait_for_fails_naming_what_it_waited_for_with_the_last_error_as_cause():
    with pytest.raises(AssertionError, match=r"^the dashboard: not seen within 0.05 s$") as e:
        wait_for(lambda: open("/nonexistent/x"), what="the dashboard", timeout=0.05, every=0.01)
    assert isinstance(e.value.__cause__, FileNotFoundError)


def test_wait_for_lets_any_other_error_through_at_once():
    with pytest.raises(ZeroDivisionError):
        wait_for(lambda: 1 / 0, what="nothing", timeout=60)


@pytest.mark.parametrize(
    ("argv", "what"),
    [
        ([sys.executable, "-m", "loadersearch", "run", "--trials", "2"], "loadersearch run"),
        ([sys.executable, "-m", "loadersearch", "--debug", "bench"], "loadersearch bench"),
        (["/venv/bin/loadersearch", "worker", "--study", "s"], "loadersearch worker"),
        ([sys.executable, "-c", f"{SERVER_ENTRY}; main()"], "a measurement fork server"),
        ([sys.executable, "-m", "loadersearch.measure._child"], "a measuring child"),
        ([sys.executable, "-m", "loadersearch", "best", "--format", "env"], None),
        ([sys.executable, "-m", "loadersearch", "dashboard", "--port", "8080"], None),
        ([sys.executable, "-c", "print('run')"], None),
    ],
)
def test_the_guard_knows_a_measuring_process_by_its_command_line(argv, what):
    assert measuring_process(argv) == what
