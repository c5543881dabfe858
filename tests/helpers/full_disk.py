"""Fill the disk under a running study, inside a private mount namespace (run by
tests/cli/test_full_disk.py through ``unshare -m``; the small tmpfs at DIR exists only here).

    python full_disk.py DIR never|freed REPORT.json -- loadersearch run ARGS...

Starts the run, waits until it measures a trial, fills DIR's file system to the last byte,
then either leaves it full until the run ends and resumes the same command after freeing it
(``never``), or frees it once the run says it waits for space (``freed``). Writes what it saw
(exit codes, output, the trials) to REPORT.json, outside DIR.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import threading
import time

import psutil
from procs import measurement_processes  # this script's folder, tests/helpers, is on sys.path

DEADLINE_S = 300


def fill(directory: str) -> str:
    """Write a file until the file system has not one byte left; returns its path."""
    path = os.path.join(directory, "filler")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        for size in (1 << 20, 1 << 16, 1 << 12, 1):
            chunk = b"\0" * size
            while True:
                try:
                    os.write(fd, chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
    finally:
        os.close(fd)
    return path


class Run:
    """A CLI process whose output lines are collected as they come."""

    def __init__(self, argv: list[str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_until(self, predicate, what: str) -> None:
        end = time.monotonic() + DEADLINE_S
        while not predicate():
            if self.proc.poll() is not None or time.monotonic() > end:
                raise SystemExit(f"gave up waiting for {what}: {self.lines[-20:]}")
            time.sleep(0.1)

    def measuring(self) -> bool:
        try:
            return bool(measurement_processes(self.proc.pid))
        except psutil.Error:
            return False

    def finish(self) -> dict[str, object]:
        code = self.proc.wait(timeout=DEADLINE_S)
        self.reader.join(timeout=10)
        return {"code": code, "output": "\n".join(self.lines)}


def trials(argv: list[str]) -> list[dict[str, object]]:
    """The study's trials, read the way `loadersearch report` reads (read-only)."""
    import optuna

    from loadersearch.storage import open_existing_storage

    url = argv[argv.index("--storage") + 1]
    name = argv[argv.index("--study") + 1]
    study = optuna.load_study(study_name=name, storage=open_existing_storage(url))
    return [
        {"number": t.number, "state": t.state.name, "params": t.params, "attrs": t.user_attrs}
        for t in study.trials
    ]


def main() -> None:
    directory, mode, report = sys.argv[1:4]
    argv = sys.argv[sys.argv.index("--") + 1 :]
    seen: dict[str, object] = {}
    run = Run(argv)
    run.wait_until(run.measuring, "a trial being measured")
    filler = fill(directory)
    seen["free_after_fill"] = os.statvfs(directory).f_bavail
    if mode == "freed":
        run.wait_until(lambda: any("is full" in line for line in run.lines), "the full-disk wait")
        os.remove(filler)
        seen["first"] = run.finish()
    else:
        seen["first"] = run.finish()
        seen["trials_when_full"] = trials(argv)
        os.remove(filler)
        seen["resume"] = Run(argv).finish()
    seen["trials"] = trials(argv)
    with open(report, "w") as f:
        json.dump(seen, f, indent=1)


if __name__ == "__main__":
    main()
