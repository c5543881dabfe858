"""A small user pipeline, written as a user writes one in their own package, and named by
reference ("helpers.pipelines:make_dataset"): the measuring process imports it from tests/,
which is on the tests' path (pyproject's pythonpath), not on a child process's."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset


class Noise(Dataset):
    """``n`` random images of ``size`` px (seeded by index), label ``index % classes``;
    ``__getitem__(fail_at)`` raises, as a corrupt record would."""

    def __init__(self, n: int = 64, size: int = 16, classes: int = 4, fail_at: int | None = None):
        self.n, self.size, self.classes, self.fail_at = n, size, classes, fail_at

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if index == self.fail_at:
            raise ValueError(f"record {index} is corrupt")
        g = torch.Generator().manual_seed(index)
        return torch.rand(3, self.size, self.size, generator=g), index % self.classes


def make_dataset(n: int = 64, size: int = 16, fail_at: int | None = None) -> Noise:
    return Noise(n=n, size=size, fail_at=fail_at)


def make_model(classes: int = 4) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, classes),
    )


def make_step(model: nn.Module, device: torch.device):
    """A step builder: SGD on cross-entropy, the user's own loop body."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(batch: Any) -> None:
        images, labels = batch
        loss = nn.functional.cross_entropy(model(images), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

    return step


def records(samples: list[tuple[torch.Tensor, int]]) -> dict[str, Any]:
    """A collate giving a dict batch (the default step refuses it: not (inputs, targets))."""
    return {"images": torch.stack([s[0] for s in samples]), "labels": [s[1] for s in samples]}


def not_a_model() -> str:
    return "a string"


def make_empty() -> list:
    return []


def no_step(model: nn.Module, device: torch.device) -> None:
    """A step builder that forgets to return the step."""
    return None


def failing_step(model: nn.Module | None, device: torch.device):
    def step(batch: Any) -> None:
        raise KeyError("labels")

    return step


def make_number() -> int:
    return 3


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(4))


def make_stream() -> torch.utils.data.IterableDataset:
    return _Stream()


class Slow(Dataset):
    """``n`` samples, each a tensor holding its index, read with an emulated storage latency
    of ``ms`` milliseconds (a sleep: no CPU, as a network file system costs), so that the
    number of DataLoader workers decides the throughput even on 2 cores."""

    def __init__(self, n: int = 256, ms: float = 4.0) -> None:
        self.n, self.ms = n, ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        import time

        time.sleep(self.ms / 1000.0)
        return torch.tensor([index])


def make_slow_dataset(n: int = 256, ms: float = 4.0) -> Slow:
    return Slow(n=n, ms=ms)
