"""Tune an Ultralytics YOLO training pipeline and answer in Ultralytics' terms.

::

    from loadersearch.integrations import ultralytics as lsu

    if __name__ == "__main__":
        result = lsu.tune(data="data/coco8.yaml", model="yolo11n.yaml", imgsz=640, trials=20)
        print(result.report())   # ... model.train(data=..., workers=6, batch=32, cache="ram")

or ``loadersearch run --ultralytics data.yaml --model yolo11n.yaml``. What is measured is
their own training pipeline, built the way ``DetectionTrainer`` builds it: their dataset
(``build_yolo_dataset``, a ``YOLODataset`` with the augmentations of their default
configuration, ``get_cfg``, and of ``hyp``), their collate (``YOLODataset.collate_fn``), their
``DetectionModel`` (from a ``.yaml``, or a local ``.pt``; never downloaded) and loss
(``model(batch)``: ``v8DetectionLoss``), their step (``/255``, float16 AMP on CUDA through a
GradScaler, an optimizer step with gradient clipping and their EMA every
``round(nbs / batch)`` batches). Each trial is a fresh process, as in every loadersearch study
(:func:`loadersearch.tune`).

What is searched is what ``model.train()`` lets a user choose, as their loader uses it:

- ``workers``: their ``build_dataloader`` starts ``min(os.cpu_count() // max(GPUs, 1),
  workers)`` worker processes, so the range stops at that bound (more is the same loader);
- ``batch``, under the VRAM cap (the batch-size probe);
- ``cache`` (False, ``"ram"``, ``"disk"``): their cache changes how the dataset is built, so
  each choice is a study of its own (the dataset factory takes it), and the choices are
  compared by their confirmed winners; a cache is chosen only when it beats no cache by more
  than the measurement's precision (it costs memory or disk).

Fixed, because their loader fixes them (nothing a user sets changes them): prefetch 4;
persistent workers (their ``InfiniteDataLoader`` repeats its sampler, so the workers and the
dataset's per-worker image buffer live for the whole training); pinned memory whenever a CUDA
device is used (``pin_memory = nd > 0``; Ultralytics versions with a ``PIN_MEMORY`` switch,
``build.PIN_MEMORY``, get it searched, and the answer names the variable); the platform's
start method.

Ultralytics never reaches the network from here: ``YOLO_OFFLINE=1`` is set before it is
imported (unless already set), reading ``DATA.yaml`` skips the plotting font download that
their ``check_det_dataset`` would make, and a ``.pt`` that is not a local file is refused
(``.yaml`` builds the model without weights).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from loadersearch import PipelineSpec
from loadersearch._loader_config import PLATFORM_START_METHOD
from loadersearch.errors import LoaderSearchError, SpecError
from loadersearch.integrations._ultralytics_answer import UltralyticsResult, answer_lines
from loadersearch.integrations._ultralytics_pipeline import (
    _cfg,
    _data_dict,
    _import,
    yolo_dataset,
    yolo_model,
    yolo_step,
)
from loadersearch.integrations._ultralytics_spec import (
    CACHES,
    EXTRA,
    UltralyticsSpec,
    _cache_value,
)
from loadersearch.measure import DEFAULT_PRECISION

if TYPE_CHECKING:

    from loadersearch import TuneResult

__all__ = [
    "CACHES",
    "EXTRA",
    "UltralyticsResult",
    "UltralyticsSpec",
    "answer_lines",
    "pipeline_spec",
    "tune",
    "yolo_dataset",
    "yolo_model",
    "yolo_step",
]

_logger = logging.getLogger(__name__)

_PIPELINE = "loadersearch.integrations._ultralytics_pipeline"  # the parts, by reference
_COLLATE = "ultralytics.data.dataset:YOLODataset.collate_fn"  # their collate, by reference
# The loader knobs a user may narrow or fix: the others are what their loader does.
_USER_KNOBS = ("num_workers", "batch_size")
# The study options the integration sets itself.
_OWN = ("dataset", "model", "loss", "step", "collate_fn", "dataset_kwargs", "model_kwargs")


# -- the search -------------------------------------------------------------------------------


def _check_model(model: str) -> str:
    """``model`` as the measuring process loads it: a ``.pt`` must be a local file (never
    downloaded); a ``.yaml`` is a file or one of Ultralytics' own (``yolo11n.yaml``)."""
    if model.endswith(".pt"):
        if not os.path.isfile(model):
            raise SpecError(
                f"model weights {model} not found: loadersearch never downloads weights. Give "
                "the path of your .pt, or a .yaml (e.g. yolo11n.yaml) to build the model "
                "without weights: the loader's cost does not depend on them."
            )
        return os.path.abspath(model)
    if not model.endswith((".yaml", ".yml")):
        raise SpecError(f"model {model!r}: give a YOLO .yaml (yolo11n.yaml) or a local .pt.")
    return os.path.abspath(model) if os.path.isfile(model) else model


def _check_hyp(hyp: Mapping[str, Any]) -> None:
    """Names that are not their configuration's keys, refused in one line (their own check
    prints the whole ``yolo`` help first), then the values, by their own check."""
    import difflib

    from ultralytics.utils import DEFAULT_CFG_DICT

    for name in hyp:
        if name not in DEFAULT_CFG_DICT:
            close = difflib.get_close_matches(name, list(DEFAULT_CFG_DICT), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise SpecError(
                f"hyp {name!r} is not one of Ultralytics' training arguments{hint}; see "
                "`yolo cfg` for them."
            )
    try:
        _cfg(hyp)  # their own check of the values
    except Exception as e:
        raise SpecError(f"Ultralytics refuses hyp {hyp}: {_first_line(e)}") from e


def _check_data(data: str) -> tuple[str, dict[str, Any]]:
    path = os.path.abspath(os.path.expanduser(data))
    if not os.path.isfile(path):
        raise SpecError(
            f"Ultralytics dataset file {data} not found: give the DATA.yaml your training "
            "uses (yolo train data=...), or write one with `loadersearch make-dataset "
            "--format yolo DIR` (DIR/data.yaml)."
        )
    try:
        info = _data_dict(path)
    except LoaderSearchError:
        raise
    except Exception as e:  # their checks raise SyntaxError, FileNotFoundError, TypeError
        raise SpecError(f"Ultralytics cannot read {data}: {_first_line(e)}") from e
    return path, info


def _first_line(e: BaseException) -> str:
    lines = [ln for ln in str(e).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(e).__name__


def _cuda(device: str | None) -> tuple[bool, int]:
    """Whether the measurement trains on CUDA, and the GPUs their loader counts (``nd``)."""
    from loadersearch import fingerprint

    gpus = fingerprint().gpu_count
    cuda = (device or "auto") != "cpu" and gpus > 0
    return cuda, gpus if cuda else 0


def _study_base(spec: UltralyticsSpec, study: str | None) -> str:
    if study:
        return study
    import re

    def slug(text: str) -> str:
        stem = os.path.splitext(os.path.basename(text.rstrip("/")))[0]
        return re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")

    folder = slug(os.path.dirname(os.path.abspath(spec.data)))
    return f"ultralytics-{folder}-{slug(spec.data)}-{slug(spec.model)}-{spec.imgsz}"


def _space_and_fix(
    options: dict[str, Any], cuda: bool, nd: int, pin_switch: bool
) -> tuple[dict[str, Any], dict[str, Any], int]:
    """The study's ``space`` and ``fix`` (what their loader allows) and the dataset's batch."""
    space = dict(options.pop("space", None) or {})
    fix = dict(options.pop("fix", None) or {})
    other = sorted((set(space) | set(fix)) - set(_USER_KNOBS))
    if other:
        raise SpecError(
            f"{', '.join(other)}: Ultralytics' loader fixes it (prefetch 4, persistent "
            "workers, pinned memory on CUDA, the platform's start method); narrow or fix "
            "num_workers and batch_size only."
        )
    cap = max(1, (os.cpu_count() or 1) // max(nd, 1))
    space.setdefault("num_workers", f"0:{cap}")
    given = [str(fix.get("num_workers", "")), str(space["num_workers"]).split(":")[-1]]
    over = [int(v) for v in given if v.strip().isdigit() and int(v) > cap]
    if over:
        raise SpecError(
            f"num_workers {max(over)}: Ultralytics' loader starts at most os.cpu_count() // "
            f"max(GPUs, 1) = {cap} workers here, whatever workers= says; search up to {cap}."
        )
    fixed = {
        "prefetch_factor": 4,
        "persistent_workers": True,
        "start_method": PLATFORM_START_METHOD,
    }
    if not (pin_switch and cuda):
        fixed["pin_memory"] = cuda
    # the dataset's image buffer is sized by the batch: the largest of the default range
    batch = int(fix.get("batch_size") or 64)
    return space, {**fixed, **fix}, batch


def tune(
    data: str,
    *,
    model: str = "yolo11n.yaml",
    imgsz: int = 640,
    cache: bool | str | Sequence[bool | str] = ("false", "ram"),
    hyp: Mapping[str, Any] | None = None,
    **options: Any,
) -> UltralyticsResult:
    """Search ``workers``, ``batch`` and ``cache`` of an Ultralytics YOLO training of
    ``model`` on ``data`` (a dataset YAML) at ``imgsz``, under the hyperparameters ``hyp``
    (their cfg keys: ``{"mosaic": 0.5}``), measuring their own pipeline (module docstring).

    ``cache``: the choices to measure (False, ``"ram"``, ``"disk"``; default False and ram),
    each a loadersearch study of its own named ``STUDY-cache-CHOICE``. ``options`` are
    :func:`loadersearch.tune`'s study and measurement arguments (``trials``, per cache
    choice; ``study``, ``storage``, ``device``, ``vram_cap``, ``plan``, ``confirm_rounds``,
    ``baselines``, ``probe``, ``settle``, ``seed``, ``verbose``, ``progress``, ...);
    ``space`` and ``fix`` may narrow ``num_workers`` and ``batch_size``. ``progress`` may be
    a callable ``progress(choice, trials)`` returning a Progress per study.

    Bad input (a missing DATA.yaml or weights, an unknown cache, Ultralytics not installed)
    raises a :class:`loadersearch.errors.LoaderSearchError` before anything is measured.
    """
    import loadersearch

    spec = _spec(data, model, imgsz, cache, hyp, options)
    _import()
    from ultralytics.data import build as ultra_build

    _check_hyp(spec.hyp)
    path, info = _check_data(spec.data)
    weights = _check_model(spec.model)
    pin_switch = hasattr(ultra_build, "PIN_MEMORY")
    cuda, nd = _cuda(options.get("device"))
    space, fix, batch = _space_and_fix(options, cuda, nd, pin_switch)
    base = _study_base(spec, options.pop("study", None))
    make_progress = options.pop("progress", None)
    if make_progress is not None and not callable(make_progress):
        raise SpecError("progress: give a callable progress(choice, trials) -> Progress.")
    studies: dict[str, TuneResult] = {}
    for i, choice in enumerate(spec.cache):
        if choice == "false" and _has_disk_cache(info):
            _logger.warning(
                "%s already has *.npy files (a cache='disk' run left them): Ultralytics "
                "reads them with or without a cache, so cache=False measures them too.",
                spec.data,
            )
        pipeline = pipeline_spec(
            dataclasses.replace(spec, data=path, model=weights), choice, info, batch=batch
        )
        per_study = _study_options(options, choice, first=i == 0, make_progress=make_progress)
        step = functools.partial(yolo_step, **pipeline.step_kwargs)
        studies[choice] = loadersearch.tune(
            dataset=pipeline.dataset,
            dataset_kwargs=pipeline.dataset_kwargs,
            collate_fn=pipeline.collate,
            model=pipeline.model,
            model_kwargs=pipeline.model_kwargs,
            step=step if pipeline.step_kwargs else yolo_step,
            study=f"{base}-cache-{choice}",
            space=space,
            fix=fix,
            **per_study,
        )
    return _choose(spec, studies, pin_switch)


def _spec(
    data: str,
    model: str,
    imgsz: int,
    cache: bool | str | Sequence[bool | str],
    hyp: Mapping[str, Any] | None,
    options: Mapping[str, Any],
) -> UltralyticsSpec:
    """:func:`tune`'s arguments as a spec, refused as a :class:`SpecError` when bad, and
    ``options`` that would replace the pipeline the integration builds refused too."""
    try:
        spec = UltralyticsSpec(
            data=data, model=model, imgsz=imgsz, cache=cache, hyp=dict(hyp or {})
        )
    except (TypeError, ValueError) as e:
        raise SpecError(f"ultralytics: {e}") from e
    ours = sorted(set(options) & set(_OWN))
    if ours:
        raise SpecError(
            f"{', '.join(ours)}: the Ultralytics integration builds the pipeline itself "
            "(their dataset, collate, model and loss); use loadersearch.tune() for your own."
        )
    return spec


def _study_options(
    options: Mapping[str, Any],
    choice: str,
    *,
    first: bool,
    make_progress: Callable[[str, int | None], Any] | None,
) -> dict[str, Any]:
    """:func:`loadersearch.tune`'s ``options`` for the study of cache ``choice``: the defaults
    measured in the ``first`` only, and its display (``make_progress``'s, or ``run``'s)."""
    per_study = dict(options)
    if not first:  # the defaults are measured once, where they run (no cache, or the first)
        per_study["baselines"] = False
    if make_progress is not None:
        per_study["progress"] = make_progress(choice, per_study.get("trials"))
    elif per_study.get("verbose", True):  # tune()'s display, its answer in these terms
        per_study["progress"] = study_progress(choice, per_study.get("trials"))
    return per_study


class _StudyProgress:
    """A study's display whose answer is its winner only: the line to paste is
    ``model.train(...)``, given at the end, not a ``DataLoader(...)`` line."""

    def __init__(self, inner: Any, choice: str) -> None:
        self._inner = inner
        self._choice = choice

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def answer(self, lines: list[str]) -> None:
        self._inner.answer([f"cache={_cache_value(self._choice)}: {line}" for line in lines[:1]])


def study_progress(choice: str, trials: int | None, *, quiet: bool = False, err: bool = True):
    """The display of the study of cache ``choice``: ``loadersearch run``'s (on stderr when
    ``err``; nothing but the answer when ``quiet``), its answer the winner alone."""
    from loadersearch._options import default_of
    from loadersearch.report import make_progress
    from loadersearch.search import StudySettings

    target = trials or default_of(StudySettings, "trials")
    return _StudyProgress(make_progress(quiet=quiet, target=target, err=err), choice)


def pipeline_spec(
    spec: UltralyticsSpec, choice: str, info: Mapping[str, Any], *, batch: int = 64
) -> PipelineSpec:
    """The pipeline a measurement of cache ``choice`` builds, by reference: their dataset,
    collate, model and step (``info``: ``DATA.yaml`` as their ``check_det_dataset`` reads
    it; ``batch`` sizes the dataset's image buffer)."""
    hyp = {"hyp": spec.hyp} if spec.hyp else {}
    dataset = {"data": spec.data, "imgsz": spec.imgsz, "cache": _cache_value(choice)}
    model = {"model": spec.model, "nc": int(info["nc"]), "channels": int(info["channels"])}
    return PipelineSpec(
        dataset=f"{_PIPELINE}:yolo_dataset",
        dataset_kwargs={**dataset, "batch": batch, "stride": 32, **hyp},
        collate=_COLLATE,
        model=f"{_PIPELINE}:yolo_model",
        model_kwargs={**model, **hyp},
        step=f"{_PIPELINE}:yolo_step",
        step_kwargs=hyp,
    )


def _has_disk_cache(info: Mapping[str, Any]) -> bool:
    from pathlib import Path

    train = info.get("train")
    folders = train if isinstance(train, list) else [train]
    for folder in folders:
        p = Path(str(folder))
        if p.is_dir() and next(p.rglob("*.npy"), None) is not None:
            return True
    return False


def _spread(r: TuneResult) -> tuple[float, float, bool]:
    """The winner's confirmation range (min, max; its rate when not confirmed) and whether
    the machine was busy during it (inconclusive)."""
    rate = r.images_per_s or 0.0
    w = getattr(getattr(r, "summary", None), "winner", None)
    if w is None:
        return rate, rate, False
    low = w.low if w.low is not None else rate
    high = w.high if w.high is not None else rate
    return low, high, bool(w.inconclusive)


def _choose(
    spec: UltralyticsSpec, studies: dict[str, TuneResult], pin_switch: bool
) -> UltralyticsResult:
    """The cache choice to answer with: the fastest winner, except that a cache must beat
    every cheaper choice (False < disk < ram, by what it costs) clearly: by more than the
    measurement precision, and with its confirmation range above the cheaper one's (the
    studies ran at different times, so only separated ranges tell a difference from the
    machine's load changing). Otherwise the cheaper one is as fast as anything measured."""
    cost = {"false": 0, "disk": 1, "ram": 2}
    feasible = {c: r for c, r in studies.items() if r.best is not None and r.images_per_s}
    notes: list[str] = []
    if not feasible:
        return UltralyticsResult(spec, studies, None, None, None, pin_switch, notes)
    chosen = max(feasible, key=lambda c: feasible[c].images_per_s or 0.0)
    for cheaper in sorted(feasible, key=cost.__getitem__):
        if cost[cheaper] >= cost[chosen]:
            break
        top = feasible[chosen].images_per_s or 0.0
        low = _spread(feasible[chosen])[0]
        high = _spread(feasible[cheaper])[1]
        if top <= (feasible[cheaper].images_per_s or 0.0) * (1 + DEFAULT_PRECISION):
            why = f"is within {DEFAULT_PRECISION:.0%} of"
        elif low <= high:
            why = f"measured {low:.1f}..{top:.1f}+ img/s, overlapping"
        else:
            continue
        notes.append(
            f"cache={_cache_value(chosen)} {why} cache={_cache_value(cheaper)} (up to "
            f"{high:.1f} img/s), which costs less: answering with the latter."
        )
        chosen = cheaper
        break
    if len(feasible) > 1:
        busy = [f"cache={_cache_value(c)}" for c, r in feasible.items() if _spread(r)[2]]
        how = (
            "winners not all confirmed"
            if not all(r.confirmed for r in feasible.values())
            else f"{', '.join(busy)} confirmed on a busy machine: inconclusive"
            if busy
            else "each winner confirmed in its own study"
        )
        notes.append(
            f"The cache choices are separate studies ({how}), compared by their winners' "
            "confirmation ranges."
        )
    r = feasible[chosen]
    return UltralyticsResult(spec, studies, chosen, r.best, r.images_per_s, pin_switch, notes)
