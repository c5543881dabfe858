"""A search that knows the shape of the problem: :class:`StructuredStrategy`.

What is known about DataLoader throughput, and how the search uses it:

* it rises with ``num_workers`` until the CPUs, the storage or the accelerator saturate, then
  stays level or falls (start-up, memory, contention): a line search along workers on a
  doubling ladder (0, 1, 2, 4, 8, ...), up first unless a count above was seen to measure
  clearly lower (the baselines measure three counts) or no count measured clearly above none
  (a narrow peak below the counts measured: then the rung below the fewest workers measured
  comes first), continued in the direction that improves, then
  refined where a parabola through the best count and its measured neighbours peaks
  (successive parabolic interpolation on log2 of the workers: an optimum at 5, 7, 10 or 20
  workers in one step) or, failing that, by bisection;
* the best batch depends on the host (the loader's per-batch work and memory against the
  accelerator's appetite): the batch moves one ladder step up from the start first (down
  first where a baseline's smaller batch beat the start's by far: the batch above measured
  at less than 30% of its rate), then the workers, then the batch both ways at the new
  worker count;
* ``persistent_workers`` removes the per-epoch worker start, and a deep ``prefetch_factor``
  hides the spread of reads: both start on (the deepest prefetch of the range); the prefetch
  is checked once (at PyTorch's default) before the fine worker steps, persistence late;
  ``pin_memory`` is on with a CUDA device, toggled late, and not at all without one.
  Where the host's memory is short (a small /dev/shm, a VM's RAM hold the batches in flight,
  ``workers x prefetch x batch`` images), a new configuration starts at the deepest prefetch
  rung whose queue fits the study's bound (``loadersearch.measure.host_inflight_budget``), a
  move of the workers or the batch keeps the prefetch unless the queue no longer fits (it
  shrinks to fit), and a start that does not fit even so takes a smaller batch.

The default (``host_aware``) takes the host from the baselines: they are rules of thumb for
this host's cores and GPUs, measured first, so the search starts at the worker count of the
best of them (half the worker range without any), at the middle batch; a baseline that beats
the search lends its workers and batch to the search's own settings, and where those measure
below it, the baseline with persistent workers is measured next: it tells whether the gap was
the search's prefetch (or luck: the walk then keeps the baseline's prefetch with persistence)
or persistence (the walk keeps the baseline's settings). A batch step that doubled the rate is
followed by another batch step before the workers move. The search is noise-aware:
a configuration it measured within :data:`NEAR` of the best may be the better one (one
measurement each), so its major moves come before the best's minor ones.

``host_aware=False`` is the search before issue 23 (``structured-classic`` in the benchmarks):
mid-ladder workers at the largest batch whatever the host, then workers, batch, persistence,
bisection, prefetch and pinning one step each.

Either way it is a coordinate search around the incumbent (the best measured configuration):
every move is a configuration one knob away from it, and the first move not yet measured is
the next trial. A new incumbent re-centres every move, so a better batch size is followed by
a new look at the worker count. When every move around the incumbent is measured, the nearest
unmeasured configuration is next. It is a pure function of the study's trials (no state of its
own): a resumed study or another machine proposes the same next configuration. Baselines are
trials like any other: a baseline that measures best becomes the incumbent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import DEFAULT_PREFETCH, LoaderConfig
from loadersearch.search._ladder_steps import (  # noqa: F401 (FALLS, WORKERS_FLAT: re-exported)
    CACHE,
    FALLS,
    PERSIST,
    PF,
    PIN,
    WORKERS_FLAT,
    B,
    LadderSteps,
    W,
    _falls_above,
    _major,
    _workers_flat,
    ladder,
)
from loadersearch.search._observations import Observation, measured_values
from loadersearch.search._space import SearchSpace

if TYPE_CHECKING:
    from optuna import Study
    from optuna.trial import FrozenTrial

# A baseline becomes the centre of the search only when it beats the search's own best by more
# than this: a re-measurement spread of 1-4% (CV) is common on a busy machine.
BASELINE_MARGIN = 0.05
# A configuration measured within this of the best is a contender: its major moves are tried
# before the best's minor ones (host-aware search).
NEAR = 0.05
# The batch steps down first (below the start's batch) only where the batch above measured at
# less than 30% of the rate: then the batch outweighs any worker step (fresh-2322: batch 32 at
# 1/6 of batch 16). A smaller fall says little of the batch below (a bump around 16 falls on
# both sides), and a step down first costs the worker step that a budget of 6 needs: at the
# workers' 20%, peak-20 (batch 32 at 0.8x of 16) went 92.5% -> 74% at budget 6; at 50%,
# heldout-2304 (batch 32 at ~0.5x of 16, its peak among the workers) 76% -> 48%.
FALLS_BATCH = 0.70
# A batch step up that at least doubled the rate at the same workers outweighs any worker step:
# the batch steps up again before the workers move (reserve-2337 of the zoo, 2.2x a step: 65%
# of the optimum at budget 6 -> 79%, random search 71%). heldout-2303's steps, 1.3x, leave
# the rule of stop 30 (one step, then the workers) in force.
BATCH_LEAP = 2.0


class StructuredStrategy(LadderSteps):
    """Proposes the next configuration from the study's observations (module docstring)."""

    name = "structured"

    def __init__(
        self,
        space: SearchSpace,
        *,
        prefer_pin: bool = False,
        host_aware: bool = False,
        inflight_images: float | None = None,
    ) -> None:
        self.space = space
        # The images the host's memory holds in flight (host-aware search only; see
        # loadersearch.measure.host_inflight_budget), or None.
        self.inflight_images = inflight_images if host_aware else None
        # host_aware: the default, the search of issue 23 (docs/benchmarks/landscape-zoo.md);
        # without it the search before (structured-classic in the benchmarks)
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
            # The deepest prefetch of the range: a deep queue hides the spread of reads (up to
            # ~10% where reads vary, nothing lost where they do not); one step down is a move.
            self.default_prefetch = space.prefetch_factor[1]
            # The middle of the batch ladder (the largest batch often loses on a server: the
            # loader's per-batch work and memory), the worker count set from the baselines.
            self.start = self._config(workers, self.ladders[B][len(self.ladders[B]) // 2], pin)
        self._configs: list[LoaderConfig] | None = None
        self._held: set[LoaderConfig] = set()

    def propose(
        self, study: Study, trial: FrozenTrial, observed: Sequence[Observation]
    ) -> LoaderConfig:
        return self.next_config(observed)

    # -- the search ---------------------------------------------------------------------------

    def next_config(self, observed: Sequence[Observation]) -> LoaderConfig:
        """The first move not yet measured, in the order of the module docstring."""
        held = {o.config for o in observed}
        self._held = held
        values = measured_values(observed)
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
            # The transplant measured below the baseline: the two differ in persistence and
            # prefetch (and pinning), by luck or by the host (a deep queue spills a small
            # /dev/shm; persistent workers grow). The baseline with the search's persistence
            # and its own prefetch and pinning tells which, before the walk takes settings.
            split = self._with(best, PERSIST, self.default_persistent)
            if split is not None and split not in held:
                return split
        # A move of the major knobs counts as measured when the same workers, batch and
        # persistence were measured with any prefetch_factor or pin_memory: those two move
        # the throughput little, so the search does not walk the major knobs again for each.
        major = {_major(c) for c in held}

        def known(move: LoaderConfig, minor: bool) -> bool:
            return move in held if minor else _major(move) in major

        shape = measured_values(observed, pruned=True)
        moves = self.moves(best, known, values, shape)
        if not self.classic:
            # Noise-aware: a configuration the search measured within NEAR of the best may be
            # the better one (one measurement each); its major moves come before the best's
            # minor ones, so that one lucky draw does not decide the centre of the search.
            head = self._moves(best, known, values, shape, head_only=True)
            own = {o.config for o in observed if not o.baseline}
            near = sorted((c for c in values if c in own and c != best
                           and values[c] >= (1.0 - NEAR) * values.get(best, 0.0)),
                          key=lambda c: -values[c])[:2]  # fmt: skip
            # (their major moves only: a contender's prefetch check would spend a trial on a
            # knob that moves the rate less than the noise that made it a contender)
            extra = [(m, minor) for c in near
                     for m, minor in self._moves(c, known, values, shape, head_only=True)
                     if not minor]  # fmt: skip
            moves = head + extra + moves[len(head) :]
        for move, minor in moves:
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
        the worker range (its bound is 2x the CPUs). Where one batch a worker overflows the
        memory bound, a smaller batch (and without a baseline fewer workers) whose queue fits:
        a start that fails (a small /dev/shm) leaves no centre but the baseline without any."""
        if self.classic:
            return self.start
        own = [o for o in observed if not o.baseline]
        if own:  # the start that was taken (the one measured first by the search itself)
            first = min(own, key=lambda o: o.number).config
            batch = self._batch_that_fits(first.num_workers, self.start.batch_size)
            if (first.batch_size, *_major(first)[2:]) == (batch, *_major(self.start)[2:]):
                return first
        rated = [(v, c) for c, v in values.items() if c.num_workers > 0 and any(
            o.baseline and o.config == c for o in observed)]  # fmt: skip
        if rated:
            workers = max(rated, key=lambda vc: vc[0])[1].num_workers
        else:
            lo, hi = self.space.num_workers
            workers = max(lo, min(hi, max(1, hi // 2)))
            workers = self._workers_that_fit(workers)
        return self._config(workers, self._batch_that_fits(workers, self.start.batch_size),
                            self.pin)  # fmt: skip

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
        shape: dict[LoaderConfig, float] | None = None,
    ) -> list[tuple[LoaderConfig, bool]]:
        """``(configuration, minor)`` one knob away from ``best``, most promising first
        (``minor``: a move of prefetch_factor or pin_memory)."""
        if not self.classic:
            return self._moves(best, known, values, shape)
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
        shape: dict[LoaderConfig, float] | None = None,
        *,
        head_only: bool = False,
    ) -> list[tuple[LoaderConfig, bool]]:
        """The order of the moves of the host-aware search: one step up the batch ladder from
        the start (the baselines measured three worker counts, all at batch 16; below the
        start's batch, a step down where the batch above fell by far), the worker
        ladder (down first where the rate falls clearly above, :func:`_falls_above`, or no count
        beat none, :func:`_workers_flat`, and then from below the fewest workers measured), the
        coarse
        bisection of the workers (4 and 8 -> 6), the batch ladder again at this
        configuration (the side that measured better first: one noisy comparison at other
        workers is not final), one prefetch check (from the deepest rung PyTorch's default,
        :meth:`_prefetch_moves`), the fine bisection of the workers down to neighbours 1.25x
        apart (an optimum at 5, 7, 14 or 20 workers), then the rest: persistence, pinning (on
        a CUDA host only), the other prefetch step, the finer batch steps and the workers'
        nearest neighbours at this batch.
        A worker count measured at another batch counts as known for the first moves: a new
        batch does not walk the workers again (their optimum moves little with the batch),
        and a batch measured with other workers counts as known for the batch ladder."""

        # (sets of what was measured, for speed: these are asked for every candidate move)
        held_workers = {(c.num_workers, c.cache) for c in self._held}
        held_batches = {(c.batch_size, c.persistent_workers, c.cache) for c in self._held
                        if c.num_workers > 0}  # fmt: skip

        def workers_known(move: LoaderConfig, minor: bool) -> bool:
            # at any batch and either persistence (a baseline's count is known: the baselines
            # run without persistent workers)
            if not minor:
                return (move.num_workers, move.cache) in held_workers
            return any(
                known(self._with(self._with(move, B, b) or move, PERSIST, p) or move, minor)
                for b in self.values[B]
                for p in self.values[PERSIST]
            )

        def batch_known(move: LoaderConfig) -> bool:
            persist = move.persistent_workers if move.num_workers else self.default_persistent
            return (move.batch_size, persist, move.cache) in held_batches

        def batch_value(move: LoaderConfig) -> float:
            """The best value measured at ``move``'s batch with workers (0 if none)."""
            at = [v for c, v in values.items() if c.batch_size == move.batch_size
                  and c.num_workers > 0]  # fmt: skip
            return max(at, default=0.0)

        shape = values if shape is None else shape
        batch_up = [m for m in self._coarse(best, B, up_first=True)
                    if m.batch_size > best.batch_size and not batch_known(m)]  # fmt: skip
        start_batch = self._batch_that_fits(best.num_workers, self.start.batch_size)
        if best.batch_size > start_batch and not self._batch_leaped(best, shape):
            # One step up from the start's batch (at these workers) comes first; further steps
            # wait until the workers were walked at the new batch (three batch steps first left
            # heldout-2303's peak at 3 workers unseen at budget 6: 26% of its optimum, 75%).
            batch_up = []
        # Below the start's batch (a baseline's batch 16 beat the start), the batch steps down
        # first where the batch above measured at less than 30% of the rate at the same
        # workers (:data:`FALLS_BATCH`). Not above it: where the step up from the start fell,
        # a step down first cost peak-5 and peak-20 the worker step that budget 6 needs (20
        # points of median or 10th percentile).
        batch_down = []
        if best.batch_size < start_batch and _falls_above(best, shape, B, FALLS_BATCH):
            batch_down = [m for m in self._coarse(best, B, up_first=False)
                          if m.batch_size < best.batch_size and not batch_known(m)]  # fmt: skip
        flat = _workers_flat(best, values)
        worker_steps = [
            # Workers that do not help: the rung below the fewest workers measured comes first
            # (a baseline's 8 is measured, so from 16 or 32 one step down meets a count known,
            # and the walk never went below it: twelfth-2413, its peak at 2).
            *((m, False) for m in (self._below_fewest(best, workers_known) if flat else [])),
            *(
                (m, False)
                for m in self._coarse(best, W, up_first=not (_falls_above(best, shape) or flat))
                if not workers_known(m, False)
            ),  # fmt: skip
            *((m, False) for m in self._vertex(best, workers_known, shape, fine=False)),
        ]
        moves = [
            *((m, False) for m in batch_up),
            *((m, False) for m in batch_down),
            *worker_steps,
            *((m, False) for m in self._coarse(best, B, up_first=True) if not batch_known(m)),
            *((m, False) for m in self._toggle(best, CACHE)),
            *((m, False) for m in self._bisect(best, W, workers_known, shape, fine=False)),
            *(
                (m, False)
                for m in sorted(
                    self._coarse(best, B, up_first=True), key=lambda m: -batch_value(m)
                )
            ),  # fmt: skip
            # One prefetch check (PyTorch's default from the deepest rung) before the fine
            # worker steps: a queue of the wrong depth costs 4-9% where a fine worker step
            # gains 1-3% (eleventh-shallow-queue-16 of the zoo: 92.9% -> 97.8% median at 14;
            # the held-out sixteenth set 12 -> 14 of 16 landscapes meeting every target).
            # Only a shallower queue: under a memory bound the start's rung is the deepest that
            # fits, and a deeper one would overflow /dev/shm.
            *((m, True) for m in [m for m in self._prefetch_moves(best, values)
                                  if m.prefetch_factor < best.prefetch_factor][:1]),
            *((m, False) for m in self._vertex(best, workers_known, shape, fine=True)),
            *(
                (m, False)
                for m in self._bisect(best, W, workers_known, values, fine=True, resolution=1.25)
            ),  # fmt: skip
        ]
        if head_only:  # the moves that matter most (a contender's, see next_config)
            return moves
        return moves + self._late_moves(best, known, values)

    def _batch_leaped(self, best: LoaderConfig, shape: dict[LoaderConfig, float]) -> bool:
        """Whether ``best``'s batch measured at least :data:`BATCH_LEAP` times the rate of the
        ladder step below it at the same workers and settings: a batch that dominates every
        other knob, so the batch steps up again before the workers move."""
        lower = [m for m in self._coarse(best, B, up_first=False)
                 if m.batch_size < best.batch_size]  # fmt: skip
        rate = shape.get(lower[0], 0.0) if lower else 0.0
        return rate > 0 and shape.get(best, 0.0) >= BATCH_LEAP * rate

    def _late_moves(
        self,
        best: LoaderConfig,
        known: Callable[[LoaderConfig, bool], bool],
        values: dict[LoaderConfig, float],
    ) -> list[tuple[LoaderConfig, bool]]:
        """The moves after the first (:meth:`_moves`): persistence, pinning (CUDA only), the
        other prefetch step, the finer batch and worker steps, then prefetch bisection."""
        return [
            *((m, False) for m in self._toggle(best, PERSIST)),
            # Without CUDA pinning copies nothing faster (the batches stay on the host).
            *((m, True) for m in (self._toggle(best, PIN) if self.pin else [])),
            # Prefetch starts at its deepest; the first check (PyTorch's default) came before
            # the fine worker steps, the other step comes here (a shallower queue saves
            # memory, and where deep queues thrash the caches it gains; see _prefetch_moves).
            *((m, True) for m in self._prefetch_moves(best, values)),
            *((m, False) for m in self._bisect(best, B, known, values, fine=False)),
            *((m, False) for m in self._bisect(best, B, known, values, fine=True)),
            *((m, False) for m in self._coarse(best, W, up_first=True)),
            *((m, False) for m in self._bisect(best, W, known, values, fine=False)),
            *((m, False) for m in self._bisect(best, W, known, values, fine=True)),
            *((m, True) for m in self._bisect(best, PF, known, values, fine=False, minor=True)),
            *((m, True) for m in self._bisect(best, PF, known, values, fine=True, minor=True)),
        ]
