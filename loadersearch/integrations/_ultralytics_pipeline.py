"""Ultralytics' training pipeline as loadersearch measures it, built in the measuring process
by reference (``module:name`` parts of a :class:`~loadersearch.PipelineSpec`): their YOLO
dataset with the augmentations of the given hyperparameters, their model and loss, and a step
as their trainer takes it (:mod:`loadersearch.integrations.ultralytics`)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from loadersearch.integrations import require

if TYPE_CHECKING:
    import torch


from loadersearch.integrations._ultralytics_spec import EXTRA

_logger = logging.getLogger(__name__)


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
