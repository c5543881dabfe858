"""Helpers for measurement tests: find the processes of a running measurement."""

from __future__ import annotations

import os

import psutil

CHILD_MODULE = "loadersearch.measure._child"
SERVER_MODULE = "loadersearch.measure._forkserver_process"
SERVER_ENTRY = f"from {SERVER_MODULE} import main"  # in a fork server's (and its forks') cmdline


def cmdline(p: psutil.Process) -> str:
    """A process's command line, "" for one that has ended (a zombie not yet reaped, gone)."""
    try:
        return " ".join(p.cmdline())
    except psutil.Error:
        return ""


def measurement_processes(root: int | None = None) -> list[psutil.Process]:
    """The measuring child(ren) under ``root`` (default: this process), each followed by all
    its descendants (the DataLoader workers). A measuring child is a process a fork server
    forked (the server itself, idle between measurements, is not one) or one started as
    ``python -m loadersearch.measure._child``."""
    children = []
    for server in fork_servers(root):
        try:
            children.extend(server.children())
        except psutil.Error:
            pass
    for p in psutil.Process(root or os.getpid()).children(recursive=True):
        if CHILD_MODULE in cmdline(p) and SERVER_ENTRY not in cmdline(p):
            children.append(p)
    procs = []
    for p in children:
        procs.append(p)
        try:
            procs.extend(p.children(recursive=True))
        except psutil.Error:
            pass
    return procs


def fork_servers(root: int | None = None) -> list[psutil.Process]:
    """The fork servers under ``root`` (default: this process)."""
    return [
        p
        for p in psutil.Process(root or os.getpid()).children(recursive=True)
        if SERVER_ENTRY in cmdline(p)
        and not any(SERVER_ENTRY in cmdline(a) for a in _parents(p))
    ]


def _parents(p: psutil.Process) -> list[psutil.Process]:
    try:
        return p.parents()
    except psutil.Error:
        return []


def alive(pids: list[int]) -> list[int]:
    """The pids among ``pids`` that still exist (zombies included: they were not reaped)."""
    return [pid for pid in pids if psutil.pid_exists(pid)]
