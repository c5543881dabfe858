"""The steps :class:`~loadersearch.search._structured.StructuredStrategy` takes from a
configuration: one knob at a time, along a doubling ladder (:func:`ladder`), by bisection
between measured values, or to the vertex of the worker curve (:mod:`._worker_curve`), and the
configurations those steps land on (:class:`LadderSteps`)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from loadersearch._loader_config import DEFAULT_PREFETCH, LoaderConfig
from loadersearch.search._space import SearchSpace
from loadersearch.search._worker_curve import worker_vertex

W, B, PIN, PF, PERSIST, CACHE = (
    "num_workers",
    "batch_size",
    "pin_memory",
    "prefetch_factor",
    "persistent_workers",
    "cache",
)


def ladder(values: Sequence[int]) -> list[int]:
    """The coarse steps through ordered integer ``values``: the ends and the powers of two
    between them (0..32 -> 0 1 2 4 8 16 32; batch 8..128 step 8 -> 8 16 32 64 128)."""
    lo, hi = values[0], values[-1]
    return sorted({lo, hi} | {v for v in values if v > 0 and v & (v - 1) == 0})


def fitting_prefetch(rungs: Sequence[int], workers: int, batch: int, inflight: float) -> int:
    """The deepest of the prefetch ``rungs`` whose queue (``workers x prefetch x batch``
    images) fits ``inflight`` images, the shallowest where none does."""
    return max((r for r in rungs if workers * r * batch <= inflight), default=rungs[0])


# The throughput "falls" above a worker count when the next count measured above it is more
# than this below it: beyond the noise of two measurements (up to 8% each on the zoo; at 10%
# a noisy draw on heldout-2304's shoulders, 8 and 32 workers around a peak at 17, turned the
# search down in 16 of 50 seeds).
FALLS = 0.20
# Workers "do not help" where no configuration with workers measured more than 10% above the
# best without any (PyTorch's default, a baseline): the counts measured, the baselines' 8 to 32
# on a server, lie off a peak that is narrow and low, or the loader does not bound the rate
# at all. Then the worker ladder steps down first: a narrow peak at 2 workers on a 32-core host
# (twelfth-2413 of the zoo) was never walked down to, and where nothing matters the step down
# costs nothing.
WORKERS_FLAT = 0.10
# Where the nearest worker count measured above is more than FAR_ABOVE times the best's (the
# baselines' 8 and 32 on a server), a fall there says the peak lies below that count, not
# below the best's: it turns the ladder down only where the count above measured at less
# than half the rate (FALLS_FAR).
FAR_ABOVE = 2.0
FALLS_FAR = 0.50


class LadderSteps:
    """The moves one knob away from a configuration, on the values of a search space: a base
    of the structured strategy, which decides their order."""

    space: SearchSpace
    values: dict[str, list[Any]]  # each knob's values in the space, in order
    ladders: dict[str, list[int]]  # the coarse steps of workers, batch and prefetch
    pin: bool
    default_prefetch: int
    # Images the host's memory holds in flight (workers x prefetch x batch) without strain, or
    # None (ample or unknown): the default prefetch is the deepest rung of its ladder that
    # fits (:meth:`_prefetch_for`).
    inflight_images: float | None = None
    default_persistent: bool
    default_cache: Any
    _configs: list[LoaderConfig] | None

    def _vertex(
        self,
        best: LoaderConfig,
        known: Callable[[LoaderConfig, bool], bool],
        values: dict[LoaderConfig, float],
        *,
        fine: bool,
    ) -> list[LoaderConfig]:
        """The worker count where a parabola through the best count and its nearest measured
        neighbours (log2 of the workers against the log of the throughput, at ``best``'s other
        knobs) peaks: an optimum between ladder points (5, 7, 14, 20) in one step, where a
        bisection needs two or three. Nothing when ``best`` is at an end of what was measured
        or the vertex rounds to a measured count. Coarse (``fine`` False): only while the
        neighbours are more than 1.5x apart; fine: down to neighbours 1.25x apart."""
        w = best.num_workers
        if w <= 0:
            return []
        at: dict[int, float] = {}
        other: dict[int, float] = {}  # the other persistence (a baseline), where none matches
        for c, v in values.items():
            if c.num_workers > 0 and (c.batch_size, c.cache) == (best.batch_size, best.cache):
                into = at if c.persistent_workers == best.persistent_workers else other
                into[c.num_workers] = max(v, into.get(c.num_workers, 0.0))
        at = {**other, **at}
        if w not in at:
            return []
        below = [x for x in at if x < w]
        above = [x for x in at if x > w]
        if not below or not above:
            return []
        lo, hi = max(below), min(above)
        if (hi > 1.5 * lo) == fine or hi <= 1.25 * lo:
            return []
        vertex = worker_vertex((lo, at[lo]), (w, at[w]), (hi, at[hi]))
        if vertex is None:
            return []
        between = [x for x in self.values[W] if lo < x < hi and x != w]
        if not between:
            return []
        pick = min(between, key=lambda x: (abs(math.log2(x) - math.log2(vertex)), x))
        config = self._with(best, W, pick)
        return [config] if config is not None and not known(config, False) else []

    def _coarse(self, best: LoaderConfig, knob: str, *, up_first: bool) -> list[LoaderConfig]:
        """The ladder steps just above and just below ``best``'s value of ``knob``."""
        value = getattr(best, knob)
        if value is None:  # prefetch_factor without workers
            return []
        steps = self.ladders[knob]
        up = [v for v in steps if v > value][:1]
        down = [v for v in steps if v < value][-1:]
        order = up + down if up_first else down + up
        return [c for c in (self._with(best, knob, v) for v in order) if c is not None]

    def _toggle(self, best: LoaderConfig, knob: str) -> list[LoaderConfig]:
        others = [v for v in self.values[knob] if v != getattr(best, knob)]
        return [c for c in (self._with(best, knob, v) for v in others) if c is not None]

    def _bisect(
        self,
        best: LoaderConfig,
        knob: str,
        known: Callable[[LoaderConfig, bool], bool],
        values: dict[LoaderConfig, float],
        *,
        fine: bool,
        minor: bool = False,
        resolution: float = 1.0,
    ) -> list[LoaderConfig]:
        """Midpoints between ``best``'s value and the nearest values measured on either side
        (with ``best``'s other knobs), the side whose neighbour measured better first. Coarse
        (``fine`` False): only where the neighbour is more than 1.5x away (4 and 8 -> 6);
        fine: the rest (4 and 6 -> 5), down to neighbours ``resolution`` x apart."""
        value = getattr(best, knob)
        if value is None:
            return []
        seen = {v for v in self.values[knob] if self._known(best, knob, v, known, minor)}
        found = []
        for below in (True, False):
            nearer = [v for v in seen if (v < value if below else v > value)]
            if not nearer:
                continue
            neighbour = max(nearer) if below else min(nearer)
            lo, hi = min(neighbour, value), max(neighbour, value)
            between = [v for v in self.values[knob] if lo < v < hi]
            if not between or (hi > 1.5 * max(lo, 1)) == fine:
                continue
            if fine and hi <= resolution * max(lo, 1):
                continue
            middle = (lo + hi) / 2
            pick = min(between, key=lambda v: (abs(v - middle), v))
            score = values.get(self._with(best, knob, neighbour), 0.0)
            found.append((-score, self._with(best, knob, pick)))
        return [c for _, c in sorted(found, key=lambda f: f[0]) if c is not None]

    def _known(self, best: LoaderConfig, knob: str, value: Any,
               known: Callable[[LoaderConfig, bool], bool], minor: bool) -> bool:  # fmt: skip
        config = self._with(best, knob, value)
        return config is not None and known(config, minor)

    def _nearest_unmeasured(
        self, best: LoaderConfig, held: set[LoaderConfig]
    ) -> LoaderConfig | None:
        if self._configs is None:
            self._configs = self.space.configs()
        left = [c for c in self._configs if c not in held]
        if not left:
            return None
        return min(left, key=lambda c: self._distance(best, c))

    def _distance(self, a: LoaderConfig, b: LoaderConfig) -> float:
        total = 0.0
        for knob, vals in self.values.items():
            va, vb = getattr(a, knob), getattr(b, knob)
            if va == vb:
                continue
            if va is None or vb is None or len(vals) < 2:
                total += 1.0
            else:
                total += abs(vals.index(va) - vals.index(vb)) / (len(vals) - 1)
        return total

    def _below_fewest(
        self, best: LoaderConfig, workers_known: Callable[[LoaderConfig, bool], bool]
    ) -> list[LoaderConfig]:
        """The worker ladder's rung just below the fewest workers measured (more than none),
        at ``best``'s other knobs, where it is not known: the next count down where the counts
        measured all look like none."""
        fewest = min((c.num_workers for c in self._held if c.num_workers > 0), default=0)
        rungs = [w for w in self.ladders[W] if 0 < w < fewest]
        if not rungs:
            return []
        move = self._with(best, W, rungs[-1])
        return [move] if move is not None and not workers_known(move, False) else []

    def _prefetch_moves(
        self, best: LoaderConfig, values: dict[LoaderConfig, float]
    ) -> list[LoaderConfig]:
        """The prefetch checks around ``best``: the ladder's steps, the shallower first once a
        deeper queue at ``best``'s other knobs was measured (it measured below ``best``, the
        incumbent: the queue's cost was seen). From the top rung of the ladder the step down
        is PyTorch's default (2, or the range's end nearest it), not the rung below (4); the
        rungs between come from the bisection (8 -> 2, 5, 6, 7 where 8 -> 4, 6, 7 before: one
        trial more to reach 7 where the deep queue pays). A cost of deep queues (7% on
        eleventh-shallow-queue-16 of the zoo) is twice as plain at the default as one rung
        down, which left the search at prefetch 8 in most seeds. Under a memory bound the
        start's rung is the deepest that fits, below the top: the steps are the ladder's."""
        pf = best.prefetch_factor
        if pf is None:
            return []
        same = [v for c, v in values.items() if c.prefetch_factor is not None
                and c.prefetch_factor > pf and _major(c) == _major(best)
                and c.pin_memory == best.pin_memory]  # fmt: skip
        up_first = not same or max(same) >= values.get(best, 0.0)
        steps = self._coarse(best, PF, up_first=up_first)
        lo, hi = self.space.prefetch_factor
        far = min(max(DEFAULT_PREFETCH, lo), hi)
        if pf == self.ladders[PF][-1] and far < pf:
            # the top rung's step down goes to the default instead (there is no step up)
            down = self._with(best, PF, far)
            steps = [down if m.prefetch_factor < pf and down is not None else m for m in steps]
        return steps

    # -- configurations ------------------------------------------------------------------------

    def _prefetch_for(self, workers: int, batch: int) -> int:
        """The default prefetch_factor at ``workers`` x ``batch``: :attr:`default_prefetch`,
        or where the host's memory bounds the images in flight (:attr:`inflight_images`),
        the deepest rung of the prefetch ladder at or below it whose queue fits (the
        shallowest where none does: the queue is then as small as the space allows)."""
        if self.inflight_images is None or workers <= 0:
            return self.default_prefetch
        rungs = [pf for pf in self.ladders[PF] if pf <= self.default_prefetch]
        return fitting_prefetch(rungs or self.ladders[PF][:1], workers, batch,
                                self.inflight_images)  # fmt: skip

    def _batch_that_fits(self, workers: int, batch: int) -> int:
        """``batch``, or where the memory bound (:attr:`inflight_images`) holds less than one
        batch a worker at the shallowest prefetch, the largest batch of the ladder at or below
        it whose queue fits (the smallest where none does)."""
        if self.inflight_images is None or workers <= 0:
            return batch
        steps = sorted({batch, *(b for b in self.ladders[B] if b <= batch)})
        fits = [b for b in steps if workers * self.ladders[PF][0] * b <= self.inflight_images]
        return max(fits) if fits else steps[0]

    def _workers_that_fit(self, workers: int) -> int:
        """``workers``, or under the memory bound the most workers, at most ``workers`` and on
        the worker ladder below it, whose queue at the smallest batch and prefetch fits (the
        fewest where none does)."""
        if self.inflight_images is None:
            return workers
        least = self.ladders[PF][0] * self.ladders[B][0]
        steps = [w for w in {workers, *self.ladders[W]} if 0 < w <= workers]
        fits = [w for w in steps if w * least <= self.inflight_images]
        return max(fits) if fits else min(steps, default=workers)

    def _config(self, workers: int, batch: int, pin: bool, prefetch: int | None = None,
                persistent: bool | None = None, cache: Any = ...) -> LoaderConfig:  # fmt: skip
        cache = self.default_cache if cache is ... else cache
        if workers == 0:
            return LoaderConfig(0, batch, pin, cache=cache)
        return LoaderConfig(
            workers,
            batch,
            pin,
            self._prefetch_for(workers, batch) if prefetch is None else prefetch,
            self.default_persistent if persistent is None else persistent,
            cache=cache,
        )

    def _with(self, config: LoaderConfig, knob: str, value: Any) -> LoaderConfig | None:
        """``config`` with one knob changed; None where the knob does not apply (prefetch or
        persistence without workers). Where memory bounds the queue
        (:attr:`inflight_images`), a move of the workers or the batch keeps the prefetch
        unless the queue would no longer fit: it then shrinks to the deepest rung that does
        (:meth:`_prefetch_for`); it never deepens, so a move changes one knob where it can."""
        w, b, pin = config.num_workers, config.batch_size, config.pin_memory
        pf, persist, cache = config.prefetch_factor, config.persistent_workers, config.cache
        if knob in (PF, PERSIST) and w == 0:
            return None
        if knob in (W, B) and w and value and self.inflight_images is not None:
            workers, batch = (value, b) if knob == W else (w, value)
            pf = min(pf, self._prefetch_for(workers, batch))
        if knob == W:
            if w == 0:  # workers appear: their knobs take the defaults
                return self._config(value, b, pin, cache=cache)
            return self._config(value, b, pin, pf, persist, cache)
        if knob == B:
            return self._config(w, value, pin, pf, persist, cache)
        if knob == PIN:
            return self._config(w, b, value, pf, persist, cache)
        if knob == PF:
            return self._config(w, b, pin, value, persist, cache)
        if knob == CACHE:
            return self._config(w, b, pin, pf, persist, value)
        return self._config(w, b, pin, pf, value, cache)


def _falls_above(best: LoaderConfig, shape: dict[LoaderConfig, float], knob: str = W,
                 falls: float = FALLS) -> bool:  # fmt: skip
    """Whether the throughput was seen to fall above ``best``'s value of ``knob`` (the worker
    count or the batch size): at a value of the other one where both were measured (any
    prefetch, persistence or pinning: the baselines measure other ones), the nearest value
    above measured more than ``falls`` (:data:`FALLS` for the workers, :data:`FALLS_BATCH` for
    the batch) below ``best``'s, and nowhere did it measure as high. Then the peak lies at or
    below this value, and that ladder steps down first; for the workers, a count above more
    than :data:`FAR_ABOVE` times ``best``'s counts only where it fell by :data:`FALLS_FAR`.
    Never for a ``best`` without workers (its rate says nothing of the loader's)."""
    other = B if knob == W else W
    v = getattr(best, knob)
    if best.num_workers <= 0:
        return False
    by_other: dict[int, dict[int, float]] = {}
    for c, rate in shape.items():
        if c.num_workers > 0 and c.cache == best.cache:
            at = by_other.setdefault(getattr(c, other), {})
            at[getattr(c, knob)] = max(rate, at.get(getattr(c, knob), 0.0))
    fell = rises = False
    for at in by_other.values():
        above = [x for x in at if x > v]
        if v not in at or not above:
            continue
        far = knob == W and min(above) > FAR_ABOVE * v  # the baselines' 32 above their 8
        if at[min(above)] < (1.0 - (max(falls, FALLS_FAR) if far else falls)) * at[v]:
            fell = True
        else:
            rises = True
    return fell and not rises


def _workers_flat(best: LoaderConfig, values: dict[LoaderConfig, float]) -> bool:
    """Whether every configuration with workers (and ``best``'s cache) measured within
    :data:`WORKERS_FLAT` of the best one without workers; False where either side has no
    complete measurement (``values``: a pruned trial's partial windows say too little here).
    The margin is within the noise of two measurements (:data:`FALLS` is twice it): a real
    gain of 10-20% may read as flat, and then the step down costs a trial, not the answer."""
    same = {c: v for c, v in values.items() if c.cache == best.cache}
    without = max((v for c, v in same.items() if c.num_workers == 0), default=0.0)
    with_ = max((v for c, v in same.items() if c.num_workers > 0), default=0.0)
    return without > 0 and 0 < with_ <= (1.0 + WORKERS_FLAT) * without


def _major(config: LoaderConfig) -> tuple[int, int, bool, str | None]:
    return config.num_workers, config.batch_size, config.persistent_workers, config.cache
