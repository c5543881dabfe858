"""``loadersearch run``: the search. Parses and checks every option (before any storage is
opened), calls :func:`loadersearch.search.study.run_study`, renders progress and the answer."""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from loadersearch.cli._options import (
    PairType,
    allow_mixed_hardware_option,
    no_wait_option,
    storage_option,
    study_option,
)
from loadersearch.config import WORKLOADS

_SPACE_HELP = (
    "Narrow a knob: num_workers=2:12, batch_size=8:64:8 (step) or pow2:8:128, "
    "prefetch_factor=1:4, pin_memory=true|false|both. Repeatable."
)


@click.command("run")
@click.option(
    "--config",
    "spec_file",
    type=click.Path(dir_okay=False),
    help="Study spec TOML (e.g. studies/yolov4-tiny-voc.toml); options given here override it.",
)
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=None,
    help="Finished trials the study should hold in total (default 40); a resumed "
    "study runs only the difference.",
)
@study_option("Study name (default: from workload and hardware).")
@storage_option
@click.option(
    "--workload",
    type=click.Choice(WORKLOADS),
    default=None,
    help="train (YOLOv4-tiny on this machine's device), loader (the pipeline alone) "
    "or emulated (a stand-in GPU).",
)
@click.option(
    "--data",
    type=click.Path(),
    help="Dataset directory (YOLO, VOC or COCO layout; default: the built-in generated dataset).",
)
@click.option(
    "--data-format",
    "--format",
    "data_format",
    type=click.Choice(["yolo", "voc", "coco"]),
    help="Dataset layout (default: detected).",
)
@click.option(
    "--data-split",
    help="Split to use when the dataset holds several (e.g. train, train2017).",
)
@click.option("--img-size", type=int, help="Network input size (default 416 on CUDA, 128 on CPU).")
@click.option(
    "--device",
    type=click.Choice(["auto", "cuda", "cpu"]),
    default=None,
    help="Where the train/loader workloads run (default auto: CUDA when present).",
)
@click.option("--vram-cap", help="GPU memory a trial may use, e.g. 6GiB.")
@click.option("--emulated-ms", type=PairType(), help="Emulated step time A,B: A + B*batch ms.")
@click.option("--emulated-mib", type=PairType(), help="Emulated memory M0,M1: M0 + M1*batch MiB.")
@click.option("--mosaic/--no-mosaic", default=None, help="4-image mosaic augmentation.")
@click.option(
    "--skip-bad-samples",
    is_flag=True,
    default=None,
    help="Skip unreadable samples instead of stopping.",
)
@click.option(
    "--fix",
    "fixes",
    multiple=True,
    metavar="KNOB=VALUE",
    help="Fix a knob, e.g. batch_size=16. Repeatable.",
)
@click.option("--space", "ranges", multiple=True, metavar="KNOB=RANGE", help=_SPACE_HELP)
@click.option("--epochs", type=click.IntRange(min=1), help="Measured short epochs per trial.")
@click.option("--steps", type=click.IntRange(min=1), help="Steps per short epoch.")
@click.option(
    "--windows-per-epoch",
    type=click.IntRange(min=1),
    help="Measurement windows per short epoch: the steps the pruner compares.",
)
@click.option(
    "--warmup-epochs", type=click.IntRange(min=0), help="Unmeasured warm-up epochs (default 1)."
)
@click.option("--warmup-steps", type=click.IntRange(min=1), help="Steps per warm-up epoch.")
@click.option("--trial-timeout", type=click.FloatRange(min=1), help="Seconds per trial at most.")
@click.option(
    "--pruner",
    type=click.Choice(["wilcoxon", "median", "none"]),
    default=None,
    help="wilcoxon (default): prune a trial only when it is clearly (>5%, p<0.1) slower than "
    "the best, window by window; median: Optuna's MedianPruner; none: no pruning.",
)
@click.option(
    "--confirm-rounds",
    type=click.IntRange(min=0),
    default=None,
    help="Interleaved re-measurements of the finalists (default 3; 0 = none).",
)
@click.option(
    "--epochs-planned",
    type=click.IntRange(min=1),
    default=None,
    help="Epochs of your real training, for the time saved (default 300).",
)
@click.option("--no-baselines", is_flag=True, help="Do not enqueue the baselines first.")
@click.option(
    "--no-probe",
    is_flag=True,
    help="Do not probe the largest batch under the VRAM cap (over-cap trials become infeasible).",
)
@click.option("--seed", type=int, help="Sampler seed.")
@allow_mixed_hardware_option
@no_wait_option
@click.option("--quiet", "-q", is_flag=True, help="Only the answer.")
def run(spec_file: str | None, quiet: bool, no_wait: bool, **opts: Any) -> None:
    """Search the DataLoader settings with the most training images/s.

    Each trial measures one configuration in a fresh process; slow ones are pruned; every
    result is stored in the study database (open it with `loadersearch dashboard`). Re-running
    the same command resumes the study.
    """
    from loadersearch.hardware import fingerprint
    from loadersearch.search.settings import Overrides, resolve_settings
    from loadersearch.search.space import SpaceError, parse_assignment
    from loadersearch.storage import resolve_storage_url

    overrides = Overrides()
    try:
        for text in opts["fixes"]:
            knob, value = parse_assignment(text)
            overrides.space_fixed[knob] = value
        for text in opts["ranges"]:
            knob, value = parse_assignment(text)
            overrides.space_ranges[knob] = value
    except SpaceError as e:
        raise click.BadParameter(str(e), param_hint="--fix/--space") from e
    overrides.study = {
        "trials": opts["trials"],
        "name": opts["study_name"],
        "pruner": opts["pruner"],
        "confirm_rounds": opts["confirm_rounds"],
        "epochs_planned": opts["epochs_planned"],
        "seed": opts["seed"],
        "baselines": False if opts["no_baselines"] else None,
        "probe": False if opts["no_probe"] else None,
        "allow_mixed_hardware": True if opts["allow_mixed_hardware"] else None,
    }
    overrides.workload = {
        "kind": opts["workload"],
        "data": opts["data"],
        "data_format": opts["data_format"],
        "data_split": opts["data_split"],
        "img_size": opts["img_size"],
        "device": opts["device"],
        "vram_cap": opts["vram_cap"],
        "emulated_ms": opts["emulated_ms"],
        "emulated_mib": opts["emulated_mib"],
        "mosaic": opts["mosaic"],
        "skip_bad_samples": opts["skip_bad_samples"],
    }
    overrides.plan = {
        "epochs": opts["epochs"],
        "steps": opts["steps"],
        "windows_per_epoch": opts["windows_per_epoch"],
        "warmup_epochs": opts["warmup_epochs"],
        "warmup_steps": opts["warmup_steps"],
        "timeout_s": opts["trial_timeout"],
    }
    hardware = fingerprint()
    settings = resolve_settings(
        spec_file, overrides, hardware=hardware, storage=resolve_storage_url(opts["storage"])
    )

    from loadersearch.cli._progress import make_progress
    from loadersearch.cli.report import render_summary
    from loadersearch.hostlock import measurement_lock
    from loadersearch.report import publish, summarize, trial_hooks
    from loadersearch.search.study import run_study

    if no_wait:  # refuse now if the host is busy; later trials queue for it as usual
        with measurement_lock(wait=False):
            pass
    progress = make_progress(quiet=quiet, target=settings.trials)
    started = time.monotonic()
    try:
        outcome = run_study(
            settings, progress=progress, hardware=hardware, **trial_hooks(settings.storage)
        )
    finally:
        progress.close()
    elapsed = time.monotonic() - started
    publish(outcome.study)  # the study's note in optuna-dashboard, current after every run
    summary = summarize(outcome.study)
    render_summary(
        summary,
        storage=settings.storage,
        quiet=quiet,
        elapsed_s=elapsed,
        ran=outcome.ran,
        probe=outcome.probe.describe(),
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
