#!/usr/bin/env python
"""Where a study's time goes: run ``loadersearch run`` (default: the quick start's
``--trials 40`` on the built-in dataset) into a fresh SQLite file, then print the trials'
time by phase (process start, build, warm-up, planned epochs, epochs added for precision,
teardown, storage and notes), the confirmation, the wall time of the whole command, the trials
used before the study settled, and the machine's load.

Run from the repository root:  .venv/bin/python benchmarks/bench_phases.py [-- RUN OPTIONS]
e.g. ``benchmarks/bench_phases.py -- --trials 12 --workload emulated``. ``--json PATH`` writes
the figures too. Measure on an idle machine: other work shows in every phase.

On a lent GPU machine, whose calls are limited in time, ``--deadline S`` stops the run with
SIGTERM after S seconds (the run stores every finished trial, fails the interrupted one and
queues it again) and prints the phases of what was stored, marked as stopped; ``--storage URL
--study NAME`` keep the study, so that a second call with the same options resumes it:

    .venv/bin/python benchmarks/bench_phases.py --deadline 540 --json $OUT/default-study.json \
        --storage sqlite:///studies/gpu-default.db --study gpu-default -- --trials 40
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time

from loadersearch.errors import LoaderSearchError
from loadersearch.report import open_study, phase_line, phase_rows, settled_line, summarize

GRACE_S = 45  # a deadline of 540 s and this grace fit a lent machine's 600 s call


class _Terminated(Exception):
    """SIGTERM to this script: stop the run and report, as at the deadline."""


def _terminated(*_: object) -> None:
    raise _Terminated


def _stop(proc: subprocess.Popen) -> str:
    """SIGTERM to the run (it stores what it finished, fails and queues the trial it was
    measuring and stops its measuring processes), SIGKILL if it has not exited in
    :data:`GRACE_S`; what it printed."""
    proc.send_signal(signal.SIGTERM)
    try:
        output, _ = proc.communicate(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
    return output or ""


def _finished(url: str, study: str) -> int:
    """Trials finished in a stored study before this call (0 when there is none yet)."""
    try:
        return summarize(open_study(url, study)).finished
    except LoaderSearchError:
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--deadline", type=float, metavar="S",
                        help="stop the run with SIGTERM after S seconds and report what it "
                        "stored (resume it with --storage and the same command)")  # fmt: skip
    parser.add_argument("--storage", metavar="URL",
                        help="keep the study in this storage (default: a temporary SQLite file)")
    parser.add_argument("--study", default="phases", help="the study's name (default: phases)")
    parser.add_argument("run_args", nargs="*", help="options for `loadersearch run`")
    args = parser.parse_args(argv)
    if args.deadline is not None and not (math.isfinite(args.deadline) and args.deadline > 0):
        parser.error("--deadline must be a positive, finite number of seconds")
    run_args = args.run_args or ["--trials", "40"]
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp:
        url = args.storage or f"sqlite:///{os.path.join(tmp, 'phases.db')}"
        cmd = [sys.executable, "-m", "loadersearch", "run", *run_args, "--storage", url,
               "--study", args.study, "--quiet"]  # fmt: skip
        load_before = os.getloadavg()
        started = time.monotonic()
        stopped = False
        before = _finished(url, args.study) if args.storage else 0  # a resumed study's trials
        # SIGTERM to this script (a lent machine's time limit) stops the run as the deadline
        # does; on any other exit the finally below stops it: never a run left measuring
        # without its parent.
        signal.signal(signal.SIGTERM, _terminated)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            output, _ = proc.communicate(timeout=args.deadline)
        except (subprocess.TimeoutExpired, _Terminated):
            stopped = True
            output = _stop(proc)
        finally:
            if proc.poll() is None:  # this script is exiting (a signal, Ctrl-C, an error)
                _stop(proc)
        wall = time.monotonic() - started
        load_after = os.getloadavg()
        if proc.returncode != 0 and not stopped:
            print(output)
            return proc.returncode
        try:
            summary = summarize(open_study(url, args.study))
        except LoaderSearchError as exc:  # stopped before the study was created
            print(output)
            print(f"no study to report: {exc}")
            return 1
    print(f"$ loadersearch run {' '.join(run_args)}")
    print(f"wall time {wall / 60:.1f} min"
          + (f" (stopped at {time.monotonic() - started:.0f} s; "
             + ("resume with the same command)" if args.storage else
                "the study was in a temporary file: give --storage to resume a stopped run)")
             if stopped else "")
          + f"; load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min); "
          f"{os.cpu_count()} CPUs")  # fmt: skip
    print(f"{summary.finished} trials finished"
          + (f" ({before} of them before this call: the figures below are the whole study's, "
             "the wall time this call's)" if before else "")
          + f"; {settled_line(summary) or 'not settled early'}")  # fmt: skip
    print(f"{'phase':<34} {'time':>9} {'share':>6}")
    for name, seconds, share in phase_rows(summary):
        print(f"{name:<34} {seconds:>9} {share:>6}")
    print(f"{'confirmation':<34} {summary.confirm_s:>8.1f}s")
    line = phase_line(summary)
    print(line or "no measured epochs yet")
    w = summary.winner
    if w is not None:
        print(f"answer: {w.config.label()} at {w.rate:.1f} img/s"
              + (" (inconclusive)" if w.inconclusive else "")
              + ("" if w.confirmed else " (the best trial so far, not confirmed)"))  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "command": run_args,
                    "wall_s": round(wall, 1),
                    "stopped": stopped,
                    "finished_before": before,
                    "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
                    "finished": summary.finished,
                    "settled": summary.settled,
                    "phases_s": summary.phases,
                    "confirm_s": summary.confirm_s,
                    "answer": w.config.label() if w else None,
                    "answer_confirmed": bool(w and w.confirmed),
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
