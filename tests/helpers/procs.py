"""Helpers for measurement tests: find the processes of a running measurement."""

from __future__ import annotations

import os

import psutil

CHILD_MODULE = "loadersearch.measure.child"


def measurement_processes(root: int | None = None) -> list[psutil.Process]:
    """The measuring child(ren) under ``root`` (default: this process), each followed by all
    its descendants (the DataLoader workers)."""
    procs = []
    for p in psutil.Process(root or os.getpid()).children(recursive=True):
        try:
            if CHILD_MODULE in " ".join(p.cmdline()):
                procs.append(p)
                procs.extend(p.children(recursive=True))
        except psutil.Error:
            pass
    return procs


def alive(pids: list[int]) -> list[int]:
    """The pids among ``pids`` that still exist (zombies included: they were not reaped)."""
    return [pid for pid in pids if psutil.pid_exists(pid)]
