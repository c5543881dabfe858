"""The five DataLoader knobs, the workload a measurement runs, and how long it measures.

These dataclasses are the contract between layers: the search builds a :class:`LoaderConfig`
from an Optuna trial, the measurement runs it against a :class:`WorkloadSpec` for a
:class:`MeasurePlan`. All of them are plain data that survive a trip through JSON, because
they cross a process boundary (parent -> measuring child).
"""

from __future__ import annotations

import dataclasses
import math
import multiprocessing
import sys
from dataclasses import dataclass, field
from typing import Any, TypeVar

from loadersearch.options import (
    DIR,
    FLAG,
    NUMBER,
    PAIR,
    PATH,
    REF,
    SIZE,
    TABLE,
    WHOLE,
    check_fields,
    json_kwargs,
    opt,
)
from loadersearch.options import check_ref as check_ref  # the REF kind's check
from loadersearch.options import parse_size as parse_size  # the SIZE kind's reader

# The one list of each option's names: the CLI's choices, spec checks and messages use these.
WORKLOADS = ("train", "loader", "emulated")
DEVICES = ("auto", "cuda", "cpu")
OPTIMIZERS = ("sgd", "adamw")
FORMATS = ("yolo", "voc", "coco")  # dataset layouts
CACHES = ("none", "ram", "memmap")  # where the images come from (WorkloadSpec.cache)
PRUNERS = ("wilcoxon", "median", "none")
SAMPLERS = ("structured", "tpe", "gp", "random")  # the first is the default (tabular benchmark)
DEFAULT_PREFETCH = 2  # PyTorch's prefetch_factor when workers are used and none is given
# How measure.projection turns short epochs into a full epoch's time, stored with each study
# so that trials projected one way are not ranked against trials projected another: 1, the
# steady rate from the second group of batches to the last (the loader's drain in the rate);
# 2, from the first group's last arrival to the group before the drain (the drain and the
# start are per-epoch costs).
PROJECTION_METHOD = 2
DEFAULT_PRECISION = 0.05  # a study's measurements: the epoch time to +/-5% (90% confidence)
START_METHODS = ("fork", "forkserver", "spawn")  # how DataLoader workers are started
# Python's own default on this platform (the first listed is the default, per its docs): what a
# DataLoader without multiprocessing_context uses. Python 3.14 changes it to forkserver on Linux.
PLATFORM_START_METHOD = multiprocessing.get_all_start_methods()[0]
# The start method loadersearch measures unless told otherwise: fork on Linux (the fastest
# worker start-up, and what training scripts have used for years), pinned explicitly so that a
# Python whose default is forkserver measures the same thing; elsewhere the platform's default.
DEFAULT_START_METHOD = "fork" if sys.platform.startswith("linux") else PLATFORM_START_METHOD
PIPELINE_PARTS = ("dataset", "collate", "model", "loss", "step")  # a user pipeline's parts

def check_start_method(name: str) -> str:
    """``name`` when it is a start method this platform has, else a ValueError naming them."""
    available = [m for m in START_METHODS if m in multiprocessing.get_all_start_methods()]
    if name not in available:
        raise ValueError(
            f"Unknown start method {name!r}; choose one of {', '.join(available)} "
            "(how DataLoader workers are started: multiprocessing_context)."
        )
    return name


class _Record:
    """A dataclass that survives JSON: ``from_dict`` leaves out keys it does not know (a study
    stored by another version)."""

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls: type[_R], data: dict[str, Any]) -> _R:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


_R = TypeVar("_R", bound=_Record)


@dataclass(frozen=True)
class LoaderConfig(_Record):
    """One DataLoader configuration: the five knobs loadersearch tunes, and how workers start."""

    # The loader knobs: on the command line of bench and diagnose, in a spec file's [space] and
    # [space.fix], bench()'s config and tune()'s space and fix (search/space.py reads them).
    num_workers: int = opt(  # 0 loads in the training process
        0, kind=WHOLE, low=0, help="Worker processes (0: load in the training process)."
    )
    batch_size: int = opt(  # also a training choice: fix it if it matters
        16, kind=WHOLE, low=1, help="Images per step."
    )
    pin_memory: bool = opt(  # page-locked host batches, faster and async host->device copies
        False, kind=FLAG, flags=("--pin-memory/--no-pin-memory",),
        help="Page-locked host batches (faster, asynchronous copies to the device).",
    )  # fmt: skip
    # None when 0 workers, and None with workers means PyTorch's default (2): normalised so
    # that configurations building the same DataLoader compare equal
    prefetch_factor: int | None = opt(
        None, kind=WHOLE, low=1, help="Batches each worker loads ahead (PyTorch's default "
        f"{DEFAULT_PREFETCH} when omitted). Needs workers.",
    )  # fmt: skip
    persistent_workers: bool = opt(
        False, kind=FLAG, flags=("--persistent-workers/--no-persistent-workers",),
        help="Keep workers alive between epochs. Needs workers.",
    )  # fmt: skip
    # How workers start (DataLoader's multiprocessing_context); None when 0 workers, and None
    # with workers means DEFAULT_START_METHOD (normalised like prefetch_factor).
    start_method: str | None = opt(
        None, choices=START_METHODS, help="How workers start (DataLoader's "
        f"multiprocessing_context; default {DEFAULT_START_METHOD}). Needs workers.",
    )  # fmt: skip
    # Where the images come from, when the study searches it (--search-cache); None = the
    # workload's own cache (WorkloadSpec.cache). Not a DataLoader argument: the answer names
    # it beside the pasted line.
    cache: str | None = opt(None, choices=CACHES, noun="cache", flags=())

    def __post_init__(self) -> None:
        if isinstance(self.num_workers, bool) or int(self.num_workers) != self.num_workers:
            raise ValueError(f"num_workers must be an integer but got {self.num_workers!r}.")
        if self.prefetch_factor is not None and self.prefetch_factor < 1:
            raise ValueError(
                f"prefetch_factor must be at least 1 (or None) but got {self.prefetch_factor}."
            )
        if self.start_method is not None:
            check_start_method(self.start_method)
        check_fields(self)  # cache, num_workers, batch_size
        if self.num_workers == 0 and self.prefetch_factor is not None:
            # PyTorch itself raises here; we reject it the same way, with the fix in the message.
            raise ValueError(
                f"prefetch_factor={self.prefetch_factor} needs num_workers > 0: with "
                "num_workers=0 there is no worker to prefetch. Drop prefetch_factor or add "
                "workers."
            )
        if self.num_workers == 0 and self.persistent_workers:
            raise ValueError(
                "persistent_workers=True needs num_workers > 0: with num_workers=0 there is no "
                "worker to keep. Drop persistent_workers or add workers."
            )
        if self.num_workers > 0 and self.prefetch_factor is None:
            object.__setattr__(self, "prefetch_factor", DEFAULT_PREFETCH)
        # Without workers there is nothing to start: a fixed start method (--fix
        # start_method=spawn) applies to the configurations with workers only.
        start = (self.start_method or DEFAULT_START_METHOD) if self.num_workers > 0 else None
        object.__setattr__(self, "start_method", start)

    def dataloader_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.utils.data.DataLoader`` (only the ones that apply)."""
        kwargs: dict[str, Any] = {
            "batch_size": self.batch_size,
            "num_workers": self.num_workers,
            "pin_memory": self.pin_memory,
        }
        if self.num_workers > 0:
            kwargs["prefetch_factor"] = self.prefetch_factor
            kwargs["persistent_workers"] = self.persistent_workers
            # Always explicit: the measured worker start-up must not depend on the Python's
            # default start method.
            kwargs["multiprocessing_context"] = self.start_method
        return kwargs


    def label(self) -> str:
        """A short human label, e.g. ``w4 b32 pin pf2 persist``."""
        parts = [f"w{self.num_workers}", f"b{self.batch_size}"]
        if self.pin_memory:
            parts.append("pin")
        if self.num_workers > 0:
            parts.append(f"pf{self.prefetch_factor}")
            if self.persistent_workers:
                parts.append("persist")
            if self.start_method != DEFAULT_START_METHOD:
                parts.append(str(self.start_method))
        if self.cache not in (None, "none"):
            parts.append(str(self.cache))
        return " ".join(parts)

    def snippet(self, dataset: str = "dataset", sampler: str | None = None) -> str:
        """A ready-to-paste ``DataLoader(...)`` call. ``multiprocessing_context`` is written
        only when the measured start method is not what this Python uses by default, so that
        the pasted line starts its workers the way they were measured. ``sampler`` (e.g.
        ``"sampler"``, a ``DistributedSampler``) takes the place of ``shuffle=True``, which
        PyTorch refuses beside a sampler."""
        kwargs = self.dataloader_kwargs()
        if kwargs.get("multiprocessing_context") == PLATFORM_START_METHOD:
            del kwargs["multiprocessing_context"]
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        order = f"sampler={sampler}" if sampler else "shuffle=True"
        return f"DataLoader({dataset}, {order}, drop_last=True, {args})"


@dataclass(frozen=True)
class PipelineSpec:
    """Your own pipeline, by reference: each part is ``"module:qualname"``, imported and called
    in the measuring process (a fresh Python process), so that a resume or another machine
    rebuilds the same thing. What each part must be is in :mod:`loadersearch.workload.pipeline`.
    """

    dataset: str = opt(  # a Dataset class works too
        kind=REF, dest="pipeline_dataset", metavar="MODULE:NAME",
        help="Your own dataset instead of YOLOv4-tiny's: a callable returning a map-style "
        "Dataset, e.g. mypkg.data:make_dataset (the working directory is on the measuring "
        "process's path).",
    )  # fmt: skip
    collate: str | None = opt(  # the DataLoader's collate_fn
        None, kind=REF, dest="pipeline_collate", metavar="MODULE:NAME", api="collate_fn",
        help="Your collate_fn (default: PyTorch's default_collate).",
    )  # fmt: skip
    model: str | None = opt(
        None, kind=REF, dest="pipeline_model", metavar="MODULE:NAME",
        help="With --dataset: a callable returning your nn.Module (moved to the device).",
    )  # fmt: skip
    loss: str | None = opt(  # a loss class is instantiated
        None, kind=REF, dest="pipeline_loss", metavar="MODULE:NAME",
        help="With --model, the default step (forward, backward, optimizer step; AMP on "
        "CUDA) on (inputs, targets) batches: a loss class (torch.nn:CrossEntropyLoss) or "
        "function.",
    )  # fmt: skip
    step: str | None = opt(
        None, kind=REF, dest="pipeline_step", metavar="MODULE:NAME",
        help="Your step builder instead: make_step(model, device) returns step(batch), "
        "called once per batch (already on the device).",
    )  # fmt: skip
    # Keyword arguments bound to each part (JSON values: the study stores them); on the
    # command line --arg PART.KEY=VALUE.
    dataset_kwargs: dict[str, Any] = opt({}, kind=TABLE, flags=())
    collate_kwargs: dict[str, Any] = opt({}, kind=TABLE, flags=(), api=None)
    model_kwargs: dict[str, Any] = opt({}, kind=TABLE, flags=())
    loss_kwargs: dict[str, Any] = opt({}, kind=TABLE, flags=(), api=None)
    step_kwargs: dict[str, Any] = opt({}, kind=TABLE, flags=(), api=None)

    def __post_init__(self) -> None:
        for part in PIPELINE_PARTS:
            ref = getattr(self, part)
            if part == "dataset" or ref is not None:
                check_ref(ref, part)
            kwargs = getattr(self, f"{part}_kwargs")
            if kwargs and ref is None:
                raise ValueError(f"{part}_kwargs {kwargs!r} are given but no {part}.")
            object.__setattr__(self, f"{part}_kwargs", json_kwargs(kwargs, part))
        if self.loss is not None and self.model is None:
            raise ValueError(
                "a loss needs a model (the default step is loss(model(inputs), targets)); "
                "give the model too."
            )
        if self.loss is not None and self.step is not None:
            raise ValueError(
                "give a loss (for the default step) or your own step, not both: your step "
                "computes its own loss."
            )

    def refs(self) -> dict[str, str]:
        """The parts that are given, ``{"dataset": "mypkg.data:make_dataset", ...}``."""
        return {p: getattr(self, p) for p in PIPELINE_PARTS if getattr(self, p) is not None}

    def describe(self) -> str:
        """e.g. ``dataset mypkg.data:make_dataset(root='data'), model mypkg.model:make_model``."""
        parts = []
        for part, ref in self.refs().items():
            kwargs = getattr(self, f"{part}_kwargs")
            args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
            parts.append(f"{part} {ref}({args})" if args else f"{part} {ref}")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PipelineSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(
                f"unknown pipeline key(s) {', '.join(sorted(unknown))}; known keys: "
                f"{', '.join(sorted(known))}."
            )
        return cls(**data)


@dataclass(frozen=True)
class WorkloadSpec(_Record):
    """What one measurement trains on; everything the measuring child needs to rebuild it."""

    kind: str = opt(
        "train", flags=("--workload",), choices=WORKLOADS, noun="workload", api="workload",
        help="train: YOLOv4-tiny (or your --model/--step) forward+backward+step on this "
        "machine's device (default); loader: the data pipeline alone; emulated: a "
        "sleeping stand-in accelerator (labelled EMULATED).",
    )  # fmt: skip
    data: str | None = opt(  # None = the embedded generated default
        None, kind=PATH, help="Dataset directory (YOLO, VOC or COCO layout). Default: the "
        "built-in generated dataset.",
    )  # fmt: skip
    data_format: str | None = opt(  # None = detect from the directory
        None, flags=("--data-format", "--format"), choices=FORMATS, noun="dataset format",
        keys=("format",), help="Dataset layout; detected from the directory when omitted.",
    )  # fmt: skip
    data_split: str | None = opt(  # None = the only or the "train" split
        None, keys=("split",),
        help="Split to use when the dataset holds several (e.g. train, train2017).",
    )  # fmt: skip
    img_size: int | None = opt(  # network input; None = 416 on CUDA, 128 on a CPU
        None, kind=WHOLE, low=32, help="Network input in pixels (multiple of 32). Default: "
        "416, or 128 for train on a CPU.",
    )  # fmt: skip
    mosaic: bool = opt(  # decodes 4-5 JPEGs a sample
        False, kind=FLAG, flags=("--mosaic/--no-mosaic",),
        help="4-image mosaic augmentation (p=0.5) [default: off].",
    )  # fmt: skip
    skip_bad_samples: bool = opt(
        False, kind=FLAG, help="Leave out unreadable samples (counted) instead of stopping."
    )
    device: str = opt(
        "auto", choices=DEVICES, noun="device",
        help="Where the train and loader workloads run (default auto: CUDA when present).",
    )  # fmt: skip
    vram_cap: int | None = opt(  # bytes of device memory a trial may use; None = no cap
        None, kind=SIZE, low=0, low_open=True,
        help="Device memory a configuration may use, e.g. 6GiB, 6G, 6000MiB.",
    )  # fmt: skip
    # The emulated accelerator: each batch takes a + b*batch_size ms and m0 + m1*batch_size MiB.
    # 4 + 7*B ms (~138 img/s at batch 16) is a little faster than the 0-worker loader at 416 px
    # on this 2-core CPU (~8.5 ms of CPU per image: ~118 img/s), so the data pipeline matters;
    # 600 + 150*B MiB puts the largest batch under an 8 GiB cap at 50.
    emulated_ms: tuple[float, float] = opt(
        (4.0, 7.0), kind=PAIR,
        help="Emulated step time A,B: A + B*batch ms [default: {default[0]:g},{default[1]:g}].",
    )  # fmt: skip
    emulated_mib: tuple[float, float] = opt(
        (600.0, 150.0), kind=PAIR, help="Emulated device memory M0,M1: M0 + M1*batch MiB "
        "[default: {default[0]:g},{default[1]:g}].",
    )  # fmt: skip
    emulated_io_ms: float = opt(
        0.0, kind=NUMBER, low=0, metavar="MS",
        help="Emulated storage latency: each sample's read first waits MS milliseconds "
        "(a sleep, no CPU), as on network storage or a hard disk, so that many workers "
        "pay off even on a few cores; results are labelled EMULATED [default: 0, none].",
    )  # fmt: skip
    # The same file waits the same in every trial and epoch.
    emulated_io_cv: float = opt(
        0.0, kind=NUMBER, low=0, metavar="CV",
        help="Spread of the emulated storage latency: each file's wait is drawn once, "
        "lognormal with mean --emulated-io-ms and this coefficient of variation (2: most "
        "reads fast, a few many times slower, as a hard disk's seeks) [default: 0, "
        "every read the same].",
    )  # fmt: skip
    # Seeds the generated dataset and the augmentation; a spec file's only (--seed and tune's
    # seed are the sampler's).
    seed: int = opt(0, kind=WHOLE, flags=(), api=None)
    optimizer: str = opt(  # sgd (momentum 0.937, nesterov) | adamw
        "sgd", choices=OPTIMIZERS, noun="optimizer",
        help="Optimizer of the train workload [default: {default}].",
    )  # fmt: skip
    gpus: int = opt(  # DDP ranks; NCCL on CUDA, gloo on a CPU
        1, kind=WHOLE, low=1,
        help="Ranks of a DistributedDataParallel job on this machine, one process per GPU "
        "(NCCL), each with its own DataLoader: num_workers and batch_size are per rank and "
        "the throughput is the job's [default: 1, no DDP]. On a machine without GPUs (or "
        "with --device cpu), CPU ranks with gloo, for testing.",
    )  # fmt: skip
    # Your own dataset (and model and step) instead of YOLOv4-tiny on a detection dataset;
    # ``kind`` still applies: train (your step), loader, emulated (your data, a stand-in device).
    # Its options are PipelineSpec's (its own table, [pipeline]).
    pipeline: PipelineSpec | None = None
    # The built-in dataset's cache (the article's remedies for a slow data side): see
    # workload/cache.py.
    cache: str = opt(
        "none", choices=CACHES, noun="cache",
        help="Where the built-in dataset's images come from [default: none, each file "
        "read and decoded per sample]. ram: the encoded files held in shared memory (no "
        "storage reads; decoding still per sample); memmap: decoded once and resized to "
        "fit --img-size into a memory-mapped file, built once per dataset and size in "
        "the cache directory and reused (augmentation still per sample).",
    )  # fmt: skip
    cache_dir: str | None = opt(  # not part of what is measured (a resume may move it)
        None, kind=DIR,
        help="Where memmap caches are kept [default: $LOADERSEARCH_CACHE_DIR, else "
        "$XDG_CACHE_HOME/loadersearch or ~/.cache/loadersearch; never inside the dataset "
        "unless given so].",
    )  # fmt: skip

    def __post_init__(self) -> None:
        if isinstance(self.pipeline, dict):  # from JSON (the child, a stored study)
            object.__setattr__(self, "pipeline", PipelineSpec.from_dict(self.pipeline))
        if self.img_size is not None and (self.img_size < 32 or self.img_size % 32):
            raise ValueError(
                f"img_size must be a positive multiple of 32 (YOLOv4-tiny's stride) "
                f"but got {self.img_size}."
            )
        if isinstance(self.gpus, bool) or int(self.gpus) != self.gpus or self.gpus < 1:
            raise ValueError(f"gpus must be a whole number of at least 1 but got {self.gpus!r}.")
        object.__setattr__(self, "gpus", int(self.gpus))
        if len(self.emulated_ms) != 2 or len(self.emulated_mib) != 2:
            raise ValueError(
                "emulated_ms and emulated_mib take two numbers each (a, b: a + b*batch_size) "
                f"but got {self.emulated_ms!r} and {self.emulated_mib!r}."
            )
        try:
            numbers = [float(x) for x in (*self.emulated_ms, *self.emulated_mib)]
        except (TypeError, ValueError):
            numbers = []
        # nan passes every comparison and inf sleeps forever: check both (TOML reads nan, inf).
        if len(numbers) != 4 or not all(math.isfinite(x) and x >= 0 for x in numbers):
            raise ValueError(
                f"emulated_ms {self.emulated_ms!r} and emulated_mib {self.emulated_mib!r} "
                "must be finite numbers, not negative (e.g. [4, 7] and [600, 150])."
            )
        for name, what in (
            ("emulated_io_ms", "a finite number of milliseconds, not negative (e.g. 20)"),
            ("emulated_io_cv", "a finite number, not negative (e.g. 2: a few reads many times "
             "slower than most)"),
        ):  # fmt: skip
            value = getattr(self, name)
            try:
                number = float(value)
            except (TypeError, ValueError):
                number = math.nan
            if isinstance(value, bool) or not (math.isfinite(number) and number >= 0):
                raise ValueError(f"{name} must be {what}, but got {value!r}.")
            object.__setattr__(self, name, number)
        # JSON turns tuples into lists; keep them tuples so specs compare equal after a round trip.
        object.__setattr__(self, "emulated_ms", tuple(float(x) for x in self.emulated_ms))
        object.__setattr__(self, "emulated_mib", tuple(float(x) for x in self.emulated_mib))
        check_fields(self)  # choices (kind, device, data_format, cache, optimizer), vram_cap
        if self.pipeline is not None:
            self._check_pipeline(self.pipeline)

    def _check_pipeline(self, p: PipelineSpec) -> None:
        builtin = {
            "data": self.data,
            "data_format": self.data_format,
            "data_split": self.data_split,
            "img_size": self.img_size,
            "mosaic": self.mosaic or None,
            "skip_bad_samples": self.skip_bad_samples or None,
            "cache": None if self.cache == "none" else self.cache,
            "cache_dir": self.cache_dir,
        }
        given = [name for name, value in builtin.items() if value is not None]
        if given:
            verb = "applies" if len(given) == 1 else "apply"
            raise ValueError(
                f"{', '.join(given)} {verb} to the built-in YOLOv4-tiny workload, not to your "
                "pipeline: your dataset factory reads its own data (pass it arguments as "
                "dataset_kwargs, or --arg dataset.KEY=VALUE)."
            )
        if self.kind == "train" and p.step is None and (p.model is None or p.loss is None):
            missing = "a loss" if p.model is not None else "a model and a loss"
            raise ValueError(
                f"the train workload needs your training step: give {missing} (the default "
                "step: forward, backward, optimizer step) or your own step builder; or "
                "measure the data pipeline alone with the loader or emulated workload."
            )
        extra = [part for part in ("model", "loss", "step") if getattr(p, part) is not None]
        if self.kind != "train" and extra:
            raise ValueError(
                f"the {self.kind} workload runs no model or step (it measures your data "
                f"{'pipeline alone' if self.kind == 'loader' else 'with a stand-in device'}): "
                f"drop {', '.join(extra)}, or use the train workload."
            )

    @property
    def emulated(self) -> bool:
        return self.kind == "emulated"

    def storage_label(self) -> str | None:
        """``"EMULATED storage latency 20 ms/sample"``, or None without one."""
        if not self.emulated_io_ms:
            return None
        spread = f", CV {self.emulated_io_cv:g} per file" if self.emulated_io_cv else ""
        return f"EMULATED storage latency {self.emulated_io_ms:g} ms/sample{spread}"



def workload_for(workload: WorkloadSpec, config: LoaderConfig) -> WorkloadSpec:
    """The workload ``config`` is measured on: with the configuration's cache when it names
    one (a study that searches the cache), else ``workload`` as it is."""
    if config.cache is None or config.cache == workload.cache:
        return workload
    return dataclasses.replace(workload, cache=config.cache)


@dataclass(frozen=True)
class MeasurePlan(_Record):
    """How long one measurement runs: warm-up, then ``epochs`` short epochs of ``steps``, or
    more for a configuration with many batches in flight (:meth:`sized_steps`)."""

    # Defaults: 4 warm-up + 3 x 8 measured steps, about 10 s on a 2-core CPU for the train
    # workload at 128 px, batch 16 (process start and imports ~3.5 s of it, not measured).
    epochs: int = opt(3, kind=WHOLE, low=1, help="Measured short epochs, after the warm-up.")
    steps: int = opt(8, kind=WHOLE, low=1, help="Batches per short epoch.")
    windows_per_epoch: int = opt(
        2, kind=WHOLE, low=1, flags=("--windows-per-epoch", "--windows"),
        help="Measurement windows per short epoch: the steps the pruner compares.",
    )  # fmt: skip
    warmup_epochs: int = opt(  # not measured: cudnn autotune, page cache, allocator growth
        1, kind=WHOLE, low=0, help="Unmeasured warm-up epochs [default: {default}]."
    )
    warmup_steps: int | None = opt(4, kind=WHOLE, low=1, help="Batches per warm-up epoch.")
    timeout_s: float = opt(
        300.0, kind=NUMBER, low=0, low_open=True, flags=("--timeout", "--trial-timeout"),
        help="Wall-clock limit of one measurement in seconds, start-up included "
        "[default: {default:g}].",
    )  # fmt: skip
    # after start-up, no window for this long = a hang (TIMEOUT)
    stall_s: float = opt(120.0, kind=NUMBER, low=0, low_open=True, flags=())
    # Sized to the configuration (sized_steps): a measured epoch of a configuration with
    # workers holds at least in_flight_rounds x the batches its DataLoader keeps in flight,
    # plus one batch per worker, so that every worker count has a steady part to measure.
    in_flight_rounds: int = opt(
        2, kind=WHOLE, low=0,
        help="Size each measured epoch to its configuration: with W workers and prefetch "
        "factor P, at least ROUNDS x W x P + W steps (the batches in flight, ROUNDS times "
        "over), so that every worker count has a steady part; 0 = --steps for every "
        "configuration [default: {default}].",
    )  # fmt: skip
    epoch_limit_s: float = opt(  # without a warm-up, not cut
        20.0, kind=NUMBER, low=0, low_open=True, flags=("--epoch-limit",),
        help="Seconds a sized epoch may take at the warm-up's rate; longer ones are cut "
        "(never below --steps) [default: {default:g}].",
    )  # fmt: skip
    # The relative half-width of the projected epoch time's 90% confidence interval
    # (measure.projection.epoch_time_precision). The extra epochs have the same length (not
    # cut into windows: the pruner compares the same windows in every trial). Reads whose time
    # varies a lot (a disk's seeks, a network file system) need it: a few short epochs see the
    # typical read, not the mean one.
    precision: float = opt(
        0.0, kind=NUMBER, low=0, high=1, high_open=True,
        help="Measure until the projected epoch time is known this well: the relative "
        "half-width of its 90% confidence interval, from the spread of the measured "
        "epochs; more epochs follow while it is wider, within --extend-limit seconds. "
        f"Storage whose reads vary a lot needs it. 0 = exactly --epochs [default: "
        f"{DEFAULT_PRECISION:g}].",
    )  # fmt: skip
    extend_limit_s: float = opt(
        20.0, kind=NUMBER, low=0, flags=("--extend-limit",),
        help="Seconds of measured epochs a measurement may add for --precision, and never "
        "more than 3x its planned epochs' time [default: {default:g}; a study where the CPU "
        "does the heavy work: 8].",
    )  # fmt: skip
    projection: int = PROJECTION_METHOD  # the projection's method (stored: see its comment)
    extra: dict[str, Any] = field(default_factory=dict)  # reserved for workload-specific knobs

    def __post_init__(self) -> None:
        check_fields(self)
        if self.windows_per_epoch > self.steps:
            raise ValueError(
                f"windows_per_epoch ({self.windows_per_epoch}) cannot exceed steps ({self.steps})."
            )

    def sized_steps(self, config: LoaderConfig, full_steps: int = 0) -> int:
        """Steps of one measured epoch of ``config`` before the time limit: ``steps``, or for
        ``w`` workers with prefetch factor ``p`` at least ``in_flight_rounds * w * p + w`` (the
        batches in flight, ``in_flight_rounds`` times over, then one more batch per worker: a
        whole number of rounds of ``w`` batches); never more than ``full_steps``, one full
        epoch of the dataset (when known and above ``steps``). The same for every trial of the
        same configuration and dataset."""
        target = self.steps
        if self.in_flight_rounds and config.num_workers > 0:
            in_flight = config.num_workers * (config.prefetch_factor or DEFAULT_PREFETCH)
            target = max(target, self.in_flight_rounds * in_flight + config.num_workers)
        if full_steps > 0:
            target = min(target, max(self.steps, full_steps))
        return target

    def warmup_steps_for(self, config: LoaderConfig, sized: int) -> int:
        """Steps of a warm-up epoch: ``warmup_steps`` (or ``steps``), and with sizing at least
        two batches per worker (within ``sized``), so that every worker has started and its
        rate can bound the measured epochs' length (:attr:`epoch_limit_s`)."""
        steps = self.warmup_steps or self.steps
        if self.in_flight_rounds and config.num_workers > 0:
            steps = max(steps, min(2 * config.num_workers, sized))
        return steps

    def limited_steps(
        self, sized: int, warmup_steps: int, warmup_s: float, num_workers: int = 0
    ) -> int:
        """``sized`` cut to what fits in :attr:`epoch_limit_s` at the warm-up's rate
        (``warmup_steps`` in ``warmup_s``, epoch start included), never below ``steps``. A cut
        keeps a whole number of rounds of ``num_workers`` batches: workers deliver in rounds,
        and an epoch ending in a partial round would count the whole round's time for part of
        its batches (the start cost, and so the projection, would come out too high)."""
        if warmup_s <= 0 or sized <= self.steps:
            return sized
        fits = int(self.epoch_limit_s * warmup_steps / warmup_s)
        if num_workers > 1:
            fits = fits // num_workers * num_workers
        return max(self.steps, min(sized, fits))

    @property
    def n_windows(self) -> int:
        return self.epochs * self.windows_per_epoch

