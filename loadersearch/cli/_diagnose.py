"""``loadersearch diagnose``: why the accelerator idles, and what would help, measured."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from loadersearch._loader_config import LoaderConfig
from loadersearch.cli._options import (
    PLAN_KEYS,
    WORKLOAD_KEYS,
    given,
    keys_of,
    loader_options,
    pipeline_given,
    pipeline_trust,
    pipeline_trust_options,
    plan_options,
    storage_option,
    study_option,
    study_plan,
    workload_options,
)
from loadersearch.errors import LoaderSearchError
from loadersearch.workload import WorkloadSpec

_LOADER_KEYS = tuple(k for k in keys_of(LoaderConfig) if k != "start_method")


@click.command(
    "diagnose",
    epilog="""\b
Exit codes: 0 diagnosed; 1 a measurement it needs failed (the verdict is "unknown"), or an
error; 2 invalid options; 130 Ctrl-C (the measuring processes are killed first).""",
)
@workload_options
@loader_options(
    defaults=False,
    exclude=("start_method",),
    help={
        "num_workers": "Diagnose this configuration instead of the study's winner (the other "
        "loader options then default as in `bench`)."
    },
)
@study_option("The study whose confirmed winner (and workload) is diagnosed, when no loader "
              "option is given (default: the only study in the storage).")  # fmt: skip
@storage_option
@pipeline_trust_options
@plan_options
@click.option(
    "--max-workers",
    type=click.IntRange(min=1),
    default=None,
    help="Largest worker count of the scaling curve [default: 2 x CPUs, at most 32].",
)
@click.option(
    "--target-rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="What-if: an accelerator rate in images/s (e.g. 3000): how many cores the measured "
    "per-core pipeline rate needs to feed it.",
)
@click.option(
    "--remedies/--no-remedies",
    default=True,
    show_default=True,
    help="Measure the remedies the verdict suggests (more workers, a larger prefetch_factor, "
    "no mosaic).",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default="diagnosis",
    show_default=True,
    help="Directory for diagnosis.json, timelines.png/.html and scaling.png.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the diagnosis as JSON.")
def diagnose(
    study_name: str | None,
    storage: str | None,
    max_workers: int | None,
    target_rate: float | None,
    remedies: bool,
    out_dir: str,
    as_json: bool,
    **opts: Any,
) -> None:
    """Why is my GPU idle? Measure where the time goes, and what would help.

    For one configuration (the study's confirmed winner, or the one given with --num-workers,
    --batch-size, ...), four measurements, each in a fresh process like `bench`:

    \b
      ceiling  the step fed one batch kept on the device: the most the model can take
      warm     the full pipeline, the dataset in the page cache: the prep stall (decode,
               augmentation) is the difference to the ceiling
      cold     the full pipeline, the dataset's pages evicted (posix_fadvise, checked with
               mincore) before each epoch: the fetch stall (storage) is the difference
      scaling  the loader alone with 1..N workers: how the pipeline scales with cores

    It prints a verdict (compute-bound, prep-bound or fetch-bound) with its figures, measures
    each remedy it suggests, and answers what-ifs: cores needed to feed the ceiling (and
    --target-rate), RAM a cache of the dataset would need. Timelines (data-wait per step, CPU
    per core, disk reads, GPU utilisation via NVML) are written to --out as PNG and HTML.

    A study of your own pipeline is diagnosed on that pipeline: its references are shown and
    imported only from modules under the working directory or a --pipeline-path directory
    (--trust-pipeline: from anywhere but the standard library), as `worker` does. A
    diagnosis of another workload than the study's is not stored in the study.

    \b
    Examples:
      loadersearch diagnose                          the study's winner
      loadersearch diagnose --num-workers 0 --batch-size 16 --mosaic
      loadersearch diagnose --workload emulated --emulated-ms 1,0.2 --target-rate 3000
    """
    from loadersearch._hardware import fingerprint
    from loadersearch.diagnose import store_diagnosis
    from loadersearch.measure import prepare
    from loadersearch.search import describe_spec

    err_console = _console(stderr=True)
    target, spec = _what_to_diagnose(study_name, storage, opts, err_console)
    hardware = fingerprint()
    plan = study_plan(spec, hardware, given(opts, PLAN_KEYS))
    # As bench does, but each of the diagnosis's measurements readies its own cache.
    ready = prepare(spec, None, hardware, caches=())
    spec = ready.workload
    if ready.data.describe():
        err_console.print(f"note: {ready.data.describe()}", soft_wrap=True, highlight=False)

    from loadersearch._hostlock import measurement_lock
    from loadersearch.diagnose import diagnose as run_diagnosis
    from loadersearch.diagnose import write_outputs

    config = target.config
    with measurement_lock(wait=True), err_console.status("diagnosing...") as status:
        d = run_diagnosis(
            spec,
            config,
            plan,
            max_workers=max_workers,
            target_rate=target_rate,
            remedies=remedies,
            on_phase=lambda text: status.update(f"diagnosing {config.label()}: {text}"),
        )
    from loadersearch._limits import naming

    try:
        written = write_outputs(d, out_dir)
    except OSError as e:
        raise naming(e, out_dir) from None
    not_stored = store_diagnosis(d, target, spec, hardware, storage)
    if not_stored:  # a diagnosis of another workload is not the study's
        err_console.print(f"note: {not_stored}", soft_wrap=True, highlight=False, markup=False)
    if as_json:
        click.echo(json.dumps(d.to_dict(), indent=1))
    else:
        render(d, written, _console(), workload=describe_spec(spec, hardware))
    if d.verdict == "unknown":
        sys.exit(1)


def _console(stderr: bool = False):  # noqa: ANN202 - rich.console.Console
    from rich.console import Console

    return Console(stderr=stderr)


def _what_to_diagnose(
    study_name: str | None, storage: str | None, opts: dict[str, Any], err_console: Any
) -> tuple[Any, WorkloadSpec]:
    """The configuration to diagnose (given, or the study's winner: said on stderr) and the
    workload to measure it on (the options over the study's)."""
    from loadersearch.diagnose import Target, study_pipeline
    from loadersearch.report import winner_target
    from loadersearch.search import resolve_pipeline

    trust = pipeline_trust(opts)
    loader = given(opts, _LOADER_KEYS)
    pipeline = resolve_pipeline({}, pipeline_given(opts))
    workload_in = given(opts, WORKLOAD_KEYS)

    def show(line: str) -> None:
        err_console.print(line, soft_wrap=True, highlight=False, markup=False)

    try:
        if loader:  # the others as LoaderConfig's defaults, as bench's
            target = Target(LoaderConfig(**loader))
        else:
            target = winner_target(study_name, storage)
            err_console.print(target.said, soft_wrap=True, highlight=False)
        base = {k: v for k, v in target.workload.items() if k != "pipeline"}
        if pipeline is None:  # the study's own, imported only if trusted
            pipeline = study_pipeline(target, trust, storage, show)
        spec = WorkloadSpec(**{**base, **workload_in}, pipeline=pipeline)
    except ValueError as e:
        raise LoaderSearchError(f"invalid configuration: {e}") from e
    return target, spec


def render(d, written: list[str], console, workload: str = "") -> None:  # noqa: ANN001
    """The verdict, its figures, the remedies and the files written; ``workload``: what was
    measured, in words."""
    from rich.table import Table

    color = {"compute-bound": "green", "prep-bound": "yellow", "fetch-bound": "red"}
    emulated = (
        " [bold yellow](EMULATED accelerator)[/]" if d.workload.get("kind") == "emulated" else ""
    )
    console.print(
        f"[bold]loadersearch diagnose[/]: {d.config.label()} on {d.device}{emulated}",
        soft_wrap=True,
    )
    if workload:
        console.print(f"workload: {workload}", soft_wrap=True, highlight=False, markup=False)
    console.print(
        f"[bold {color.get(d.verdict, 'white')}]{d.summary}[/]", soft_wrap=True, highlight=False
    )
    table = Table(title="measurements (images/s, projected full epoch)", title_justify="left")
    for col in ("measurement", "config", "img/s", "data wait", "window CV", "outside CPU"):
        table.add_column(col, justify="left" if col in ("measurement", "config") else "right")
    for m in d.measurements.values():
        if m.name.startswith("loader-w"):
            continue
        rate = f"{m.rate:,.1f}" if m.ok else m.status
        table.add_row(
            m.name, m.config.label(), rate, f"{100 * m.wait_fraction:.0f}%",
            f"{100 * m.window_cv:.1f}%",
            "" if m.outside_share is None
            else f"{100 * m.outside_share:.0f}%" + (" busy" if m.busy_host else ""),
        )  # fmt: skip
    console.print(table)
    console.print(
        "ceiling: the step fed one batch kept on the device; warm: the full pipeline, the "
        "dataset in the page cache; cold: its pages evicted before each epoch",
        soft_wrap=True,
        highlight=False,
    )
    for line in d.details:
        console.print(f"- {line}", soft_wrap=True, highlight=False)
    for note in d.notes:
        console.print(f"[yellow]note:[/] {note}", soft_wrap=True, highlight=False)
    console.print(f"({d.seconds:.0f} s) written: {', '.join(written)}", soft_wrap=True)
