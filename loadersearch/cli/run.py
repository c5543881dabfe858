"""``loadersearch run``: the search. Parses and checks every option (before any storage is
opened), calls :func:`loadersearch.search.study.run_study`, renders progress and the answer."""

from __future__ import annotations

import sys
from typing import Any

import click

from loadersearch.cli._options import (
    PLAN_KEYS,
    WORKLOAD_KEYS,
    allow_mixed_hardware_option,
    given,
    no_wait_option,
    pipeline_given,
    plan_options,
    storage_option,
    study_option,
    workload_options,
)
from loadersearch.config import PRUNERS, SAMPLERS

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
@click.option(
    "--trials",
    type=click.IntRange(min=1),
    default=None,
    help="The most finished trials the study may hold in total (default 40): it stops "
    "earlier once its answer is settled (see --no-settle); a resumed study runs only the "
    "difference, and a larger --trials goes on past a settled answer.",
)
@study_option("Study name (default: from workload and hardware).")
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
@click.option(
    "--pruner",
    type=click.Choice(PRUNERS),
    default=None,
    help="wilcoxon (default): prune a trial only when it is clearly (>5%, p<0.1) slower than "
    "the best, window by window; median: Optuna's MedianPruner; none: no pruning.",
)
@click.option(
    "--sampler",
    type=click.Choice(SAMPLERS),
    default=None,
    help="structured (default): a search that knows the problem's shape (workers on a "
    "doubling ladder, the largest batch first, then the smaller knobs); tpe, gp: Optuna's TPE "
    "and Gaussian-process samplers; random. None measures a configuration twice.",
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
@click.option(
    "--search-cache",
    is_flag=True,
    help="Search the image cache too (none, ram, memmap; see --cache), as a knob beside the "
    "loader's: the answer may be 'memmap + 4 workers', printed with the cache's one-time build "
    "cost next to its per-epoch saving. The memmap cache is built once, before the first "
    "trial. Same as --space cache=all.",
)
@click.option("--no-baselines", is_flag=True, help="Do not enqueue the baselines first.")
@click.option(
    "--no-probe",
    is_flag=True,
    help="Do not probe the largest batch under the VRAM cap (over-cap trials become infeasible).",
)
@click.option(
    "--no-settle",
    is_flag=True,
    help="Spend the whole --trials budget, even once the answer is settled (by default the "
    "study stops when the last 12 trials did not beat the best by more than its measured "
    "noise, after at least 14 trials that cover the space). Same as settle = false in a "
    "spec's [study].",
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

    A configuration that runs out of /dev/shm (a container's default 64 MiB) is infeasible
    (shm_full) and the search goes on; the run says at the start what the largest
    configuration needs there. A trial measured while other processes used at least
    LOADERSEARCH_BUSY_SHARE (0.25) of the CPUs is measured again, or marked unreliable.

    \b
    Your own pipeline instead of YOLOv4-tiny (run where mypkg/ is):
      loadersearch run --dataset mypkg.data:make_dataset --model mypkg.model:make_model \\
                       --step mypkg.train:make_step --arg dataset.root=data
    """
    from loadersearch.hardware import fingerprint
    from loadersearch.search.overrides import make_overrides
    from loadersearch.search.settings import resolve_settings
    from loadersearch.search.space import SpaceError, parse_assignment
    from loadersearch.storage import resolve_storage_url

    fixed: dict[str, Any] = {}
    ranges: dict[str, Any] = {}
    try:
        for text in opts["fixes"]:
            knob, value = parse_assignment(text)
            fixed[knob] = value
        for text in opts["ranges"]:
            knob, value = parse_assignment(text)
            ranges[knob] = value
    except SpaceError as e:
        raise click.BadParameter(str(e), param_hint="--fix/--space") from e
    if opts.pop("search_cache"):
        ranges.setdefault("cache", "all")
    overrides = make_overrides(
        {
            "trials": opts["trials"],
            "name": opts["study_name"],
            "pruner": opts["pruner"],
            "sampler": opts["sampler"],
            "confirm_rounds": opts["confirm_rounds"],
            "epochs_planned": opts["epochs_planned"],
            "seed": opts["seed"],
        },
        baselines=not opts["no_baselines"],
        probe=not opts["no_probe"],
        settle=not opts["no_settle"],
        allow_mixed_hardware=opts["allow_mixed_hardware"],
        workload=given(opts, WORKLOAD_KEYS),
        pipeline=pipeline_given(opts),
        plan=given(opts, PLAN_KEYS),
        space_ranges=ranges,
        space_fixed=fixed,
    )
    hardware = fingerprint()
    settings = resolve_settings(
        spec_file, overrides, hardware=hardware, storage=resolve_storage_url(opts["storage"])
    )

    from loadersearch.cli._study_run import run_and_render

    run_and_render(settings, quiet=quiet, no_wait=no_wait, hardware=hardware)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(run())
