"""The measuring child: ``python -m loadersearch.measure._child --fd N --spec JSON``.

Started by :func:`loadersearch.measure._runner.measure` in its own process group. It builds the
workload, runs the timed loop and writes JSON lines on file descriptor ``N`` (a pipe of its
own, not stdout, which torch or user code may print to):

* ``{"type": "ready", ...}`` once the workload is built (imports, dataset, model: the fixed
  overhead ends here);
* ``{"type": "warmup", "epoch": i, "seconds": s}`` after each unmeasured warm-up epoch;
* ``{"type": "window", ...}`` one per measurement window (:class:`~..result.Window` fields);
* ``{"type": "extra_epoch", "n": n, "precision": p}`` after each measured epoch added for the
  plan's precision (no windows: the pruner compares the same windows in every trial);
* then ``{"type": "result", ...}`` or ``{"type": "error", "status", "reason", "message"}``.

The measurement itself is :func:`loadersearch.measure._body.measure_share`'s (each rank of a
multi-rank job runs it too). Two keys of ``MeasurePlan.extra`` change what is measured
(``loadersearch diagnose`` sets them):
``"resident": true`` feeds the step one batch kept on the device (the ingestion ceiling), and
``"cold_cache": true`` evicts the dataset's files from the page cache before each measured epoch
and reports what stayed resident (``page_cache`` in the result).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import traceback
from typing import TextIO

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._body import measure_share
from loadersearch.measure._launcher import run_job
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._process import die_with_parent, send_line
from loadersearch.workload import WorkloadSpec


def run(out: TextIO, spec_json: str, ranks: int | None = None) -> int:
    """Measure the configuration in ``spec_json``, reporting on ``out``; returns an exit code.
    ``ranks`` runs the multi-rank job (:mod:`loadersearch.measure._ranks`) with that many ranks
    whatever ``gpus`` says (1 rank: the DDP path on one device, for the GPU acceptance)."""
    from loadersearch.measure._failures import classify_exception

    started = time.monotonic()
    config: LoaderConfig | None = None
    wspec: WorkloadSpec | None = None
    try:
        data = json.loads(spec_json)
        wspec = WorkloadSpec.from_dict(data["workload"])
        config = LoaderConfig.from_dict(data["config"])
        plan = MeasurePlan.from_dict(data["plan"])
        if ranks or wspec.gpus > 1:  # one process per rank, this one their launcher
            world = ranks or wspec.gpus
            run_job(out, wspec, config, plan, world_size=world, started=started)
        else:
            measure_share(functools.partial(send_line, out), wspec, config, plan, started)
        return 0
    except BrokenPipeError:  # the parent is gone: nobody to report to
        return 1
    except BaseException as e:  # every failure becomes a classified message
        status, reason, message = classify_exception(
            e, config.batch_size if config else None, wspec.vram_cap if wspec else None
        )
        send_line(
            out,
            "error",
            status=status,
            reason=reason,
            message=message,
            traceback="".join(traceback.format_exception(e))[-4000:],
        )
        return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m loadersearch.measure._child")
    parser.add_argument("--fd", type=int, required=True, help="pipe to write JSON lines to")
    parser.add_argument("--spec", required=True, help="JSON: workload, config, plan")
    parser.add_argument("--ranks", type=int, help="ranks of a DDP job (default: gpus)")
    args = parser.parse_args(argv)
    die_with_parent()
    out = os.fdopen(args.fd, "w", encoding="utf-8")
    code = run(out, args.spec, args.ranks)
    try:
        out.close()
    except OSError:
        pass
    return code


if __name__ == "__main__":
    sys.exit(main())
