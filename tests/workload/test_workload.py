"""create_workload: the hook a DDP rank uses to wrap the model."""

from __future__ import annotations

import torch
from torch import nn

from loadersearch.workload import create_workload
from loadersearch.workload._spec import WorkloadSpec
from loadersearch.workload._yolov4_tiny import YOLOv4Tiny


class _Counting(nn.Module):
    """A stand-in for DistributedDataParallel: wraps the model and counts its forwards."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module
        self.calls = 0

    def forward(self, x: torch.Tensor) -> object:
        self.calls += 1
        return self.module(x)


def test_the_wrapped_model_is_the_one_trained_and_stepped(tiny_dataset: str) -> None:
    wrapped: list[_Counting] = []

    def wrap(model: nn.Module) -> nn.Module:
        assert isinstance(model, YOLOv4Tiny) and model.training
        wrapped.append(_Counting(model))
        return wrapped[0]

    spec = WorkloadSpec(kind="train", data=tiny_dataset, img_size=64, device="cpu")
    workload = create_workload(spec, wrap_model=wrap)
    before = [p.detach().clone() for p in wrapped[0].parameters()]
    batch = workload.collate_fn([workload.dataset[i] for i in range(2)])
    workload.step(batch)

    assert wrapped[0].calls == 1  # the step runs the wrapper (DDP's forward hooks its all-reduce)
    after = list(wrapped[0].parameters())
    # the optimizer holds the wrapped model's parameters
    assert any(not torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_a_pipelines_model_is_wrapped_before_its_default_step() -> None:
    from loadersearch.workload._spec import PipelineSpec

    wrapped: list[_Counting] = []

    def wrap(model: nn.Module) -> nn.Module:
        wrapped.append(_Counting(model))
        return wrapped[0]

    pipeline = PipelineSpec(
        dataset="helpers.pipelines:make_dataset",
        model="helpers.pipelines:make_model",
        loss="torch.nn:CrossEntropyLoss",
        dataset_kwargs={"n": 8},
    )
    spec = WorkloadSpec(kind="train", device="cpu", pipeline=pipeline)
    workload = create_workload(spec, batch_size=4, wrap_model=wrap)
    workload.step(workload.collate_fn([workload.dataset[i] for i in range(4)]))
    assert wrapped and wrapped[0].calls == 1
