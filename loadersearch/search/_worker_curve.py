"""Where throughput peaks between three measured worker counts: the vertex of the parabola
through them, on log2 of the workers against the log of the throughput (one step of successive
parabolic interpolation). Throughput against workers rises, levels and falls roughly
symmetrically on that scale, so an optimum between ladder points (5, 7, 10, 20 workers) is one
step away instead of the two or three a bisection needs."""

from __future__ import annotations

import math

__all__ = ["worker_vertex"]

# Closer than this (in log2 of the workers) to the middle count, the middle count is the peak
# (a plateau or a sharp top): nothing to try between.
AT_THE_PEAK = 0.2


def worker_vertex(
    lo: tuple[int, float], mid: tuple[int, float], hi: tuple[int, float]
) -> float | None:
    """The worker count (not rounded) where the parabola through ``(workers, throughput)``
    points ``lo`` < ``mid`` < ``hi`` peaks, kept between ``lo`` and ``hi``; None when the three
    lie on a line or the peak is at ``mid``."""
    xs = [math.log2(w) for w, _ in (lo, mid, hi)]
    ys = [math.log(v) for _, v in (lo, mid, hi)]
    num = (xs[1] - xs[0]) ** 2 * (ys[1] - ys[2]) - (xs[1] - xs[2]) ** 2 * (ys[1] - ys[0])
    den = (xs[1] - xs[0]) * (ys[1] - ys[2]) - (xs[1] - xs[2]) * (ys[1] - ys[0])
    if den == 0:
        return None
    vertex = min(max(xs[1] - 0.5 * num / den, xs[0]), xs[2])
    if abs(vertex - xs[1]) < AT_THE_PEAK:
        return None
    return 2**vertex
