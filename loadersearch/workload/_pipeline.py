"""Your own pipeline in the measuring process: the dataset, collate, model and step that a
:class:`~loadersearch.workload._spec.PipelineSpec` names, built for the timed loop.

Each part is a reference ``"module:qualname"`` (see :mod:`loadersearch.workload._refs`), with
its ``*_kwargs`` bound as keyword arguments:

- ``dataset``: called once; returns a map-style ``torch.utils.data.Dataset`` (``__getitem__``
  and ``__len__``; a Dataset class is such a callable). Each short epoch draws
  ``steps * batch_size`` random indices with a fixed seed, the same in every trial.
- ``collate``: the DataLoader's ``collate_fn`` itself (default: PyTorch's ``default_collate``).
- ``model``: called once; returns an ``nn.Module``, which is moved to the device and set to
  train mode.
- ``loss`` (the default step): a class is instantiated (``torch.nn:CrossEntropyLoss``), any
  other callable is the loss itself (``torch.nn.functional:cross_entropy``). The default step
  takes ``(inputs, targets)`` batches: ``loss(model(inputs), targets)`` under float16
  autocast on CUDA, backward through a GradScaler, an optimizer step (``optimizer``: sgd or
  adamw) -- the same function as YOLOv4-tiny's step (:mod:`loadersearch.workload._step`).
- ``step``: your step builder, called once as ``make_step(model, device)`` (``model`` is the
  built model, on the device, or None without a model part); returns ``step(batch)``, called
  once per batch. A class whose instances are callable works.

The batch a step receives is on the device: every tensor in it (in tuples, lists, dicts,
namedtuples, or an object with a ``to`` method) was moved by the timed loop, and the copy is
timed apart (``h2d``). A step does what one iteration of your training does and nothing else
(no logging, no checkpoints); it need not synchronise the device, the loop synchronises at
window edges; its return value is ignored.

Failures: a dataset whose ``__getitem__`` raises is a bad sample naming the index, also from
a DataLoader worker; a factory, the collate or the step that raises is a bad pipeline naming
the part; CUDA out-of-memory and MemoryError keep their own meaning (infeasible).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset, IterableDataset, default_collate

from loadersearch.errors import PipelineError
from loadersearch.workload._datasets.decode import SampleError
from loadersearch.workload._refs import bound, resolve
from loadersearch.workload._spec import PipelineSpec
from loadersearch.workload._step import make_optimizer, train_step


@dataclass
class Pipeline:
    dataset: Dataset  # the user's dataset, wrapped so that a failing sample names its index
    collate_fn: Callable[[list[Any]], Any]
    step: Callable[[Any], None] | None  # None unless the train workload


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return f"{type(e).__name__}: {lines[0]}" if lines else type(e).__name__


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in str(e)


class CheckedDataset(Dataset):
    """The user's dataset; an exception in ``__getitem__`` becomes a :class:`SampleError`
    naming the index, which survives the trip back from a DataLoader worker."""

    def __init__(self, dataset: Any, ref: str) -> None:
        self.dataset = dataset
        self.ref = ref

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> Any:
        try:
            return self.dataset[index]
        except MemoryError:
            raise
        except Exception as e:
            raise SampleError(f"index {index} of {self.ref}", _first_line(e)) from e


class CheckedCollate:
    """The collate function; an exception becomes a :class:`PipelineError` naming it."""

    def __init__(self, fn: Callable[[list[Any]], Any], label: str, hint: str = "") -> None:
        self.fn = fn
        self.label = label
        self.hint = hint

    def __call__(self, samples: list[Any]) -> Any:
        try:
            return self.fn(samples)
        except MemoryError:
            raise
        except Exception as e:
            raise PipelineError(
                f"{self.label} raised {_first_line(e)} on a batch of {len(samples)} samples"
                f"{self.hint}"
            ) from e


def _checked_step(step: Callable[[Any], Any], label: str) -> Callable[[Any], None]:
    """``step``; an exception becomes a :class:`PipelineError` naming it, except running out
    of memory (over the VRAM cap, host memory), which keeps its classification."""

    def checked(batch: Any) -> None:
        try:
            step(batch)
        except PipelineError:
            raise
        except Exception as e:
            if _is_oom(e):
                raise
            raise PipelineError(f"{label} raised {_first_line(e)}") from e

    return checked


def _call(spec: PipelineSpec, part: str, *args: Any) -> Any:
    ref = getattr(spec, part)
    fn = bound(ref, getattr(spec, f"{part}_kwargs"), part)
    try:
        return fn(*args)
    except MemoryError:
        raise
    except Exception as e:
        what = {"step": "step builder", "loss": "loss class"}.get(part, f"{part} factory")
        raise PipelineError(f"the {what} {ref} raised {_first_line(e)}") from e


def _dataset(spec: PipelineSpec) -> CheckedDataset:
    dataset = _call(spec, "dataset")
    kind = type(dataset).__name__
    if isinstance(dataset, IterableDataset):
        raise PipelineError(
            f"the dataset factory {spec.dataset} returned an iterable-style dataset ({kind}): "
            "loadersearch draws the same random indices in every trial, so it needs a "
            "map-style dataset (__getitem__ and __len__)."
        )
    if not (hasattr(dataset, "__getitem__") and hasattr(dataset, "__len__")):
        raise PipelineError(
            f"the dataset factory {spec.dataset} returned a {kind}, not a map-style dataset "
            "(__getitem__ and __len__): return the dataset itself."
        )
    if len(dataset) == 0:
        raise PipelineError(f"the dataset factory {spec.dataset} returned an empty dataset.")
    return CheckedDataset(dataset, spec.dataset)


def _collate(spec: PipelineSpec) -> CheckedCollate:
    if spec.collate is None:
        return CheckedCollate(
            default_collate,
            "PyTorch's default_collate",
            ": give a collate function that batches your samples (collate, --collate)",
        )
    fn = bound(spec.collate, spec.collate_kwargs, "collate")
    return CheckedCollate(fn, f"the collate {spec.collate}")


def _loss(spec: PipelineSpec, device: torch.device) -> Callable[[Any, Any], Any]:
    assert spec.loss is not None
    fn = resolve(spec.loss, "loss")
    if not isinstance(fn, type):
        return bound(spec.loss, spec.loss_kwargs, "loss")
    loss = _call(spec, "loss")  # a loss class: its instance is the loss
    return loss.to(device) if isinstance(loss, torch.nn.Module) else loss


def _default_step(
    spec: PipelineSpec, model: torch.nn.Module, device: Any, optimizer: str
) -> Callable[[Any], None]:
    opt = make_optimizer(optimizer, model.parameters())
    step = train_step(model, _loss(spec, device), opt, device)

    def pairs(batch: Any) -> None:
        if not (isinstance(batch, (tuple, list)) and len(batch) == 2):
            size = f" of {len(batch)}" if isinstance(batch, (tuple, list, dict)) else ""
            raise PipelineError(
                "the default step takes (inputs, targets) batches but the collate gave a "
                f"{type(batch).__name__}{size}: give your own step (step, --step) for "
                "batches of another shape."
            )
        step(batch)

    return pairs


def _train(
    spec: PipelineSpec,
    device: torch.device,
    optimizer: str,
    wrap_model: Callable[[Any], Any] | None = None,
) -> Callable[[Any], None]:
    model = None
    if spec.model is not None:
        model = _call(spec, "model")
        if not isinstance(model, torch.nn.Module):
            raise PipelineError(
                f"the model factory {spec.model} returned a {type(model).__name__}, not a "
                "torch.nn.Module."
            )
        model = model.to(device)
        model.train()
        if wrap_model is not None:  # a DDP rank: your step gets the wrapped model
            model = wrap_model(model)
    if spec.step is None:
        assert model is not None  # PipelineSpec and WorkloadSpec check it
        label = f"the default step (model {spec.model}, loss {spec.loss})"
        return _checked_step(_default_step(spec, model, device, optimizer), label)
    step = _call(spec, "step", model, device)
    if not callable(step):
        raise PipelineError(
            f"the step builder {spec.step} returned a {type(step).__name__}: it is called as "
            "make_step(model, device) and must return the step, a callable taking one batch."
        )
    return _checked_step(step, f"your step (from {spec.step})")


def build_pipeline(
    spec: PipelineSpec,
    *,
    train: bool,
    device: torch.device,
    optimizer: str = "sgd",
    wrap_model: Callable[[Any], Any] | None = None,
) -> Pipeline:
    """The dataset, collate and (when ``train``) step of ``spec``; :class:`PipelineError`
    naming the part when one cannot be imported or built. ``wrap_model`` wraps the model
    (DistributedDataParallel in a rank of a DDP job)."""
    dataset = _dataset(spec)
    collate = _collate(spec)
    step = _train(spec, device, optimizer, wrap_model) if train else None
    return Pipeline(dataset=dataset, collate_fn=collate, step=step)
