"""A search that knows the shape of the problem: :class:`StructuredStrategy`.

What is known about DataLoader throughput, and how the search uses it:

* it rises with ``num_workers`` until the CPUs, the storage or the accelerator saturate, then
  stays level or falls (start-up, memory, contention): a line search along workers on a
  doubling ladder (0, 1, 2, 4, 8, ...), from the middle of the range, continued in the
  direction that improves and then refined by bisection between the best count and its
  measured neighbours;
* the best batch is usually the largest that fits (the batch-size probe bounds the space to
  it): the search starts there and tries halving it;
* ``persistent_workers`` removes the per-epoch worker start: started on, then checked off;
* ``prefetch_factor`` and ``pin_memory`` matter less: each is moved one step from its default
  (2; pinned on a CUDA device) once the workers and the batch are settled.

It is a coordinate search around the incumbent (the best measured configuration): every move
is a configuration one knob away from it, in the order above (the coarse moves of workers,
batch and persistent_workers; bisection of workers; prefetch_factor and pin_memory; finer
moves), and the first move not yet measured is the next trial. A new incumbent re-centres
every move, so a better batch size is followed by a new look at the worker count. When every
move around the incumbent is measured, the nearest unmeasured configuration is next.

It is a pure function of the study's trials (no state of its own): a resumed study or another
machine proposes the same next configuration. Baselines are trials like any other: a baseline
that measures best becomes the incumbent.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import DEFAULT_PREFETCH, LoaderConfig
from loadersearch.search._observations import COMPLETE, Observation
from loadersearch.search._space import SearchSpace

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial

# A baseline becomes the centre of the search only when it beats the search's own best by more
# than this: a re-measurement spread of 1-4% (CV) is common on a busy machine.
BASELINE_MARGIN = 0.05

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


class StructuredStrategy:
    """Proposes the next configuration from the study's observations (module docstring)."""

    name = "structured"

    def __init__(
        self, space: SearchSpace, *, prefer_pin: bool = False, host_aware: bool = False
    ) -> None:
        self.space = space
        # host_aware: the search of issue 23 (docs/benchmarks/landscape-zoo.md), not yet the
        # default: it wins on most of the zoo but not on every cell (the measured 2-core table)
        self.classic = not host_aware
        self.values: dict[str, list[Any]] = {
            W: list(range(space.num_workers[0], space.num_workers[1] + 1)),
            B: space.batch_choices(),
            PF: list(range(space.prefetch_factor[0], space.prefetch_factor[1] + 1)),
            PIN: list(space.pin_memory),
            PERSIST: list(space.persistent_workers),
            CACHE: list(space.cache) or [None],  # [None]: not searched
        }
        self.ladders = {k: ladder(self.values[k]) for k in (W, B, PF)}
        workers = self.ladders[W][len(self.ladders[W]) // 2]
        pin = prefer_pin if prefer_pin in space.pin_memory else space.pin_memory[0]
        self.pin = pin
        self.default_prefetch = min(max(DEFAULT_PREFETCH, space.prefetch_factor[0]),
                                    space.prefetch_factor[1])  # fmt: skip
        self.default_persistent = True in space.persistent_workers
        self.default_cache = self.values[CACHE][0]
        self.start = self._config(workers, self.values[B][-1], pin)
        if host_aware:
            # The middle of the batch ladder (the largest batch often loses on a server: the
            # loader's per-batch work and memory), the worker count set from the baselines.
            self.start = self._config(workers, self.ladders[B][len(self.ladders[B]) // 2], pin)
        self._configs: list[LoaderConfig] | None = None

    def propose(
        self, study: Study, trial: FrozenTrial, observed: Sequence[Observation]
    ) -> LoaderConfig:
        return self.next_config(observed)

    # -- the search ---------------------------------------------------------------------------

    def next_config(self, observed: Sequence[Observation]) -> LoaderConfig:
        """The first move not yet measured, in the order of the module docstring."""
        held = {o.config for o in observed}
        values = _values(observed)
        start = self.start_config(observed, values)
        if start not in held:
            return start
        best = self.incumbent(observed, values)
        if not self.classic and any(o.baseline and o.config == best for o in observed):
            # A baseline beats the search: its workers and batch with the search's own
            # persistence, prefetch and pinning first (the baselines are information).
            transplant = self._with(self._config(best.num_workers, best.batch_size, self.pin),
                                    CACHE, best.cache)  # fmt: skip
            if transplant is not None and transplant not in held:
                return transplant
        # A move of the major knobs counts as measured when the same workers, batch and
        # persistence were measured with any prefetch_factor or pin_memory: those two move
        # the throughput little, so the search does not walk the major knobs again for each.
        major = {_major(c) for c in held}

        def known(move: LoaderConfig, minor: bool) -> bool:
            return move in held if minor else _major(move) in major

        for move, minor in self.moves(best, known, values):
            if not known(move, minor):
                return move
        return self._nearest_unmeasured(best, held) or best

    def start_config(
        self, observed: Sequence[Observation], values: dict[LoaderConfig, float]
    ) -> LoaderConfig:
        """The first configuration of the search. The default: mid-ladder workers at the
        largest batch. Host-aware: the baselines are information: the start takes the worker
        count of the best baseline that has workers (they are rules for this host: its cores,
        its GPUs), at the middle batch with persistent workers; without a measured baseline, half
        the worker range (its bound is 2x the CPUs)."""
        if self.classic:
            return self.start
        own = [o for o in observed if not o.baseline]
        if own:  # the start that was taken (the one measured first by the search itself)
            first = min(own, key=lambda o: o.number).config
            if _major(first)[1:] == _major(self.start)[1:]:
                return first
        rated = [(v, c) for c, v in values.items() if c.num_workers > 0 and any(
            o.baseline and o.config == c for o in observed)]  # fmt: skip
        if rated:
            workers = max(rated, key=lambda vc: vc[0])[1].num_workers
        else:
            lo, hi = self.space.num_workers
            workers = max(lo, min(hi, max(1, hi // 2)))
        return self._config(workers, self.start.batch_size, self.pin)

    def incumbent(
        self, observed: Sequence[Observation], values: dict[LoaderConfig, float]
    ) -> LoaderConfig:
        """The best measured configuration the search itself chose; a baseline only when it
        is clearly better (by more than :data:`BASELINE_MARGIN`): the baselines are arbitrary
        points (batch 16, no persistent workers) that a near-tie within the noise should not
        make the centre of the search."""
        searched = {o.config for o in observed if not o.baseline}
        own = [c for c in values if c in searched]
        best_any = max(values, key=values.__getitem__) if values else self.start
        if not own:
            return best_any
        best_own = max(own, key=values.__getitem__)
        if values[best_any] > (1.0 + BASELINE_MARGIN) * values[best_own]:
            return best_any
        return best_own

    def moves(
        self,
        best: LoaderConfig,
        known: Callable[[LoaderConfig, bool], bool],
        values: dict[LoaderConfig, float],
    ) -> list[tuple[LoaderConfig, bool]]:
        """``(configuration, minor)`` one knob away from ``best``, most promising first
        (``minor``: a move of prefetch_factor or pin_memory)."""
        if not self.classic:
            return self._moves(best, known, values)
        major = [
            *self._coarse(best, W, up_first=True),
            *self._bisect(best, W, known, values, fine=False),
            *self._toggle(best, PERSIST),
            *self._toggle(best, CACHE),  # a cache can matter more than any loader knob
            *self._coarse(best, B, up_first=False),
        ]
        minor = [
            *self._coarse(best, PF, up_first=True)[:1],
            *self._toggle(best, PIN),
            *self._coarse(best, PF, up_first=True)[1:],
        ]
        finer = [
            *self._bisect(best, W, known, values, fine=True),
            *self._bisect(best, B, known, values, fine=False),
            *self._bisect(best, B, known, values, fine=True),
        ]
        finer_minor = [
            *self._bisect(best, PF, known, values, fine=False, minor=True),
            *self._bisect(best, PF, known, values, fine=True, minor=True),
        ]
        return (
            [(m, False) for m in major]
            + [(m, True) for m in minor]
            + [(m, False) for m in finer]
            + [(m, True) for m in finer_minor]
        )

    def _moves(
        self,
        best: LoaderConfig,
        known: Callable[[LoaderConfig, bool], bool],
        values: dict[LoaderConfig, float],
    ) -> list[tuple[LoaderConfig, bool]]:
        """The order of the moves of the host-aware search: the batch ladder (up first: the
        baselines measured three worker counts, all at batch 16), the worker ladder, the coarse
        bisection of the workers (4 and 8 -> 6), the batch ladder again at this
        configuration (the side that measured better first: one noisy comparison at other
        workers is not final), one step up of prefetch, the fine bisection of the workers
        down to neighbours 1.25x apart (an optimum at 5, 7, 14 or 20 workers), then the
        rest: the other prefetch step, persistence, pinning (on a CUDA host only), the finer
        batch steps and the workers' nearest neighbours at this batch.
        A worker count measured at another batch counts as known for the first moves: a new
        batch does not walk the workers again (their optimum moves little with the batch),
        and a batch measured with other workers counts as known for the batch ladder."""

        def workers_known(move: LoaderConfig, minor: bool) -> bool:
            return any(known(self._with(move, B, b) or move, minor) for b in self.values[B])

        def batch_known(move: LoaderConfig) -> bool:
            return any(
                known(self._with(move, W, w) or move, False) for w in self.values[W] if w > 0
            )

        def batch_value(move: LoaderConfig) -> float:
            """The best value measured at ``move``'s batch with workers (0 if none)."""
            at = [v for c, v in values.items() if c.batch_size == move.batch_size
                  and c.num_workers > 0]  # fmt: skip
            return max(at, default=0.0)

        up_pf = self._coarse(best, PF, up_first=True)
        moves = [
            *((m, False) for m in self._coarse(best, B, up_first=True) if not batch_known(m)),
            *(
                (m, False)
                for m in self._coarse(best, W, up_first=True)
                if not workers_known(m, False)
            ),  # fmt: skip
            *((m, False) for m in self._toggle(best, CACHE)),
            *((m, False) for m in self._bisect(best, W, workers_known, values, fine=False)),
            *(
                (m, False)
                for m in sorted(
                    self._coarse(best, B, up_first=True), key=lambda m: -batch_value(m)
                )
            ),  # fmt: skip
            *((m, True) for m in up_pf[:1]),
            *(
                (m, False)
                for m in self._bisect(best, W, workers_known, values, fine=True, resolution=1.25)
            ),  # fmt: skip
            *((m, True) for m in up_pf[1:]),
            *((m, False) for m in self._toggle(best, PERSIST)),
            # Without CUDA pinning copies nothing faster (the batches stay on the host).
            *((m, True) for m in (self._toggle(best, PIN) if self.pin else [])),
            *((m, False) for m in self._bisect(best, B, known, values, fine=False)),
            *((m, False) for m in self._bisect(best, B, known, values, fine=True)),
            *((m, False) for m in self._coarse(best, W, up_first=True)),
            *((m, False) for m in self._bisect(best, W, known, values, fine=False)),
            *((m, False) for m in self._bisect(best, W, known, values, fine=True)),
            *((m, True) for m in self._bisect(best, PF, known, values, fine=False, minor=True)),
            *((m, True) for m in self._bisect(best, PF, known, values, fine=True, minor=True)),
        ]
        return moves

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

    # -- configurations ------------------------------------------------------------------------

    def _config(self, workers: int, batch: int, pin: bool, prefetch: int | None = None,
                persistent: bool | None = None, cache: Any = ...) -> LoaderConfig:  # fmt: skip
        cache = self.default_cache if cache is ... else cache
        if workers == 0:
            return LoaderConfig(0, batch, pin, cache=cache)
        return LoaderConfig(
            workers,
            batch,
            pin,
            self.default_prefetch if prefetch is None else prefetch,
            self.default_persistent if persistent is None else persistent,
            cache=cache,
        )

    def _with(self, config: LoaderConfig, knob: str, value: Any) -> LoaderConfig | None:
        """``config`` with one knob changed; None where the knob does not apply (prefetch or
        persistence without workers)."""
        w, b, pin = config.num_workers, config.batch_size, config.pin_memory
        pf, persist, cache = config.prefetch_factor, config.persistent_workers, config.cache
        if knob in (PF, PERSIST) and w == 0:
            return None
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


def _major(config: LoaderConfig) -> tuple[int, int, bool, str | None]:
    return config.num_workers, config.batch_size, config.persistent_workers, config.cache


def _values(observed: Sequence[Observation]) -> dict[LoaderConfig, float]:
    """The measured value of every configuration with a complete, feasible trial (the median
    when it was measured more than once)."""
    by_config: dict[LoaderConfig, list[float]] = {}
    for o in observed:
        if o.state == COMPLETE and o.value is not None and o.value > 0:
            by_config.setdefault(o.config, []).append(o.value)
    return {c: statistics.median(v) for c, v in by_config.items()}
