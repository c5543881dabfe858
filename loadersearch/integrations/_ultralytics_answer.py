"""The answer of an Ultralytics study in their terms: ``model.train(...)`` and the ``yolo
train`` line (:class:`UltralyticsResult`, :func:`answer_lines`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch import LoaderConfig

if TYPE_CHECKING:

    from loadersearch import TuneResult
    from loadersearch.report import BaselineResult

from loadersearch.integrations._ultralytics_spec import UltralyticsSpec, _cache_name, _cache_value

_logger = logging.getLogger(__name__)


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
