"""The training step that YOLOv4-tiny and a user's model + loss share: forward and loss under
autocast (float16) on CUDA, backward through a GradScaler, optimizer step. One function, so
that the built-in workload and the default step of a user's pipeline time the same work."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from loadersearch.workload._spec import OPTIMIZERS


def make_optimizer(name: str, params: Iterable[Any]) -> torch.optim.Optimizer:
    """``sgd`` (momentum 0.937, nesterov, as YOLO recipes) or ``adamw``. The learning rate does
    not change throughput; the optimizer's state and update do."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.01, momentum=0.937, nesterov=True, weight_decay=5e-4)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=1e-3, weight_decay=5e-4)
    raise ValueError(f"Unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}.")


def train_step(
    model: torch.nn.Module,
    loss_fn: Callable[[Any, Any], torch.Tensor],
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    *,
    prepare: Callable[[Any], Any] | None = None,
    split: Callable[[Any], tuple[Any, Any]] | None = None,
) -> Callable[[Any], None]:
    """``step(batch)`` for ``(inputs, targets)`` batches already on ``device``: ``prepare``
    the inputs (e.g. uint8 to float), ``loss_fn(model(inputs), targets)`` under float16
    autocast on CUDA (PyTorch's AMP recipe: forward and loss under autocast), backward
    through a GradScaler, optimizer step. ``split(batch)`` gives ``(inputs, targets)`` for
    batches of another shape. No device synchronisation: the timed loop synchronises at window
    edges."""
    cuda = device.type == "cuda"
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)

    def step(batch: Any) -> None:
        inputs, targets = split(batch) if split is not None else batch
        x = prepare(inputs) if prepare is not None else inputs
        with torch.autocast(device_type=device.type, dtype=torch.float16, enabled=cuda):
            loss = loss_fn(model(x), targets)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    return step
