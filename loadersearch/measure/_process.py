"""What every measuring process does, whoever started it (the fork server, the parent, the
launcher of a multi-rank job): it dies with its parent, and it reports to it in JSON lines."""

from __future__ import annotations

import ctypes
import json
import signal
from typing import Any, TextIO


def die_with_parent() -> None:
    """Ask Linux to SIGKILL this process if the parent dies (DataLoader workers then notice their
    parent is gone and exit): no orphaned measurement even if the parent is SIGKILLed."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def send_line(out: TextIO, kind: str, **data: Any) -> None:
    """Write one message, ``{"type": kind, **data}``, as a JSON line on ``out`` and flush it."""
    out.write(json.dumps({"type": kind, **data}) + "\n")
    out.flush()
