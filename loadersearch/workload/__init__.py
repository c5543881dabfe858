"""The YOLOv4-tiny training workload: model, loss, datasets and augmentation.

:func:`create_workload` turns a :class:`~loadersearch.config.WorkloadSpec` into what the timed
loop needs: the dataset (with its collate and worker init), the device, and one ``step`` per
batch (YOLOv4-tiny training, nothing for ``loader``, a sleeping stand-in for ``emulated``).
Importing this package does not import torch; :func:`create_workload` does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from loadersearch.config import WorkloadSpec

logger = logging.getLogger(__name__)

GPU_IMG_SIZE = 416  # the real network input
CPU_TRAIN_IMG_SIZE = 128  # CPU training is slow: ~70 img/s at 128 px, ~7 at 416 (FACTS.md 6)


def resolve_img_size(kind: str, device_type: str, img_size: int | None = None) -> int:
    """The network input size a workload uses: ``img_size`` when given, else 416 on CUDA; on a
    CPU 416 for ``loader`` and ``emulated`` (the loader's real work) and 128 for ``train``."""
    if img_size is not None:
        return int(img_size)
    if device_type == "cpu" and kind == "train":
        return CPU_TRAIN_IMG_SIZE
    return GPU_IMG_SIZE


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def resolve_device(device: str) -> str:
    """``auto`` -> ``cuda`` when a CUDA device is present, else ``cpu``."""
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise ValueError("device='cuda' was asked for but torch sees no CUDA device; use 'auto'.")
    return device


@dataclass
class Workload:
    """Everything the timed loop needs; built inside the measuring child."""

    kind: str
    device: Any  # torch.device the batches are moved to
    device_label: str  # "cuda:0 (NVIDIA H200)", "cpu (2 cores)", "emulated (...)"
    img_size: int
    dataset: Any  # a map-style torch Dataset
    collate_fn: Callable
    worker_init_fn: Callable | None
    step: Callable[[Any, Any], None]  # (images uint8 (B,3,S,S) on device, targets (n,6))
    emulated: bool = False
    notes: list[str] = field(default_factory=list)
    peak_vram: Callable[[], int | None] = lambda: None  # bytes, after the run
    cuda: bool = False


def _device_label(device_type: str) -> str:
    if device_type == "cuda":
        import torch

        return f"cuda:{torch.cuda.current_device()} ({torch.cuda.get_device_name()})"
    return f"cpu ({os.cpu_count() or 1} cores)"


def _train_step(
    spec: WorkloadSpec,
    device: Any,
    img_size: int,
    num_classes: int,
    wrap_model: Callable[[Any], Any] | None = None,
) -> Callable:
    import torch

    from loadersearch.workload.loss import YoloLoss
    from loadersearch.workload.yolov4_tiny import YOLOv4Tiny

    cuda = device.type == "cuda"
    model = YOLOv4Tiny(num_classes=num_classes).to(device)
    if cuda:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    if wrap_model is not None:  # e.g. DistributedDataParallel, once the model is on its device
        model = wrap_model(model)
    loss_fn = YoloLoss(num_classes).to(device)
    if spec.optimizer == "sgd":
        opt = torch.optim.SGD(
            model.parameters(), lr=0.01, momentum=0.937, nesterov=True, weight_decay=5e-4
        )
    elif spec.optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=5e-4)
    else:
        raise ValueError(f"Unknown optimizer {spec.optimizer!r}; choose one of sgd, adamw.")
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)

    def step(images: Any, targets: Any) -> None:
        x = images.float().div_(255.0)  # uint8 batches are normalised on the device
        if cuda:
            x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=cuda):
            outputs = model(x)
        loss, _ = loss_fn(outputs, targets, img_size)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def create_workload(
    spec: WorkloadSpec, *, wrap_model: Callable[[Any], Any] | None = None
) -> Workload:
    """Build the dataset and the per-batch step of ``spec`` (imports torch; call in the child).

    On CUDA, ``spec.vram_cap`` is enforced with ``torch.cuda.set_per_process_memory_fraction``;
    for ``emulated`` it is checked against the emulated allocation at the first step.
    ``wrap_model`` wraps the train workload's model before its optimizer is built (one rank of
    a DistributedDataParallel job passes the DDP wrapper).
    """
    import torch

    from loadersearch.workload.datasets import collate, open_dataset, worker_init_fn
    from loadersearch.workload.emulated import EmulatedAccelerator, describe

    device_type = resolve_device(spec.device)
    device = torch.device(device_type)
    img_size = resolve_img_size(spec.kind, device_type, spec.img_size)
    notes: list[str] = []
    cuda = device_type == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
        if spec.vram_cap is not None and spec.kind != "emulated":
            total = torch.cuda.get_device_properties(device).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, spec.vram_cap / total), device)
        torch.cuda.reset_peak_memory_stats(device)
    elif spec.vram_cap is not None and spec.kind != "emulated":
        notes.append(f"no CUDA device: the VRAM cap does not apply to the {spec.kind} workload")

    dataset = open_dataset(
        spec.data if spec.data is not None else _default_data(),
        spec.data_format,
        img_size=img_size,
        augment=True,
        mosaic=spec.mosaic,
        skip_bad_samples=spec.skip_bad_samples,
        seed=spec.seed,
        split=spec.data_split,
    )
    label = _device_label(device_type)
    peak_vram: Callable[[], int | None] = (
        (lambda: int(torch.cuda.max_memory_reserved(device))) if cuda else (lambda: None)
    )
    if spec.kind == "train":
        step = _train_step(spec, device, img_size, dataset.num_classes, wrap_model)
    elif spec.kind == "loader":

        def step(images: Any, targets: Any) -> None:  # the pipeline alone: batches are dropped
            return None

    else:
        acc = EmulatedAccelerator(spec.emulated_ms, spec.emulated_mib, spec.vram_cap)

        def step(images: Any, targets: Any) -> None:
            acc.step(images.shape[0])

        label = f"{describe(spec.emulated_ms, spec.emulated_mib)}; batches on {label}"
        peak_vram = lambda: acc.peak_bytes  # noqa: E731
        notes.append("EMULATED accelerator: no real device computes; figures are a stand-in")
    logger.debug("workload %s on %s at %d px", spec.kind, label, img_size)
    return Workload(
        kind=spec.kind,
        device=device,
        device_label=label,
        img_size=img_size,
        dataset=dataset,
        collate_fn=collate,
        worker_init_fn=worker_init_fn,
        step=step,
        emulated=spec.emulated,
        notes=notes,
        peak_vram=peak_vram,
        cuda=cuda,
    )


def _default_data() -> str:
    from loadersearch.workload.synthetic import default_dataset

    return default_dataset()
