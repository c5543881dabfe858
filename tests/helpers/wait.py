"""The tests' one wait: poll a condition until it holds, or fail the test saying what was not
seen. (Never a sleep of a guessed length: a loaded machine only makes the wait longer.)"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# What a condition may raise while the thing it waits for is not there yet: a server that does
# not answer yet (OSError: connection refused), a study not created yet (KeyError, Optuna's).
NOT_YET: tuple[type[BaseException], ...] = (OSError, KeyError)


def wait_for(
    condition: Callable[[], T],
    *,
    what: str,
    timeout: float = 120,
    every: float = 0.2,
    not_yet: tuple[type[BaseException], ...] = NOT_YET,
) -> T:
    """Call ``condition`` every ``every`` seconds until it returns something true, and return
    that. After ``timeout`` seconds the test fails with "``what``: not seen within N s" (the
    last ``not_yet`` exception, if any, as its cause). An exception of ``not_yet`` counts as
    "not yet"; any other propagates at once (an ``assert`` in ``condition`` fails the test
    then: e.g. that the process waited on is still running)."""
    deadline = time.monotonic() + timeout
    while True:
        last: BaseException | None = None
        try:
            value = condition()
        except not_yet as e:
            value, last = None, e  # type: ignore[assignment]
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what}: not seen within {timeout:g} s") from last
        time.sleep(every)
