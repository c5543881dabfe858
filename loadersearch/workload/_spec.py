"""What one measurement trains on: :class:`WorkloadSpec` (the built-in YOLOv4-tiny workload,
the emulated accelerator, or your own pipeline by reference, :class:`PipelineSpec`).

Everything the measuring child needs to rebuild the workload, as plain data that survives
JSON: a resume or another machine rebuilds the same thing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from loadersearch._loader_config import CACHES, LoaderConfig
from loadersearch._options import (
    DIR,
    FLAG,
    NUMBER,
    PAIR,
    PATH,
    REF,
    SIZE,
    TABLE,
    WHOLE,
    Record,
    check_fields,
    check_ref,
    json_kwargs,
    opt,
)

# The one list of each choice's names: the CLI's choices, spec checks and messages use these.
WORKLOADS = ("train", "loader", "emulated")
DEVICES = ("auto", "cuda", "cpu")
OPTIMIZERS = ("sgd", "adamw")
FORMATS = ("yolo", "voc", "coco")  # dataset layouts
PIPELINE_PARTS = ("dataset", "collate", "model", "loss", "step")  # a user pipeline's parts


@dataclass(frozen=True)
class PipelineSpec:
    """Your own pipeline, by reference: each part is ``"module:qualname"``, imported and called
    in the measuring process (a fresh Python process), so that a resume or another machine
    rebuilds the same thing. What each part must be is in :mod:`loadersearch.workload._pipeline`.
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
        help="With --dataset: a callable returning your nn.Module (moved to the device); with "
        "--ultralytics: a model .yaml or a local .pt.",
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
class WorkloadSpec(Record):
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
    # workload/_cache.py.
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
