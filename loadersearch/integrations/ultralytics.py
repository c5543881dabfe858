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

import contextlib
import dataclasses
import functools
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch import LoaderConfig, PipelineSpec
from loadersearch._loader_config import PLATFORM_START_METHOD
from loadersearch._options import PATH, TABLE, WHOLE, opt
from loadersearch.errors import LoaderSearchError, SpecError
from loadersearch.integrations import require
from loadersearch.measure import DEFAULT_PRECISION

if TYPE_CHECKING:
    import torch

    from loadersearch import TuneResult
    from loadersearch.report import BaselineResult

__all__ = ["UltralyticsResult", "UltralyticsSpec", "answer_lines", "pipeline_spec", "tune"]

_logger = logging.getLogger(__name__)

EXTRA = "ultralytics"  # pip install 'loadersearch[ultralytics]'
CACHES = ("false", "ram", "disk")  # in the order they are measured (see _order)
_COLLATE = "ultralytics.data.dataset:YOLODataset.collate_fn"  # their collate, by reference
_SELF = __name__
# The loader knobs a user may narrow or fix: the others are what their loader does.
_USER_KNOBS = ("num_workers", "batch_size")
# The study options the integration sets itself.
_OWN = ("dataset", "model", "loss", "step", "collate_fn", "dataset_kwargs", "model_kwargs")


def _cache_name(value: Any) -> str:
    """``False``/``None``/``"false"``/``"none"`` -> ``"false"``; ``True``/``"ram"`` -> ``"ram"``;
    ``"disk"``; else a ValueError naming the choices (Ultralytics' own spellings)."""
    if value is None or value is False:
        return "false"
    if value is True:
        return "ram"
    text = str(value).strip().lower()
    text = {"none": "false", "no": "false", "0": "false", "true": "ram"}.get(text, text)
    if text not in CACHES:
        raise ValueError(
            f"Unknown Ultralytics cache {value!r}; choose from False, ram, disk (their "
            "cache= values), e.g. --ultralytics-cache false,ram."
        )
    return text


def _cache_value(name: str) -> bool | str:
    """Ultralytics' value of a cache choice: ``False``, ``"ram"`` or ``"disk"``."""
    return False if name == "false" else name


@dataclass(frozen=True)
class UltralyticsSpec:
    """What an Ultralytics study tunes: the ``model.train()`` arguments that are not the
    loader's. Each field is an option of ``loadersearch run`` and of :func:`tune`."""

    data: str = opt(  # the dataset YAML, as `yolo train data=` takes it
        kind=PATH, flags=("--ultralytics",), dest="ultralytics_data", metavar="DATA.yaml",
        help="Tune an Ultralytics YOLO training (their dataset, augmentations, collate, model "
        "and loss) on this dataset YAML; the answer is model.train(...) and yolo train "
        "lines. The model is --model (a .yaml, or a local .pt). "
        "`loadersearch make-dataset --format yolo DIR` writes DIR/data.yaml.",
    )  # fmt: skip
    # On the command line the pipeline's --model: with --ultralytics it names the YOLO model.
    model: str = opt("yolo11n.yaml", flags=(), help="The YOLO model: a .yaml or a local .pt.")
    imgsz: int = opt(
        640, kind=WHOLE, low=32, flags=("--imgsz",), dest="imgsz",
        help="With --ultralytics: the training image size, their imgsz [default: {default}].",
    )  # fmt: skip
    # The cache choices to measure, each a study of its own (see the module docstring).
    cache: tuple[str, ...] = opt(
        ("false", "ram"), flags=("--ultralytics-cache",), dest="ultralytics_cache",
        metavar="LIST",
        help="With --ultralytics: their cache= choices to measure, from false, ram, disk "
        "[default: false,ram]. Each is a study of its own; disk writes .npy files next to "
        "your images, which every later training then reads, cache or not.",
    )  # fmt: skip
    # Ultralytics hyperparameters (their cfg keys: mosaic, mixup, fliplr, nbs, ...) the
    # training uses; on the command line --arg dataset.KEY=VALUE.
    hyp: dict[str, Any] = opt({}, kind=TABLE, flags=())

    def __post_init__(self) -> None:
        if not isinstance(self.data, str) or not self.data:
            raise ValueError(f"data must be the path of a dataset YAML but got {self.data!r}.")
        if isinstance(self.imgsz, bool) or int(self.imgsz) != self.imgsz or self.imgsz % 32:
            raise ValueError(
                f"imgsz must be a multiple of 32 (YOLO's stride) but got {self.imgsz!r}."
            )
        given = self.cache
        if isinstance(given, str):
            given = [c for c in given.split(",") if c.strip()]
        elif isinstance(given, (bool, type(None))):
            given = [given]
        names = {_cache_name(c) for c in given}
        if not names:
            raise ValueError("cache: give at least one of false, ram, disk.")
        object.__setattr__(self, "cache", tuple(c for c in CACHES if c in names))
        object.__setattr__(self, "hyp", dict(self.hyp or {}))
        own = {"data", "model", "imgsz", "cache", "workers", "batch"} & set(self.hyp)
        if own:
            raise ValueError(
                f"hyp {', '.join(sorted(own))}: give it as tune()'s argument (or searched), "
                "not as a hyperparameter."
            )


# -- the pipeline, built in the measuring process ------------------------------------------


def _import() -> Any:
    """Ultralytics, imported offline (``YOLO_OFFLINE=1`` unless set: no DNS probe at import,
    no analytics, no update check)."""
    os.environ.setdefault("YOLO_OFFLINE", "1")
    return require("ultralytics", EXTRA)


@contextlib.contextmanager
def _no_font_download() -> Iterator[None]:
    """``check_det_dataset`` asks for a plotting font, a download when the machine lacks it;
    nothing here plots, so the check is skipped while it runs."""
    from ultralytics.data import utils as data_utils

    saved = data_utils.check_font
    data_utils.check_font = lambda *args, **kwargs: None
    try:
        yield
    finally:
        data_utils.check_font = saved


def _cfg(overrides: Mapping[str, Any]) -> Any:
    """Their configuration: ``get_cfg(DEFAULT_CFG, overrides)``, as ``model.train(**kw)``."""
    _import()
    from ultralytics.cfg import get_cfg
    from ultralytics.utils import DEFAULT_CFG

    return get_cfg(DEFAULT_CFG, dict(overrides))


def _data_dict(data: str) -> dict[str, Any]:
    """``DATA.yaml`` read and resolved by their ``check_det_dataset``, never downloading."""
    _import()
    from ultralytics.data.utils import check_det_dataset

    with _no_font_download():
        return check_det_dataset(data, autodownload=False)


def yolo_dataset(
    data: str,
    imgsz: int,
    cache: bool | str = False,
    batch: int = 16,
    stride: int = 32,
    hyp: Mapping[str, Any] | None = None,
) -> Any:
    """Their training dataset, as ``DetectionTrainer.build_dataset`` builds it:
    ``build_yolo_dataset(cfg, data["train"], batch, data, mode="train", stride=stride)`` with
    ``cfg = get_cfg(overrides={imgsz, cache, **hyp})``. ``batch`` sizes its per-worker image
    buffer (``min(images, 8 x batch, 1000)``), as the training batch does."""
    _import()
    from ultralytics.data import build_yolo_dataset

    cfg = _cfg({**dict(hyp or {}), "data": data, "imgsz": imgsz, "cache": cache})
    info = _data_dict(data)
    return build_yolo_dataset(cfg, info["train"], batch, info, mode="train", stride=stride)


def yolo_model(model: str, nc: int, channels: int = 3, hyp: Mapping[str, Any] | None = None):
    """Their ``DetectionModel``, as ``DetectionTrainer.get_model`` builds it: from the
    ``.yaml`` (or the ``.pt``'s own yaml, its weights loaded), ``nc`` classes, ``args`` set
    (the loss reads its gains there), the ``.dfl`` layer frozen as their trainer freezes it."""
    _import()
    from ultralytics.nn.tasks import DetectionModel, load_checkpoint

    weights = None
    cfg: Any = model
    if model.endswith(".pt"):
        weights, _ = load_checkpoint(model)
        cfg = weights.yaml
    net = DetectionModel(cfg, nc=nc, ch=channels, verbose=False)
    if weights is not None:
        net.load(weights)
    net.args = _cfg({**dict(hyp or {}), "model": model})
    for name, p in net.named_parameters():
        p.requires_grad = ".dfl" not in name
    return net


def yolo_step(
    model: torch.nn.Module, device: torch.device, hyp: Mapping[str, Any] | None = None
) -> Any:
    """One iteration of their ``_do_train``: ``img / 255`` (``preprocess_batch``), the loss
    under float16 autocast on CUDA, backward through a GradScaler, and every
    ``round(nbs / batch)`` batches their ``optimizer_step`` (unscale, clip to 10, step,
    update, zero_grad, EMA update). The optimizer is SGD at their lr0 and momentum."""
    import torch

    _import()
    from ultralytics.utils.torch_utils import ModelEMA

    cfg = _cfg(dict(hyp or {}))
    amp = device.type == "cuda" and bool(cfg.amp)
    scaler = torch.amp.GradScaler("cuda", enabled=amp)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.SGD(params, lr=cfg.lr0, momentum=cfg.momentum, nesterov=True)
    ema = ModelEMA(model)
    done = {"batches": 0}

    def step(batch: dict[str, Any]) -> None:
        batch["img"] = batch["img"].float() / 255
        with torch.autocast(device.type, dtype=torch.float16, enabled=amp):
            loss, _ = model(batch)
        scaler.scale(loss.sum()).backward()
        done["batches"] += 1
        if done["batches"] % max(round(cfg.nbs / batch["img"].shape[0]), 1) == 0:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, max_norm=10.0)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()
            ema.update(model)

    return step


# -- the answer, in their terms -------------------------------------------------------------


def _literal(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


def answer_lines(
    data: str,
    model: str,
    imgsz: int,
    workers: int,
    batch: int,
    cache: bool | str,
    hyp: Mapping[str, Any] | None = None,
    pin_memory: bool | None = None,
) -> list[str]:
    """The lines to paste: ``model = YOLO(...)``, ``model.train(...)`` and the ``yolo train``
    command. ``pin_memory`` is given only for an Ultralytics with a ``PIN_MEMORY`` switch
    (an environment variable, named before the command)."""
    cache = _cache_value(_cache_name(cache))
    args: dict[str, Any] = {"data": data, "imgsz": imgsz, **dict(hyp or {})}
    args.update(workers=workers, batch=batch, cache=cache)
    python = ", ".join(f"{k}={_literal(v)}" for k, v in args.items())
    words = " ".join(f"{k}={v}" for k, v in {"data": data, "model": model, **args}.items())
    env = "" if pin_memory is None else f"PIN_MEMORY={pin_memory} "
    lines = [
        f"model = YOLO({_literal(model)})",
        f"model.train({python})",
        f"{env}yolo train {words}",
    ]
    if pin_memory is not None:  # read by their data/build.py when it is imported
        lines.insert(0, f'os.environ["PIN_MEMORY"] = "{pin_memory}"  # before ultralytics')
    return lines


@dataclass
class UltralyticsResult:
    """What :func:`tune` found: one loadersearch study per cache choice (``studies``), the
    chosen cache, its winner, and the lines to paste."""

    spec: UltralyticsSpec
    studies: dict[str, TuneResult]  # by cache choice: "false", "ram", "disk"
    cache: str | None  # the chosen cache choice; None: no study has a feasible configuration
    best: LoaderConfig | None  # its winner
    images_per_s: float | None
    pin_switch: bool = False  # this Ultralytics has a PIN_MEMORY switch: the answer names it
    notes: list[str] = field(default_factory=list)

    @property
    def workers(self) -> int:
        return self._best().num_workers

    @property
    def batch(self) -> int:
        return self._best().batch_size

    def train_kwargs(self) -> dict[str, Any]:
        """``model.train()``'s keyword arguments: data, imgsz, the hyperparameters measured
        under, workers, batch, cache."""
        best = self._best()
        return {
            "data": self.spec.data,
            "imgsz": self.spec.imgsz,
            **self.spec.hyp,
            "workers": best.num_workers,
            "batch": best.batch_size,
            "cache": _cache_value(self.cache or "false"),
        }

    def lines(self) -> list[str]:
        """The lines to paste (:func:`answer_lines`)."""
        best = self._best()
        return answer_lines(
            self.spec.data,
            self.spec.model,
            self.spec.imgsz,
            best.num_workers,
            best.batch_size,
            _cache_value(self.cache or "false"),
            self.spec.hyp,
            best.pin_memory if self.pin_switch else None,
        )

    def default(self) -> BaselineResult | None:
        """Ultralytics' defaults as measured (their rule's baseline: ``workers=8`` as their
        loader cuts it, ``batch=16``, no cache), when the no-cache study measured them."""
        study = self.studies.get("false")
        if study is None:
            return None
        return next((b for b in study.summary.baselines if "ultralytics" in b.name), None)

    def report(self) -> str:
        """Each cache choice's winner, Ultralytics' defaults against the answer, the lines."""
        out = []
        for name, r in self.studies.items():
            if r.best is None or r.images_per_s is None:
                out.append(f"cache={_cache_value(name)}: no feasible configuration")
                continue
            how = "confirmed" if r.confirmed else "unconfirmed"
            out.append(
                f"cache={_cache_value(name)}: {_loader_terms(r.best)}: "
                f"{r.images_per_s:.1f} img/s ({how}; study {r.study_name})"
            )
        if self.best is None or self.images_per_s is None:
            return "\n".join([*out, "No feasible configuration: nothing to paste."])
        base = self.default()
        if base is not None and base.rate:
            started = base.label.split()[0].lstrip("w")  # "w2 b16 pf4 persist"
            out.append(
                f"Ultralytics' defaults (workers=8: their loader starts {started} here; "
                f"batch=16, cache=False): {base.rate:.1f} img/s; the answer: "
                f"{self.images_per_s:.1f} img/s ({self.images_per_s / base.rate:.2f}x)"
            )
        out.extend(self.notes)
        out.append("Paste into your training:")
        out.extend(f"  {line}" for line in self.lines())
        return "\n".join(out)

    def __str__(self) -> str:
        return self.report()

    def _best(self) -> LoaderConfig:
        if self.best is None:
            from loadersearch.errors import StudyError

            raise StudyError("no Ultralytics study has a feasible configuration.")
        return self.best


def _loader_terms(config: LoaderConfig) -> str:
    pin = " pin_memory" if config.pin_memory else ""
    return f"workers={config.num_workers} batch={config.batch_size}{pin}"


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
    prints the whole ``yolo`` help first)."""
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
    _import()
    from ultralytics.data import build as ultra_build

    _check_hyp(spec.hyp)
    try:
        _cfg(spec.hyp)  # their own check of the values
    except Exception as e:
        raise SpecError(f"Ultralytics refuses hyp {spec.hyp}: {_first_line(e)}") from e
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
        per_study = dict(options)
        if i > 0:  # the defaults are measured once, where they run (no cache, or the first)
            per_study["baselines"] = False
        if make_progress is not None:
            per_study["progress"] = make_progress(choice, per_study.get("trials"))
        elif per_study.get("verbose", True):  # tune()'s display, its answer in these terms
            per_study["progress"] = study_progress(choice, per_study.get("trials"))
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
        dataset=f"{_SELF}:yolo_dataset",
        dataset_kwargs={**dataset, "batch": batch, "stride": 32, **hyp},
        collate=_COLLATE,
        model=f"{_SELF}:yolo_model",
        model_kwargs={**model, **hyp},
        step=f"{_SELF}:yolo_step",
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
