"""``loadersearch run``: the search. Parses and checks every option (before any storage is
opened), calls :func:`loadersearch.search._study.run_study`, renders progress and the answer."""

from __future__ import annotations

import sys
from typing import Any

import click

from loadersearch.cli._options import (
    allow_mixed_hardware_option,
    given_values,
    no_wait_option,
    option,
    pipeline_given,
    plan_options,
    storage_option,
    workload_options,
)
from loadersearch.integrations.ultralytics import UltralyticsSpec
from loadersearch.measure import MeasurePlan
from loadersearch.search import StudySettings
from loadersearch.workload import WorkloadSpec

_SPACE_HELP = (
    "Narrow a knob: num_workers=2:12, batch_size=8:64:8 (step) or pow2:8:128, "
    "prefetch_factor=1:4, pin_memory=true|false|both, cache=none,memmap. Repeatable."
)


@click.command("run")
@click.option(
    "--config",
    "spec_file",
    type=click.Path(dir_okay=False),
    help="Study spec TOML (e.g. studies/yolov4-tiny-voc.toml); options given here override it.",
)
@option(StudySettings, "trials")
@option(StudySettings, "study_name")
@storage_option
@workload_options
@click.option(
    "--fix",
    "fixes",
    multiple=True,
    metavar="KNOB=VALUE",
    help="Fix a knob, e.g. batch_size=16. Repeatable.",
)
@click.option("--space", "ranges", multiple=True, metavar="KNOB=RANGE", help=_SPACE_HELP)
@plan_options
@option(StudySettings, "pruner")
@option(StudySettings, "sampler")
@option(StudySettings, "confirm_rounds")
@option(StudySettings, "epochs_planned")
@click.option(
    "--search-cache",
    is_flag=True,
    help="Search the image cache too (none, ram, memmap; see --cache), as a knob beside the "
    "loader's: the answer may be 'memmap + 4 workers', printed with the cache's one-time build "
    "cost next to its per-epoch saving. The memmap cache is built once, before the first "
    "trial. Same as --space cache=all.",
)
@option(StudySettings, "baselines")
@option(StudySettings, "probe")
@option(StudySettings, "settle")
@option(StudySettings, "seed")
@allow_mixed_hardware_option
@no_wait_option
@option(UltralyticsSpec, "data")
@option(UltralyticsSpec, "imgsz")
@option(UltralyticsSpec, "cache")
@click.option("--quiet", "-q", is_flag=True, help="Only the answer.")
def run(spec_file: str | None, quiet: bool, no_wait: bool, **opts: Any) -> None:
    """Search the DataLoader settings with the most training images/s.

    Each trial measures one configuration in a fresh process; slow ones are pruned; every
    result is stored in the study database (open it with `loadersearch dashboard`). Re-running
    the same command resumes the study.

    A configuration that runs out of /dev/shm (a container's default 64 MiB) is infeasible
    (shm_full) and the search goes on; the run says at the start what the largest
    configuration needs there. Where memory is short the default search starts each
    configuration at the deepest prefetch_factor whose batches in flight fit half of /dev/shm
    and a tenth of the RAM (it says so), and tries deeper ones late. A trial measured while
    other processes used at least LOADERSEARCH_BUSY_SHARE (0.25) of the CPUs is measured
    again, or marked unreliable.

    \b
    Your own pipeline instead of YOLOv4-tiny (run where mypkg/ is):
      loadersearch run --dataset mypkg.data:make_dataset --model mypkg.model:make_model \\
                       --step mypkg.train:make_step --arg dataset.root=data

    \b
    An Ultralytics YOLO training (answered as model.train(...) and yolo train lines):
      loadersearch run --ultralytics data.yaml --model yolo11n.yaml --imgsz 640
    """
    from loadersearch._hardware import fingerprint
    from loadersearch.search import Overrides, SpaceError, parse_assignment, resolve_settings
    from loadersearch.storage import resolve_storage_url

    ultralytics = {k: opts.pop(k) for k in ("ultralytics_data", "imgsz", "ultralytics_cache")}
    if ultralytics["ultralytics_data"] is not None:
        from loadersearch.cli._ultralytics import run_ultralytics

        run_ultralytics(
            ultralytics["ultralytics_data"], opts, imgsz=ultralytics["imgsz"],
            cache=ultralytics["ultralytics_cache"], spec_file=spec_file, quiet=quiet,
            no_wait=no_wait,
        )  # fmt: skip
        return
    if any(v is not None for v in ultralytics.values()):
        raise click.UsageError("--imgsz and --ultralytics-cache need --ultralytics DATA.yaml.")
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
    if opts.pop("search_cache"):
        overrides.space_ranges.setdefault("cache", "all")
    storage = resolve_storage_url(opts.pop("storage"))
    overrides.study = given_values(opts, StudySettings)
    overrides.workload = given_values(opts, WorkloadSpec)
    overrides.pipeline = pipeline_given(opts)
    overrides.plan = given_values(opts, MeasurePlan)
    hardware = fingerprint()
    settings = resolve_settings(spec_file, overrides, hardware=hardware, storage=storage)

    from loadersearch.cli._study_run import run_and_render

    run_and_render(settings, quiet=quiet, no_wait=no_wait, hardware=hardware)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
