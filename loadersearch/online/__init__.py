"""Online tuning: :class:`AutoLoader` tunes the DataLoader inside your training loop, during
its first epoch, on the measurement rules of the offline search (windows at the same positions
in every segment, warm-up excluded, the pruner's clearly-slower test), and can read and write
the same studies.

- :mod:`._autoloader`: :class:`AutoLoader` (the stream, the segments, the settled loader) and
  :func:`autoloader`, which wraps an existing DataLoader's arguments.
- :mod:`._arguments`: AutoLoader's arguments checked and sorted (the order's, the fixed knobs,
  the rest), and an existing DataLoader's arguments.
- :mod:`._epochs`: an epoch's order drawn and handed out stretch by stretch, the settled
  loader's batches, the device synchronised and the workers stopped at a stretch's edges.
- :mod:`._tuner`: which configuration next, when to drop one, when to settle (pure logic).
- :mod:`._report`: :class:`OnlineReport`, the choice, its cost and its saving.
- :mod:`._shared_study`: seeds from a stored study of this hardware; the result written back.
"""

from __future__ import annotations

from typing import Any

from loadersearch._lazy import lazy_attribute

# Imported on first use: their modules import torch, numpy or optuna (loadersearch._lazy).
_LAZY = {
    "AutoLoader": "_autoloader",
    "autoloader": "_autoloader",
    "OnlineReport": "_report",
    "Axis": "_tuner",
    "SegmentShape": "_tuner",
    "Tuner": "_tuner",
}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = [
    "AutoLoader",
    "Axis",
    "OnlineReport",
    "SegmentShape",
    "Tuner",
    "autoloader",
]
