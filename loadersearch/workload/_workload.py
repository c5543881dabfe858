"""Building the workload in the measuring process: :func:`create_workload` and the checks and
caches that run before it (:func:`check_data`, :func:`prepare_cache`)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadersearch.workload._device import resolve_device
from loadersearch.workload._spec import WorkloadSpec

logger = logging.getLogger(__name__)

GPU_IMG_SIZE = 416  # the real network input
# CPU training is slow: ~70 img/s at 128 px, ~7 at 416 (batch 8, measured on 2 cores)
CPU_TRAIN_IMG_SIZE = 128


def resolve_img_size(kind: str, device_type: str, img_size: int | None = None) -> int:
    """The network input size a workload uses: ``img_size`` when given, else 416 on CUDA; on a
    CPU 416 for ``loader`` and ``emulated`` (the loader's real work) and 128 for ``train``."""
    if img_size is not None:
        return int(img_size)
    if device_type == "cpu" and kind == "train":
        return CPU_TRAIN_IMG_SIZE
    return GPU_IMG_SIZE


@dataclass
class Workload:
    """Everything the timed loop needs; built inside the measuring child."""

    kind: str
    device: Any  # torch.device the batches are moved to (cuda:N with its index, or cpu)
    device_label: str  # "cuda:0 (NVIDIA H200)", "cpu (2 cores)", "emulated (...)"
    img_size: int | None  # None for a user pipeline (its dataset decides)
    dataset: Any  # a map-style torch Dataset
    collate_fn: Callable
    worker_init_fn: Callable | None
    # step(batch), the batch on the device: (images uint8 (B,3,S,S), targets (n,6), their
    # target_layout (B,m)) for YOLOv4-tiny; whatever the collate returns for a user pipeline
    step: Callable[[Any], None]
    emulated: bool = False
    notes: list[str] = field(default_factory=list)
    # emulated allocation peak in bytes, after the run (CUDA peaks: loadersearch.measure._cuda)
    peak_vram: Callable[[], int | None] = lambda: None
    cuda: bool = False


def _device_label(device: Any) -> str:
    if device.type == "cuda":
        import torch

        return f"cuda:{device.index} ({torch.cuda.get_device_name(device.index)})"
    return f"cpu ({os.cpu_count() or 1} cores)"


def _train_step(
    spec: WorkloadSpec,
    device: Any,
    img_size: int,
    num_classes: int,
    wrap_model: Callable[[Any], Any] | None = None,
) -> Callable:
    import torch

    from loadersearch.workload._loss import YoloLoss
    from loadersearch.workload._step import make_optimizer, train_step
    from loadersearch.workload._yolov4_tiny import YOLOv4Tiny

    cuda = device.type == "cuda"
    model = YOLOv4Tiny(num_classes=num_classes).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    yolo_loss = YoloLoss(num_classes).to(device)
    opt = make_optimizer(spec.optimizer, model.parameters())
    if wrap_model is not None:  # e.g. DistributedDataParallel: it shares the parameters
        model = wrap_model(model)

    def prepare(images: Any) -> Any:
        x = images.float().div_(255.0)  # uint8 batches are normalised on the device
        return x.contiguous(memory_format=torch.channels_last) if cuda else x

    def loss(outputs: Any, targets: Any) -> Any:  # YoloLoss runs in float32 under autocast
        boxes, layout = targets
        # layout: built on the CPU by the collate, so the loss never waits for the device
        return yolo_loss(outputs, boxes, img_size, layout)[0]

    # batches are (images, targets, layout): the loss takes (targets, layout)
    return train_step(model, loss, opt, device, prepare=prepare, split=_inputs_and_rest)


def _inputs_and_rest(batch: Any) -> tuple[Any, Any]:
    return batch[0], tuple(batch[1:])


def create_workload(
    spec: WorkloadSpec,
    batch_size: int | None = None,
    *,
    wrap_model: Callable[[Any], Any] | None = None,
) -> Workload:
    """Build the dataset and the per-batch step of ``spec`` (imports torch; call in the child).

    A CUDA device comes with its index (``cuda:N``, the current device), so that every
    ``torch.cuda`` call on it names the device explicitly. On CUDA the measurement enforces
    ``spec.vram_cap`` (:mod:`loadersearch.measure._cuda`); for ``emulated`` it is checked
    against the emulated allocation at the first step. ``batch_size`` is the configuration's
    (every batch has it: fixed sampler, drop_last); the emulated accelerator consumes batches
    of that size (without it: the length of the batch's first element, YOLOv4-tiny's images).
    ``wrap_model`` wraps the model a train step runs (one rank of a DistributedDataParallel job
    passes the DDP wrapper), YOLOv4-tiny's or a pipeline's.
    """
    import torch

    from loadersearch.workload._datasets import worker_init_fn
    from loadersearch.workload._emulated import describe
    from loadersearch.workload._loss import collate_with_layout

    device_type = resolve_device(spec.device)
    cuda = device_type == "cuda"
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    img_size = resolve_img_size(spec.kind, device_type, spec.img_size)
    notes: list[str] = []
    if cuda:
        torch.backends.cudnn.benchmark = True
    elif spec.vram_cap is not None and spec.kind != "emulated":
        notes.append(f"no CUDA device: the VRAM cap does not apply to the {spec.kind} workload")

    pipeline = None
    if spec.pipeline is not None:
        from loadersearch.workload._pipeline import build_pipeline

        pipeline = build_pipeline(
            spec.pipeline,
            train=spec.kind == "train",
            device=device,
            optimizer=spec.optimizer,
            wrap_model=wrap_model,
        )
        dataset, collate_fn, init_fn, img_size = pipeline.dataset, pipeline.collate_fn, None, None
    else:
        dataset = _built_in_dataset(spec, img_size, notes)
        # every YOLOv4-tiny workload: the same data pipeline, target layout included
        collate_fn, init_fn = collate_with_layout, worker_init_fn
    dataset = _on_emulated_storage(dataset, spec, built_in=pipeline is None, notes=notes)
    label = _device_label(device)
    peak_vram: Callable[[], int | None] = Workload.peak_vram  # CUDA: measure.cuda reads it
    if spec.kind == "train" and pipeline is not None:
        step = pipeline.step
    elif spec.kind == "train":
        step = _train_step(spec, device, img_size, dataset.num_classes, wrap_model)
    elif spec.kind == "loader":

        def step(batch: Any) -> None:  # the pipeline alone: batches are dropped
            return None

    else:
        step, peak_vram = _emulated_step(spec, batch_size)
        label = f"{describe(spec.emulated_ms, spec.emulated_mib)}; batches on {label}"
        notes.append("EMULATED accelerator: no real device computes; figures are a stand-in")
    logger.debug("workload %s on %s at %s px", spec.kind, label, img_size or "its own")
    return Workload(
        kind=spec.kind,
        device=device,
        device_label=label,
        img_size=img_size,
        dataset=dataset,
        collate_fn=collate_fn,
        worker_init_fn=init_fn,
        step=step,
        emulated=spec.emulated,
        notes=notes,
        peak_vram=peak_vram,
        cuda=cuda,
    )


def _emulated_step(
    spec: WorkloadSpec, batch_size: int | None
) -> tuple[Callable[[Any], None], Callable[[], int | None]]:
    """The emulated accelerator's step (a batch of ``batch_size``, else of its first element's
    length) and its peak allocation."""
    from loadersearch.workload._emulated import EmulatedAccelerator

    acc = EmulatedAccelerator(spec.emulated_ms, spec.emulated_mib, spec.vram_cap)

    def step(batch: Any) -> None:
        acc.step(batch_size or batch[0].shape[0])

    return step, lambda: acc.peak_bytes


def _built_in_dataset(spec: WorkloadSpec, img_size: int | None, notes: list[str]) -> Any:
    """The built-in dataset of ``spec`` (YOLOv4-tiny's detection data, augmented, from its
    cache when it has one: what the cache costs goes to ``notes``)."""
    from loadersearch.workload._datasets import open_dataset

    dataset = open_dataset(
        spec.data if spec.data is not None else _default_data(),
        spec.data_format,
        img_size=img_size,
        augment=True,
        mosaic=spec.mosaic,
        skip_bad_samples=spec.skip_bad_samples,
        seed=spec.seed,
        split=spec.data_split,
        cache=spec.cache,
        cache_dir=spec.cache_dir,
        io_ms=spec.emulated_io_ms,
    )
    if dataset.cache_info is not None:
        notes.append(dataset.cache_info.describe())
    return dataset


def _on_emulated_storage(
    dataset: Any, spec: WorkloadSpec, *, built_in: bool, notes: list[str]
) -> Any:
    """``dataset`` behind ``spec``'s emulated slow storage (``emulated_io_ms``), unless the
    cache of the built-in dataset (``built_in``) holds its images; ``notes`` says which."""
    from loadersearch.workload._emulated import EmulatedStorage

    if spec.emulated_io_ms > 0 and built_in and spec.cache != "none":
        # The cache holds the images: no sample is fetched from storage while measuring.
        notes.append(
            f"{spec.storage_label()}: paid once per image when the {spec.cache} cache was "
            "filled, never per sample (the cache holds the images)"
        )
    elif spec.emulated_io_ms > 0:  # every sample's fetch waits, as on slow storage
        dataset = EmulatedStorage(dataset, spec.emulated_io_ms, spec.emulated_io_cv)
        notes.append(
            f"{spec.storage_label()}: each sample read waits that long (a sleep, no CPU), as "
            "on network storage or a hard disk; figures describe that storage, not yours"
        )
    return dataset


@dataclass(frozen=True)
class PipelineData:
    """What :func:`check_data` says of a user pipeline's dataset: nothing checked here (its
    factory reads its own data, in the measuring process), nothing skipped."""

    dataset: str  # the factory's reference

    def describe(self) -> str | None:
        return None

    def to_dict(self) -> dict[str, object]:
        return {}


def check_data(spec: WorkloadSpec) -> Any:
    """Check the dataset ``spec`` measures, whole, before anything is measured (the built-in
    dataset is generated first when missing): a
    :class:`~loadersearch.workload._datasets.DatasetCheck`, or
    :class:`~loadersearch.errors.DatasetError` naming the first problem; for a user pipeline,
    a :class:`PipelineData` (the built-in dataset is neither read nor generated). Does not
    import torch."""
    if spec.pipeline is not None:
        return PipelineData(spec.pipeline.dataset)
    from loadersearch.workload._datasets import check_dataset

    return check_dataset(
        spec.data if spec.data is not None else _default_data(),
        spec.data_format,
        split=spec.data_split,
        skip_bad_samples=spec.skip_bad_samples,
    )


def prepare_cache(spec: WorkloadSpec) -> Any:
    """Before anything is measured (no torch): build the memmap cache of ``spec``'s dataset at
    its image size when it is missing or stale, or check that a RAM cache fits in memory. A
    :class:`~loadersearch.workload._cache_info.CacheInfo` (where, how big, the build time), or None
    without a cache. ``spec.device`` should be resolved (``auto`` is taken as CUDA when torch
    sees it), since the train workload's image size depends on it."""
    if spec.cache == "none" or spec.pipeline is not None:
        return None
    from loadersearch.workload import _cache as cache
    from loadersearch.workload._datasets import read_index

    root = spec.data if spec.data is not None else _default_data()
    index = read_index(
        root, spec.data_format, split=spec.data_split, skip_bad_samples=spec.skip_bad_samples
    )
    device = spec.device
    if device == "auto":
        # only the train workload's image size depends on the device (no torch otherwise)
        device = resolve_device(device) if spec.kind == "train" else "cpu"
    return cache.ensure_cache(
        spec.cache,
        index.root,
        index.paths,
        resolve_img_size(spec.kind, device, spec.img_size),
        spec.cache_dir,
        cache.cache_key(index.fmt, spec.data_split, spec.skip_bad_samples),
        spec.skip_bad_samples,
        spec.emulated_io_ms,
    )


def preload_workload(spec: WorkloadSpec) -> None:
    """Read, once, what every measurement of ``spec`` shares and a fork can inherit: the
    dataset's label index (:func:`~loadersearch.workload._datasets.dataset.preload_index`).
    Never the device: this runs in the measurement's fork server, which must not initialise
    CUDA (a forked child could not use it), so nothing here depends on the device or the
    image size. ``spec.data`` None (the generated default) is left to the measurement."""
    from loadersearch.workload._datasets.dataset import preload_index

    if spec.data is not None:
        preload_index(
            spec.data,
            spec.data_format,
            split=spec.data_split,
            skip_bad_samples=spec.skip_bad_samples,
        )


def _default_data() -> str:
    from loadersearch.workload._synthetic import default_dataset

    return default_dataset()
