"""Options several commands share, defined once so their names and help stay the same."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import click

from loadersearch.config import (
    CACHES,
    DEVICES,
    FORMATS,
    OPTIMIZERS,
    PIPELINE_PARTS,
    WORKLOADS,
    MeasurePlan,
    WorkloadSpec,
    parse_size,
)

_PLAN = MeasurePlan()
_SPEC = WorkloadSpec()

storage_option = click.option(
    "--storage",
    help="Optuna storage URL (default $LOADERSEARCH_STORAGE or "
    "sqlite:///studies/loadersearch.db); postgresql+psycopg://USER@HOST/DB or "
    "mysql+pymysql://... for a study shared by several machines.",
)


def study_option(help: str = "Study name (default: the only one in the storage).", **kw):
    return click.option("--study", "study_name", help=help, **kw)


allow_mixed_hardware_option = click.option(
    "--allow-mixed-hardware",
    is_flag=True,
    help="Join a study created on another hardware class (GPU model, GPU or CPU count) "
    "anyway; each trial records its host and the differences.",
)

no_wait_option = click.option(
    "--no-wait",
    is_flag=True,
    help="Exit at once if another loadersearch measurement is running on this host, "
    "instead of waiting for it.",
)


def pipeline_trust(opts: dict[str, Any]) -> Any:
    """The :class:`~loadersearch.workload.refs.PipelineTrust` of ``--pipeline-path`` and
    ``--trust-pipeline``, removed from ``opts``."""
    from loadersearch.workload.refs import PipelineTrust

    return PipelineTrust(
        paths=tuple(opts.pop("pipeline_paths", ()) or ()),
        everything=bool(opts.pop("trust_pipeline", False)),
    )


class SizeType(click.ParamType):
    """A size such as 6GiB, 6G or 6000MiB (see :func:`loadersearch.config.parse_size`)."""

    name = "SIZE"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class PairType(click.ParamType):
    """Two numbers separated by a comma, e.g. ``20,2``."""

    name = "A,B"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if isinstance(value, tuple):
            return value
        try:
            a, b = (float(x) for x in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not two numbers separated by a comma, e.g. 20,2", param, ctx)
        if not (math.isfinite(a) and math.isfinite(b)) or min(a, b) < 0:
            # float() reads "nan" and "inf"; a step time or a size must be a real amount.
            self.fail(
                f"{value!r}: both numbers must be finite and not negative, e.g. 20,2", param, ctx
            )
        return (a, b)


def _apply(options: list[Callable]) -> Callable:
    def decorate(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


pipeline_trust_options = _apply(
    [
        click.option(
            "--pipeline-path",
            "pipeline_paths",
            multiple=True,
            type=click.Path(exists=True, file_okay=False),
            metavar="DIR",
            help="A directory whose modules a study's stored pipeline may import, besides the "
            "working directory (a database holds data, not code: its references are imported "
            "only from your own code). Repeatable.",
        ),
        click.option(
            "--trust-pipeline",
            is_flag=True,
            help="Import the study's stored pipeline from wherever it resolves, installed "
            "packages too (never the standard library): only for a database you trust, since "
            "whoever writes to it chooses what runs. Prints what it trusts.",
        ),
    ]
)

# What a measurement trains on (WorkloadSpec), shared by run and bench. Every default is None
# ("not given"): a study spec file or WorkloadSpec's own default applies.
workload_options = _apply(
    [
        click.option(
            "--workload",
            "kind",
            type=click.Choice(WORKLOADS),
            default=None,
            help="train: YOLOv4-tiny (or your --model/--step) forward+backward+step on this "
            "machine's device (default); loader: the data pipeline alone; emulated: a "
            "sleeping stand-in accelerator (labelled EMULATED).",
        ),
        click.option(
            "--data",
            type=click.Path(),
            default=None,
            help="Dataset directory (YOLO, VOC or COCO layout). Default: the built-in "
            "generated dataset.",
        ),
        click.option(
            "--data-format",
            "--format",
            "data_format",
            type=click.Choice(FORMATS),
            default=None,
            help="Dataset layout; detected from the directory when omitted.",
        ),
        click.option(
            "--data-split",
            default=None,
            help="Split to use when the dataset holds several (e.g. train, train2017).",
        ),
        click.option(
            "--img-size",
            type=click.IntRange(min=32),
            default=None,
            help="Network input in pixels (multiple of 32). Default: 416, or 128 for train "
            "on a CPU.",
        ),
        click.option(
            "--device",
            type=click.Choice(DEVICES),
            default=None,
            help="Where the train and loader workloads run (default auto: CUDA when present).",
        ),
        click.option(
            "--vram-cap",
            type=SizeType(),
            default=None,
            help="Device memory a configuration may use, e.g. 6GiB, 6G, 6000MiB.",
        ),
        click.option(
            "--emulated-ms",
            type=PairType(),
            default=None,
            help="Emulated step time A,B: A + B*batch ms [default: "
            f"{_SPEC.emulated_ms[0]:g},{_SPEC.emulated_ms[1]:g}].",
        ),
        click.option(
            "--emulated-mib",
            type=PairType(),
            default=None,
            help="Emulated device memory M0,M1: M0 + M1*batch MiB [default: "
            f"{_SPEC.emulated_mib[0]:g},{_SPEC.emulated_mib[1]:g}].",
        ),
        click.option(
            "--emulated-io-ms",
            type=click.FloatRange(min=0),
            default=None,
            metavar="MS",
            help="Emulated storage latency: each sample's read first waits MS milliseconds "
            "(a sleep, no CPU), as on network storage or a hard disk, so that many workers "
            "pay off even on a few cores; results are labelled EMULATED [default: 0, none].",
        ),
        click.option(
            "--emulated-io-cv",
            type=click.FloatRange(min=0),
            default=None,
            metavar="CV",
            help="Spread of the emulated storage latency: each file's wait is drawn once, "
            "lognormal with mean --emulated-io-ms and this coefficient of variation (2: most "
            "reads fast, a few many times slower, as a hard disk's seeks) [default: 0, "
            "every read the same].",
        ),
        click.option(
            "--mosaic/--no-mosaic",
            default=None,
            help="4-image mosaic augmentation (p=0.5) [default: off].",
        ),
        click.option(
            "--skip-bad-samples",
            is_flag=True,
            default=None,
            help="Leave out unreadable samples (counted) instead of stopping.",
        ),
        click.option(
            "--cache",
            type=click.Choice(CACHES),
            default=None,
            help="Where the built-in dataset's images come from [default: none, each file "
            "read and decoded per sample]. ram: the encoded files held in shared memory (no "
            "storage reads; decoding still per sample); memmap: decoded once and resized to "
            "fit --img-size into a memory-mapped file, built once per dataset and size in "
            "the cache directory and reused (augmentation still per sample).",
        ),
        click.option(
            "--cache-dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Where memmap caches are kept [default: $LOADERSEARCH_CACHE_DIR, else "
            "$XDG_CACHE_HOME/loadersearch or ~/.cache/loadersearch; never inside the dataset "
            "unless given so].",
        ),
        click.option(
            "--optimizer",
            type=click.Choice(OPTIMIZERS),
            default=None,
            help=f"Optimizer of the train workload [default: {_SPEC.optimizer}].",
        ),
        click.option(
            "--gpus",
            type=click.IntRange(min=1),
            default=None,
            help="Ranks of a DistributedDataParallel job on this machine, one process per GPU "
            "(NCCL), each with its own DataLoader: num_workers and batch_size are per rank and "
            "the throughput is the job's [default: 1, no DDP]. On a machine without GPUs (or "
            "with --device cpu), CPU ranks with gloo, for testing.",
        ),
        # Your own pipeline (PipelineSpec): references the measuring process imports.
        click.option(
            "--dataset",
            "pipeline_dataset",
            metavar="MODULE:NAME",
            default=None,
            help="Your own dataset instead of YOLOv4-tiny's: a callable returning a map-style "
            "Dataset, e.g. mypkg.data:make_dataset (the working directory is on the "
            "measuring process's path).",
        ),
        click.option(
            "--model",
            "pipeline_model",
            metavar="MODULE:NAME",
            default=None,
            help="With --dataset: a callable returning your nn.Module (moved to the device).",
        ),
        click.option(
            "--loss",
            "pipeline_loss",
            metavar="MODULE:NAME",
            default=None,
            help="With --model, the default step (forward, backward, optimizer step; AMP on "
            "CUDA) on (inputs, targets) batches: a loss class (torch.nn:CrossEntropyLoss) or "
            "function.",
        ),
        click.option(
            "--step",
            "pipeline_step",
            metavar="MODULE:NAME",
            default=None,
            help="Your step builder instead: make_step(model, device) returns step(batch), "
            "called once per batch (already on the device).",
        ),
        click.option(
            "--collate",
            "pipeline_collate",
            metavar="MODULE:NAME",
            default=None,
            help="Your collate_fn (default: PyTorch's default_collate).",
        ),
        click.option(
            "--arg",
            "pipeline_args",
            multiple=True,
            metavar="PART.KEY=VALUE",
            help="A keyword argument of a pipeline part, e.g. dataset.root=data/pets or "
            "model.num_classes=37 (VALUE is read as JSON when it parses, else as text). "
            "Repeatable.",
        ),
    ]
)
WORKLOAD_KEYS = (
    "kind",
    "data",
    "data_format",
    "data_split",
    "img_size",
    "device",
    "vram_cap",
    "emulated_ms",
    "emulated_mib",
    "emulated_io_ms",
    "emulated_io_cv",
    "mosaic",
    "skip_bad_samples",
    "optimizer",
    "gpus",
    "cache",
    "cache_dir",
)


def pipeline_given(opts: dict[str, Any]) -> dict[str, Any]:
    """The pipeline options that were given, as PipelineSpec fields, removed from ``opts``."""
    found = {part: opts.pop(f"pipeline_{part}", None) for part in PIPELINE_PARTS}
    out: dict[str, Any] = {k: v for k, v in found.items() if v is not None}
    for text in opts.pop("pipeline_args", ()) or ():
        part, key, value = parse_arg(text)
        out.setdefault(f"{part}_kwargs", {})[key] = value
    return out


def parse_arg(text: str) -> tuple[str, str, Any]:
    """``"dataset.root=data"`` -> ``("dataset", "root", "data")``; the value as JSON when it
    parses (``10``, ``true``, ``[1, 2]``), else as text."""
    name, sep, raw = text.partition("=")
    part, dot, key = name.strip().partition(".")
    if not sep or not dot or part not in PIPELINE_PARTS or not key.isidentifier():
        raise click.BadParameter(
            f"{text!r} is not PART.KEY=VALUE with PART one of {', '.join(PIPELINE_PARTS)}, "
            "e.g. dataset.root=data/pets or model.num_classes=37.",
            param_hint="--arg",
        )
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return part, key, value


# How long a measurement runs (MeasurePlan), shared by run and bench; None = not given.
plan_options = _apply(
    [
        click.option(
            "--epochs",
            type=click.IntRange(min=1),
            default=None,
            help="Measured short epochs, after the warm-up.",
        ),
        click.option(
            "--steps", type=click.IntRange(min=1), default=None, help="Batches per short epoch."
        ),
        click.option(
            "--windows-per-epoch",
            "--windows",
            "windows_per_epoch",
            type=click.IntRange(min=1),
            default=None,
            help="Measurement windows per short epoch: the steps the pruner compares.",
        ),
        click.option(
            "--warmup-epochs",
            type=click.IntRange(min=0),
            default=None,
            help=f"Unmeasured warm-up epochs [default: {_PLAN.warmup_epochs}].",
        ),
        click.option(
            "--warmup-steps",
            type=click.IntRange(min=1),
            default=None,
            help="Batches per warm-up epoch.",
        ),
        click.option(
            "--in-flight-rounds",
            type=click.IntRange(min=0),
            default=None,
            help="Size each measured epoch to its configuration: with W workers and prefetch "
            "factor P, at least ROUNDS x W x P + W steps (the batches in flight, ROUNDS times "
            "over), so that every worker count has a steady part; 0 = --steps for every "
            f"configuration [default: {_PLAN.in_flight_rounds}].",
        ),
        click.option(
            "--epoch-limit",
            "epoch_limit_s",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help="Seconds a sized epoch may take at the warm-up's rate; longer ones are cut "
            f"(never below --steps) [default: {_PLAN.epoch_limit_s:g}].",
        ),
        click.option(
            "--precision",
            type=click.FloatRange(min=0, max=1, max_open=True),
            default=None,
            help="Measure until the projected epoch time is known this well: the relative "
            "half-width of its 90% confidence interval, from the spread of the measured "
            "epochs; more epochs follow while it is wider, within --extend-limit seconds. "
            "Storage whose reads vary a lot needs it. 0 = exactly --epochs [default: 0.05].",
        ),
        click.option(
            "--extend-limit",
            "extend_limit_s",
            type=click.FloatRange(min=0),
            default=None,
            help="Seconds of measured epochs a measurement may add for --precision, and never "
            "more than 3x its planned epochs' time [default: 20; a study where the CPU does "
            "the heavy work: 8].",
        ),
        click.option(
            "--timeout",
            "--trial-timeout",
            "timeout_s",
            type=click.FloatRange(min=0, min_open=True),
            default=None,
            help=f"Wall-clock limit of one measurement in seconds, start-up included "
            f"[default: {_PLAN.timeout_s:g}].",
        ),
    ]
)
PLAN_KEYS = (
    "epochs",
    "steps",
    "windows_per_epoch",
    "warmup_epochs",
    "warmup_steps",
    "timeout_s",
    "in_flight_rounds",
    "epoch_limit_s",
    "precision",
    "extend_limit_s",
)


def given(opts: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The options among ``keys`` that were given (not None), removed from ``opts``."""
    found = {k: opts.pop(k) for k in keys if k in opts}
    return {k: v for k, v in found.items() if v is not None}
