"""Online tuning: :class:`AutoLoader` tunes the DataLoader inside your training loop, during
its first epoch, on the measurement rules of the offline search (windows at the same positions
in every segment, warm-up excluded, the pruner's clearly-slower test), and can read and write
the same studies.

- :mod:`._autoloader`: :class:`AutoLoader` (the stream, the segments, the settled loader) and
  :func:`autoloader`, which wraps an existing DataLoader's arguments.
- :mod:`._tuner`: which configuration next, when to drop one, when to settle (pure logic).
- :mod:`._report`: :class:`OnlineReport`, the choice, its cost and its saving.
- :mod:`._study`: seeds from a stored study of this hardware; the result written back.
"""

from __future__ import annotations

from loadersearch.online._autoloader import AutoLoader, autoloader
from loadersearch.online._report import OnlineReport
from loadersearch.online._tuner import Axis, SegmentShape, Tuner

__all__ = ["AutoLoader", "Axis", "OnlineReport", "SegmentShape", "Tuner", "autoloader"]
