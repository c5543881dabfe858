#!/usr/bin/env python
"""Where a study's time goes: run ``loadersearch run`` (default: the quick start's
``--trials 40`` on the built-in dataset) into a fresh SQLite file, then print the trials'
time by phase (process start, build, warm-up, planned epochs, epochs added for precision,
teardown, storage and notes), the confirmation, the wall time of the whole command, the trials
used before the study settled, and the machine's load.

Run from the repository root:  .venv/bin/python benchmarks/bench_phases.py [-- RUN OPTIONS]
e.g. ``benchmarks/bench_phases.py -- --trials 12 --workload emulated``. ``--json PATH`` writes
the figures too. Measure on an idle machine: other work shows in every phase.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from loadersearch.report import open_study, phase_line, phase_rows, settled_line, summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("run_args", nargs="*", help="options for `loadersearch run`")
    args = parser.parse_args(argv)
    run_args = args.run_args or ["--trials", "40"]
    with tempfile.TemporaryDirectory(prefix="bench-phases-") as tmp:
        url = f"sqlite:///{os.path.join(tmp, 'phases.db')}"
        cmd = [sys.executable, "-m", "loadersearch", "run", *run_args, "--storage", url,
               "--study", "phases", "--quiet"]  # fmt: skip
        load_before = os.getloadavg()
        started = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.monotonic() - started
        load_after = os.getloadavg()
        if done.returncode != 0:
            print(done.stdout + done.stderr)
            return done.returncode
        summary = summarize(open_study(url, "phases"))
    print(f"$ loadersearch run {' '.join(run_args)}")
    print(f"wall time {wall / 60:.1f} min; load average before {load_before[0]:.2f}, "
          f"after {load_after[0]:.2f} (1 min); {os.cpu_count()} CPUs")  # fmt: skip
    print(f"{summary.finished} trials finished; {settled_line(summary) or 'not settled early'}")
    print(f"{'phase':<34} {'time':>9} {'share':>6}")
    for name, seconds, share in phase_rows(summary):
        print(f"{name:<34} {seconds:>9} {share:>6}")
    print(f"{'confirmation':<34} {summary.confirm_s:>8.1f}s")
    print(phase_line(summary))
    w = summary.winner
    if w is not None:
        print(f"answer: {w.config.label()} at {w.rate:.1f} img/s"
              + (" (inconclusive)" if w.inconclusive else ""))  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "command": run_args,
                    "wall_s": round(wall, 1),
                    "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
                    "finished": summary.finished,
                    "settled": summary.settled,
                    "phases_s": summary.phases,
                    "confirm_s": summary.confirm_s,
                    "answer": w.config.label() if w else None,
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
