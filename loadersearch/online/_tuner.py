"""Which configuration to try next, and when to stop: the tuner behind :class:`AutoLoader`,
pure logic over measured segments (no DataLoader, no clock), so it is tested on its own.

A *segment* is one configuration serving a stretch of the epoch: ``warmup`` steps, not
measured (its workers start and deliver their first round), then ``windows`` windows of
``window_steps`` steps. Every candidate's segment has the same shape, so window ``k`` means
the same position after a loader start in every segment: the windows are paired, as the
offline study's windows are, and a candidate is dropped only when the offline pruner's test
(:func:`loadersearch.search._pruner.clearly_slower`) says it is clearly slower than the best,
window for window.

The order, without a study: climb the worker ladder (0, 1, 2, 4, ...) until a rung is clearly
slower than the best or two rungs in a row did not beat it; try larger prefetch factors on
the best (and pinned memory when a GPU is used); then race the candidates not clearly slower
than the best, one more segment each per round, dropping the clearly slower ones, up to
``race_rounds`` segments per candidate. With a study, the stored winners (and the user's own
configuration) are raced directly. The budget, in steps, stops all of it: the tuner settles
on the best so far as soon as the next segment would not fit.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure import coefficient_of_variation
from loadersearch.search import clearly_slower, noise_margin


@dataclass(frozen=True)
class SegmentShape:
    """How long one candidate serves: ``warmup`` unmeasured steps, then ``windows`` windows
    of ``window_steps`` steps."""

    warmup: int
    windows: int = 4
    window_steps: int = 8

    def __post_init__(self) -> None:
        if self.warmup < 1:
            raise ValueError(f"warmup must be at least 1 step but got {self.warmup}.")
        if self.windows < 4:
            # the paired test needs 4 windows to reach p < 0.1 (all 4 slower: p = 1/16)
            raise ValueError(f"windows must be at least 4 but got {self.windows}.")
        if self.window_steps < 1:
            raise ValueError(f"window_steps must be at least 1 but got {self.window_steps}.")

    @property
    def steps(self) -> int:
        return self.warmup + self.windows * self.window_steps

    def edges(self) -> list[int]:
        """Step indices (within a segment) at which each window begins, and the last ends."""
        return [self.warmup + k * self.window_steps for k in range(self.windows + 1)]


@dataclass(frozen=True)
class Axis:
    """One knob tried around the best so far: ``values(best)`` in order, stopping at the first
    that does not become the best, or all of them with ``every``."""

    values: Callable[[LoaderConfig], list[LoaderConfig]]
    every: bool = False


@dataclass
class Candidate:
    """One configuration and what its segments measured."""

    config: LoaderConfig
    segments: list[list[float]] = field(default_factory=list)  # window rates (images/s)
    starts: list[float] = field(default_factory=list)  # first-batch latency of each segment
    seconds: float = 0.0  # wall time of its segments, warm-up included
    steps: int = 0  # steps it served
    dropped: str | None = None  # why it left the race

    @property
    def paired(self) -> list[float]:
        """The mean rate at each window position over its segments (what the test pairs)."""
        return [statistics.fmean(col) for col in zip(*self.segments, strict=True)]

    @property
    def rate(self) -> float:
        """Images/s: the median of its window rates."""
        rates = [r for seg in self.segments for r in seg]
        return statistics.median(rates) if rates else 0.0

    @property
    def cv(self) -> float:
        return coefficient_of_variation([r for seg in self.segments for r in seg])


class Tuner:
    """Proposes configurations (:meth:`next`), takes their segments (:meth:`record`) and
    settles (:meth:`best`) within ``budget`` steps.

    ``ladder``: the configurations tried first, in order (the worker ladder, or the stored
    winners when ``seeded``); ``variants``: one function per knob, ``axis(best)`` giving the
    values worth trying around the best so far, tried in order while each beats the best."""

    def __init__(
        self,
        ladder: Sequence[LoaderConfig],
        *,
        shape: SegmentShape,
        budget: int,
        variants: Sequence[Axis | Callable[[LoaderConfig], list[LoaderConfig]]] = (),
        seeded: bool = False,
        margin: float = 0.05,
        p_threshold: float = 0.1,
        race_rounds: int = 3,
    ) -> None:
        if not ladder:
            raise ValueError("the tuner needs at least one configuration to try.")
        if budget < 0:
            raise ValueError(f"budget cannot be negative but got {budget}.")
        if race_rounds < 1:
            raise ValueError(f"race_rounds must be at least 1 but got {race_rounds}.")
        self.shape = shape
        self.budget = budget
        self.margin = margin
        self.p_threshold = p_threshold
        self.race_rounds = race_rounds
        self.seeded = seeded
        self.candidates: dict[LoaderConfig, Candidate] = {}
        self.order: list[LoaderConfig] = []  # segments in the order they ran
        self.spent = 0  # steps served while tuning (segments and the rest of short epochs)
        self.settled: LoaderConfig | None = None
        self._ladder = list(dict.fromkeys(ladder))
        self._variants = [v if isinstance(v, Axis) else Axis(v) for v in variants]
        self._current: LoaderConfig | None = None  # proposed, not yet recorded
        self._plan = self._proposals()

    # -- the caller's side -------------------------------------------------------------------

    def next(self) -> LoaderConfig | None:
        """The configuration of the next segment, or None when tuning is over (then
        :attr:`settled` holds the choice). A segment proposed but never recorded (its epoch
        was abandoned) is proposed again."""
        if self.settled is not None:
            return None
        if self._current is None:
            if self.spent + self.shape.steps > self.budget:
                return self._settle()
            self._current = next(self._plan, None)
            if self._current is None:
                return self._settle()
        if self.spent + self.shape.steps > self.budget:
            self._current = None
            return self._settle()
        return self._current

    def record(self, config: LoaderConfig, rates: list[float], start_s: float, seconds: float):
        """One segment of ``config``: its window rates (images/s), its first-batch latency and
        its wall time (warm-up included)."""
        if len(rates) != self.shape.windows:
            raise ValueError(f"a segment has {self.shape.windows} windows but got {len(rates)}.")
        c = self.candidates.setdefault(config, Candidate(config))
        c.segments.append(list(rates))
        c.starts.append(start_s)
        c.seconds += seconds
        c.steps += self.shape.steps
        self.order.append(config)
        self._current = None
        self._drop_clearly_slower()

    def spend(self, steps: int) -> None:
        """Steps served while tuning (every step, measured or not, counts against the budget)."""
        self.spent += steps

    def best(self) -> Candidate | None:
        """The fastest candidate still in the race (median window rate)."""
        alive = [c for c in self.candidates.values() if c.segments and c.dropped is None]
        return max(alive, key=lambda c: c.rate) if alive else None

    # -- the decisions -------------------------------------------------------------------------

    def _margin(self, best: Candidate) -> float:
        return noise_margin(self.margin, best.cv if len(best.segments[0]) > 1 else None)

    def slower(self, c: Candidate, best: Candidate) -> bool:
        """``c`` clearly slower than ``best``, window for window (the offline pruner's test)."""
        if c is best:
            return False
        return clearly_slower(
            c.paired, best.paired, margin=self._margin(best), p_threshold=self.p_threshold
        )

    def _drop_clearly_slower(self) -> None:
        best = self.best()
        if best is None:
            return
        for c in self.candidates.values():
            if c.dropped is None and c.segments and self.slower(c, best):
                c.dropped = f"clearly slower than {best.config.label()}"

    def _settle(self) -> None:
        best = self.best()
        self.settled = best.config if best else self._ladder[0]
        return None

    def _proposals(self) -> Iterator[LoaderConfig]:
        if self.seeded:
            yield from self._ladder
        else:
            stale = 0
            for rung in self._ladder:
                yield rung
                c, best = self.candidates[rung], self.best()
                if best is None or c is best:
                    stale = 0
                    continue
                stale += 1
                if rung.num_workers > best.config.num_workers and (
                    c.dropped is not None or stale >= 2
                ):
                    break  # more workers will not help
            tried: set[LoaderConfig] = set(self.candidates)
            for axis in self._variants:  # each knob on the best so far, while it improves
                best = self.best()
                for variant in axis.values(best.config) if best else []:
                    if variant in tried:
                        continue
                    tried.add(variant)
                    yield variant
                    if not axis.every and (self.best() is None or self.best().config != variant):
                        break
        # the race: the candidates not clearly slower, one more segment each per round
        for _ in range(self.race_rounds - 1):
            alive = [c for c in self.candidates.values() if c.dropped is None and c.segments]
            if len(alive) <= 1:
                return
            for c in sorted(alive, key=lambda c: -c.rate):
                if c.dropped is None and len(c.segments) < self.race_rounds:
                    yield c.config


def with_knob(config: LoaderConfig, **changes: object) -> LoaderConfig:
    """``config`` with some knobs changed (normalised as a new LoaderConfig)."""
    data = {**config.to_dict(), **changes}
    if data.get("num_workers", 0) == 0:
        data["prefetch_factor"] = None
        data["persistent_workers"] = False
        data["start_method"] = None
    return LoaderConfig.from_dict(data)
