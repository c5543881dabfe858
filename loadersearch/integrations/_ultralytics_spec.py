"""What an Ultralytics study measures (:class:`UltralyticsSpec`, each option declared once for
``loadersearch run --ultralytics`` and :func:`loadersearch.integrations.ultralytics.tune`), and
their cache's names."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch._options import PATH, TABLE, WHOLE, opt

if TYPE_CHECKING:

    pass


EXTRA = "ultralytics"  # pip install 'loadersearch[ultralytics]'
CACHES = ("false", "ram", "disk")  # in the order they are measured (see _order)


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
