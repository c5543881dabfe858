"""``loadersearch bench``: measure one DataLoader configuration (no Optuna)."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from loadersearch._loader_config import LoaderConfig
from loadersearch._units import fmt_bytes
from loadersearch.cli._options import (
    PLAN_KEYS,
    WORKLOAD_KEYS,
    given,
    loader_options,
    pipeline_given,
    plan_options,
    study_plan,
    workload_options,
)
from loadersearch.errors import LoaderSearchError
from loadersearch.measure import MeasurePlan
from loadersearch.workload import WorkloadSpec

# Exit codes of bench (documented in --help).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_INFEASIBLE = 3


@click.command(
    "bench",
    epilog="""\b
Exit codes: 0 measured; 1 error (bad dataset or sample, a crash); 2 invalid options or
configuration; 3 infeasible (over the VRAM cap, /dev/shm full, a DataLoader worker killed, a
hang cut by --timeout, the process killed); 130 Ctrl-C, 143 SIGTERM (the measuring processes
are killed first). With --json the result is printed as JSON in every case, with the same exit
codes.

\b
/dev/shm: bench says its size and free space first, and what the configuration's batches in
flight need there (batch bytes x num_workers x prefetch_factor); a container's 64 MiB is
often too little (docker run --shm-size=8g or --ipc=host).
\b
A busy machine: the CPU other processes used while measuring is shown ("machine"), with a
warning when it was at least LOADERSEARCH_BUSY_SHARE (0.25) of the CPUs.""",
)
@workload_options
@loader_options(defaults=True)
@plan_options
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def bench(
    num_workers: int,
    batch_size: int,
    pin_memory: bool,
    prefetch_factor: int | None,
    persistent_workers: bool,
    start_method: str | None,
    as_json: bool,
    **opts: Any,
) -> None:
    """Measure one DataLoader configuration and print its throughput.

    The measurement runs in a fresh child process, with the plan a study's trial would have
    on this machine: an unmeasured warm-up epoch, then EPOCHS short epochs of STEPS batches
    (or more, sized to the batches in flight), each starting its workers as real training does. The
    objective is the projected images/s of one full epoch of the dataset:
    objective = N / (N / steady_rate + start_cost), N = images per full epoch.

    prefetch_factor and persistent_workers need --num-workers > 0: asking for them with 0
    workers is rejected (exit 2) rather than silently dropped, as PyTorch itself does.

    \b
    Example:
      loadersearch bench --workload loader --num-workers 2 --batch-size 32 --pin-memory
    """
    from loadersearch._hardware import fingerprint

    hardware = fingerprint()
    config, spec, plan = _inputs(
        num_workers, batch_size, pin_memory, prefetch_factor, persistent_workers, start_method,
        opts, hardware,
    )  # fmt: skip
    from rich.console import Console

    from loadersearch.measure import measure, prepare

    # As a study does: "auto" becomes the device this machine's fingerprint says (a GPU seen by
    # NVML means CUDA), and the child runs there or fails with the reason; the whole dataset
    # is checked (a bad one is refused here in one line, what --skip-bad-samples leaves out is
    # said), /dev/shm against what this configuration needs, a memmap cache built.
    ready = prepare(spec, config, hardware)
    spec = ready.workload
    workload = spec.kind
    shm = ready.shm
    err = Console(stderr=True)
    data = ready.data
    _print_preparation(ready, err)
    if as_json:
        result = measure(spec, config, plan, prepared=True)
    else:
        with err.status(f"measuring {config.label()} ({workload} workload)...") as status:

            def on_window(w) -> bool:  # noqa: ANN001
                status.update(
                    f"measuring {config.label()} ({workload}): window {w.index + 1}/"
                    f"{plan.n_windows}, {w.rate:,.1f} img/s"
                )
                return True

            result = measure(spec, config, plan, on_window=on_window, prepared=True)

    if as_json:
        click.echo(json.dumps({**result.to_dict(), "skipped_samples": data.to_dict()}, indent=2))
    else:
        render(result, spec, plan, Console())
    _print_after(result, shm, err)
    if not result.ok:
        if not as_json:
            click.echo(f"{result.status.upper()} ({result.reason}): {result.message}", err=True)
        sys.exit(EXIT_INFEASIBLE if result.status == "infeasible" else EXIT_ERROR)


def _inputs(
    num_workers: int,
    batch_size: int,
    pin_memory: bool,
    prefetch_factor: int | None,
    persistent_workers: bool,
    start_method: str | None,
    opts: dict[str, Any],
    hardware: Any,
) -> tuple[LoaderConfig, WorkloadSpec, MeasurePlan]:
    """The configuration, the workload and the plan the options say, checked: the plan a
    study would measure with on this machine (search.default_plan), with the options given."""
    from loadersearch.search import resolve_pipeline

    pipeline = resolve_pipeline({}, pipeline_given(opts))
    try:
        if start_method is not None and num_workers == 0:
            raise ValueError(
                f"start_method={start_method} needs num_workers > 0: with num_workers=0 no "
                "worker is started. Drop --start-method or add workers."
            )
        config = LoaderConfig(
            num_workers=num_workers,
            batch_size=batch_size,
            pin_memory=pin_memory,
            prefetch_factor=prefetch_factor,
            persistent_workers=persistent_workers,
            start_method=start_method,
        )
        spec = WorkloadSpec(**given(opts, WORKLOAD_KEYS), pipeline=pipeline)
    except ValueError as e:
        raise LoaderSearchError(f"invalid configuration: {e}") from e
    return config, spec, study_plan(spec, hardware, given(opts, PLAN_KEYS))


def _print_preparation(ready, err) -> None:  # noqa: ANN001
    """What the preparation found (the data, /dev/shm, the caches), on stderr."""
    data, shm = ready.data, ready.shm
    if data.describe():
        err.print(f"note: {data.describe()}", soft_wrap=True, highlight=False)
    err.print(shm.line(), soft_wrap=True, highlight=False)
    if shm.warning():
        err.print(f"[yellow]warning:[/] {shm.warning()}", soft_wrap=True, highlight=False)
    for cache in ready.caches:
        err.print(f"note: {cache.describe()}", soft_wrap=True, highlight=False)


def _print_after(result, shm, err) -> None:  # noqa: ANN001
    """After the figures, on stderr: /dev/shm's measured peak against the estimate, and a
    warning when the machine was busy while it measured."""
    if result.ok and shm.need_bytes and result.shm_peak_bytes is not None:
        err.print(
            f"/dev/shm: {fmt_bytes(result.shm_peak_bytes)} at the measured peak (sampled, "
            f"machine-wide), against the estimate of {fmt_bytes(shm.need_bytes)} with every "
            "prefetched batch waiting",
            soft_wrap=True,
            highlight=False,
        )
    if result.busy_host:
        err.print(
            f"[yellow]warning:[/] measured on a busy machine: other processes used "
            f"{result.outside_load or 0:.2f} CPUs ({100 * (result.outside_share or 0):.0f} % of "
            "them; steal "
            f"{100 * (result.steal_share or 0):.1f} %) while it measured, so this number may be "
            "low. Measure again when the machine is quieter (LOADERSEARCH_BUSY_SHARE sets the "
            "share that warns).",
            soft_wrap=True,
            highlight=False,
        )


def render(result, spec: WorkloadSpec, plan: MeasurePlan, console) -> None:  # noqa: ANN001
    """A readable summary of a :class:`~loadersearch.measure._result.MeasureResult`."""
    from rich.table import Table

    r = result
    title = f"loadersearch bench: {r.workload} workload"
    if r.emulated:
        title += " [bold yellow](EMULATED accelerator)[/]"
    if spec.storage_label():
        title += f" [bold yellow]({spec.storage_label()})[/]"
    console.print(f"[bold]{title}[/]")
    info = Table.grid(padding=(0, 2))
    info.add_column(style="bold")
    info.add_column()
    info.add_row("device", r.device)
    size = f", {r.img_size} px" if r.img_size else ""
    if spec.pipeline is not None:
        info.add_row("pipeline", spec.pipeline.describe())
    else:
        info.add_row("data", f"{spec.data or 'embedded default dataset'}{size}")
    start = f" (workers start by {r.config.start_method})" if r.config.start_method else ""
    info.add_row("config", f"{r.config.label()}{start}   {r.config.snippet()}")
    steps = r.epoch_steps or plan.steps
    target = plan.sized_steps(r.config, r.dataset_images // r.config.batch_size)
    sized = f" (sized to the configuration; --steps {plan.steps})" if steps != plan.steps else ""
    extra = (
        f" + {r.extra_epochs} more for the precision (--precision {plan.precision:g})"
        if r.extra_epochs
        else ""
    )
    info.add_row(
        "plan",
        f"{plan.warmup_epochs} warm-up x {plan.warmup_steps_for(r.config, target)} + "
        f"{plan.epochs} epochs{extra} x {steps} steps{sized}, "
        f"{plan.windows_per_epoch} windows/epoch",
    )
    status = "[green]OK[/]" if r.ok else f"[red]{r.status.upper()}[/] ({r.reason}): {r.message}"
    info.add_row("status", status)
    if r.ok:
        _add_figures(info, r, plan)
    if r.outside_load is not None:
        busy = " [yellow]BUSY[/]" if r.busy_host else ""
        info.add_row(
            "machine",
            f"other processes used {r.outside_load:.2f} CPUs "
            f"({100 * (r.outside_share or 0):.0f} %) while measuring, steal "
            f"{100 * (r.steal_share or 0):.1f} %{busy}",
        )
    _add_memory(info, r, spec)
    info.add_row(
        "time",
        f"overhead {r.overhead_s:.1f} s (process start, imports, dataset, model: not in the "
        f"throughput), warm-up {r.warmup_s:.1f} s, wall {r.wall_s:.1f} s",
    )
    for note in r.notes:
        info.add_row("note", note)
    console.print(info)
    if r.ranks:
        _render_ranks(r.ranks, console)
    if r.windows:
        _render_windows(r.windows, console)


def _add_figures(info, r, plan: MeasurePlan) -> None:  # noqa: ANN001
    """The rows of a measurement that succeeded: its rates, the objective and its precision."""
    n = r.dataset_images
    info.add_row("steady rate", f"{r.steady_rate:,.1f} img/s")
    info.add_row("start cost", f"{r.start_cost_s:.3f} s per epoch (beyond the steady state)")
    info.add_row(
        "objective",
        f"[bold]{r.objective:,.1f} img/s[/] for a full epoch of {n:,} images: "
        f"{n:,} / ({n:,} / {r.steady_rate:,.1f} + {r.start_cost_s:.3f}) "
        f"= {n:,} / {r.epoch_time_s:.2f} s",
    )
    if r.precision is not None:
        info.add_row(
            "precision",
            f"+/-{100 * r.precision:.1f} % (90% confidence interval of the epoch time, "
            f"from the spread of the {plan.epochs + r.extra_epochs} measured epochs)",
        )
    info.add_row("window CV", f"{100 * r.window_cv:.1f} %")
    info.add_row("data wait", f"{100 * r.wait_fraction:.0f} % of measured time")
    cpu = f"{r.cpu_util_mean:.0f} % of one core" if r.cpu_util_mean is not None else "n/a"
    info.add_row("CPU", f"{cpu} (trainer + workers)")


def _add_memory(info, r, spec: WorkloadSpec) -> None:  # noqa: ANN001
    """The rows of what the measurement held in memory: RSS, /dev/shm, VRAM, CUDA's peaks."""
    if r.peak_rss_bytes is not None or r.peak_vram_bytes is not None:
        vram = fmt_bytes(r.peak_vram_bytes)
        if r.emulated:
            vram += " (emulated)"
        cap = fmt_bytes(spec.vram_cap) if spec.vram_cap else "none"
        info.add_row(
            "memory",
            f"peak RSS {fmt_bytes(r.peak_rss_bytes)} (trainer + workers, summed), "
            f"/dev/shm +{fmt_bytes(r.shm_peak_bytes)}, VRAM peak {vram}, cap {cap}",
        )
        gpu = f"{r.gpu_util_mean:.0f} %" if r.gpu_util_mean is not None else "n/a"
        info.add_row("NVML", f"{r.nvml}; GPU util {gpu}; process {fmt_bytes(r.nvml_peak_bytes)}")
    if r.peak_allocated_bytes is not None or r.cuda_overhead_bytes is not None:
        fraction = f"{r.memory_fraction:.4f}" if r.memory_fraction is not None else "none"
        info.add_row(
            "CUDA memory",
            f"peaks while measuring: allocated {fmt_bytes(r.peak_allocated_bytes)}, reserved "
            f"{fmt_bytes(r.peak_reserved_bytes)}, NVML process {fmt_bytes(r.nvml_peak_bytes)}; "
            f"outside the allocator {fmt_bytes(r.cuda_overhead_bytes)}; allocator fraction "
            f"{fraction}; retries {r.alloc_retries}, OOMs recovered {r.alloc_ooms}",
        )


def _render_windows(windows: list, console) -> None:  # noqa: ANN001
    """Every measured window: its images, seconds, rate and where its time went."""
    from rich.table import Table

    t = Table(title="windows", title_justify="left")
    for col in (
        "window",
        "epoch",
        "images",
        "seconds",
        "img/s",
        "wait",
        "compute",
        "h2d",
        "start",
    ):
        t.add_column(col, justify="right")
    for w in windows:
        t.add_row(
            str(w.index),
            str(w.epoch),
            str(w.images),
            f"{w.seconds:.3f}",
            f"{w.rate:,.1f}",
            f"{w.wait_s:.3f}",
            f"{w.compute_s:.3f}",
            f"{w.h2d_s:.4f}",
            f"{w.start_s:.3f}" if w.start_s else "",
        )
    console.print(t)


def _render_ranks(ranks: list[dict], console) -> None:  # noqa: ANN001
    """Each rank's own figures: the one that waits longest for data starves the others."""
    from rich.table import Table

    t = Table(title="ranks (each with its own DataLoader)", title_justify="left")
    for col in ("rank", "img/s", "data wait", "VRAM peak", "RSS (rank + workers)", "CPU"):
        t.add_column(col, justify="right")
    for rank in ranks:
        cpu = rank.get("cpu_util_mean")
        t.add_row(
            str(rank["rank"]),
            f"{rank['steady_rate']:,.1f}",
            f"{100 * rank['wait_fraction']:.0f} %",
            fmt_bytes(rank.get("peak_vram_bytes")),
            fmt_bytes(rank.get("peak_rss_bytes")),
            f"{cpu:.0f} %" if cpu is not None else "n/a",
        )
    console.print(t)
