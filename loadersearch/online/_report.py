"""What online tuning found, and what it cost against what it saves."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig

if TYPE_CHECKING:
    from loadersearch.online._tuner import Tuner


@dataclass
class OnlineReport:
    """The choice of an :class:`~loadersearch.AutoLoader` and its cost.

    Rates are images (samples) per second of the training loop itself (your step included),
    the median of the measured windows. ``cost_s`` is the tuning time beyond what the chosen
    configuration would have taken for the same images (slower candidates, and each
    candidate's worker start-up); ``saved_per_epoch_s`` is the chosen configuration's gain
    over the one you passed (``baseline``: PyTorch's defaults for the knobs you did not
    pass)."""

    config: LoaderConfig  # what serves from now on (persistent_workers decided)
    images_per_s: float  # measured rate of the chosen configuration
    baseline: LoaderConfig
    baseline_images_per_s: float | None  # None when tuning ended before measuring it
    tuning_steps: int  # steps served while tuning
    tuning_images: int  # images served while tuning
    tuning_s: float  # wall time of those steps
    slower_steps: int  # steps served by candidates other than the chosen one
    cost_s: float  # tuning_s - tuning_images / images_per_s
    epoch_images: int  # images in one epoch
    epochs: int | None  # planned epochs, when given
    start_s: float  # the chosen configuration's worker start-up (first-batch latency)
    candidates: list[dict[str, Any]] = field(default_factory=list)

    @property
    def steps_per_s(self) -> float:
        return self.images_per_s / self.config.batch_size

    @property
    def speedup(self) -> float | None:
        """Chosen over baseline (images/s ratio)."""
        if not self.baseline_images_per_s:
            return None
        return self.images_per_s / self.baseline_images_per_s

    @property
    def saved_per_epoch_s(self) -> float | None:
        if not self.baseline_images_per_s or not self.images_per_s:
            return None
        return self.epoch_images * (1 / self.baseline_images_per_s - 1 / self.images_per_s)

    @property
    def saved_s(self) -> float | None:
        """Saved over the remaining planned epochs (None without ``epochs``)."""
        per_epoch = self.saved_per_epoch_s
        if per_epoch is None or self.epochs is None:
            return None
        remaining = max(0.0, self.epochs - self.tuning_images / max(1, self.epoch_images))
        return per_epoch * remaining

    @property
    def break_even_epochs(self) -> float | None:
        """Epochs after which the saving has paid the tuning cost."""
        per_epoch = self.saved_per_epoch_s
        if not per_epoch or per_epoch <= 0:
            return None
        return max(0.0, self.cost_s) / per_epoch

    def to_dict(self) -> dict[str, Any]:
        return {
            "config": self.config.to_dict(),
            "label": self.config.label(),
            "steps_per_s": round(self.steps_per_s, 3),
            "images_per_s": round(self.images_per_s, 2),
            "baseline": self.baseline.label(),
            "baseline_images_per_s": _r(self.baseline_images_per_s),
            "speedup": _r(self.speedup),
            "tuning_steps": self.tuning_steps,
            "tuning_images": self.tuning_images,
            "tuning_s": round(self.tuning_s, 3),
            "slower_steps": self.slower_steps,
            "cost_s": round(self.cost_s, 3),
            "saved_per_epoch_s": _r(self.saved_per_epoch_s),
            "epochs": self.epochs,
            "saved_s": _r(self.saved_s),
            "start_s": round(self.start_s, 4),
            "candidates": self.candidates,
        }

    def summary(self) -> str:
        """A few lines for a person: the choice, the cost, the saving."""
        lines = [
            f"AutoLoader settled on {self.config.label()} after {self.tuning_steps} steps "
            f"({self.tuning_s:.1f} s): {self.images_per_s:.1f} img/s "
            f"({self.steps_per_s:.2f} steps/s, your step included).",
        ]
        if self.speedup is not None:
            lines.append(
                f"  vs what you passed ({self.baseline.label()}): "
                f"{self.baseline_images_per_s:.1f} img/s, x{self.speedup:.2f}."
            )
        lines.append(
            f"  cost: {self.slower_steps} steps on other candidates; {max(0.0, self.cost_s):.1f}"
            " s beyond what the chosen configuration takes for the same steps."
        )
        per_epoch = self.saved_per_epoch_s
        if per_epoch is not None:
            text = f"  saving: {per_epoch:.1f} s per epoch of {self.epoch_images} images"
            if self.saved_s is not None:
                text += f", {self.saved_s:.0f} s over the remaining of {self.epochs} epochs"
            if self.break_even_epochs is not None:
                text += f"; pays for itself after {self.break_even_epochs:.2f} epochs"
            lines.append(text + ".")
        if self.config.persistent_workers:
            lines.append(
                f"  persistent_workers=True from here on: each later epoch skips the worker "
                f"start-up (first batch {self.start_s:.2f} s after a loader start, measured)."
            )
        for c in self.candidates:
            state = c["dropped"] or ("chosen" if c["chosen"] else "kept")
            lines.append(
                f"  {c['label']:<28} {c['segments']} segment(s) {c['images_per_s']:9.1f} "
                f"img/s  {state}"
            )
        return "\n".join(lines)


def _r(x: float | None, n: int = 3) -> float | None:
    return None if x is None else round(x, n)


def build_report(
    tuner: Tuner,
    *,
    final: LoaderConfig,
    baseline: LoaderConfig,
    tuning_s: float,
    tuning_images: int,
    epoch_images: int,
    epochs: int | None,
) -> OnlineReport:
    settled = tuner.settled
    chosen = tuner.candidates.get(settled) if settled is not None else None
    rate = chosen.rate if chosen else 0.0
    base = tuner.candidates.get(baseline)
    slower = sum(c.steps for k, c in tuner.candidates.items() if k != settled)
    cost = tuning_s - tuning_images / rate if rate > 0 else tuning_s
    start = sorted(chosen.starts)[len(chosen.starts) // 2] if chosen and chosen.starts else 0.0
    rows = [
        {
            "label": c.config.label(),
            "config": c.config.to_dict(),
            "segments": len(c.segments),
            "steps": c.steps,
            "images_per_s": round(c.rate, 2),
            "window_rates": [[round(r, 3) for r in seg] for seg in c.segments],
            "dropped": c.dropped,
            "chosen": c.config == settled,
        }
        for c in tuner.candidates.values()
    ]
    return OnlineReport(
        config=final,
        images_per_s=rate,
        baseline=baseline,
        baseline_images_per_s=base.rate if base and base.segments else None,
        tuning_steps=tuner.spent,
        tuning_images=tuning_images,
        tuning_s=tuning_s,
        slower_steps=slower,
        cost_s=cost,
        epoch_images=epoch_images,
        epochs=epochs,
        start_s=start,
        candidates=rows,
    )
