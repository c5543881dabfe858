"""The search space: which values of the DataLoader knobs a study may try.

A :class:`SearchSpace` is plain data (it is stored in the study so that every resume and every
worker samples the same distributions). Integer knobs are ranges, boolean and choice knobs are
tuples of choices; a knob with one possible value is *fixed* and is not suggested at all.
``prefetch_factor``, ``persistent_workers`` and ``start_method`` are conditional: they exist
only when the trial has ``num_workers > 0`` (PyTorch rejects them otherwise).

``start_method`` (the workers' ``multiprocessing_context``) is fixed by default (fork on Linux):
``--fix start_method=spawn`` measures another one, ``--space start_method=fork,spawn`` searches.

``cache`` (none, ram, memmap: where the images come from, :mod:`loadersearch.workload._cache`)
is not searched by default (empty: the workload's own cache); ``run --search-cache`` searches
every mode, ``--space cache=none,memmap`` some.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch._cpu_budget import MAX_WORKERS, CpuBudget, cpu_budget
from loadersearch._loader_config import (
    CACHES,
    DEFAULT_PREFETCH,
    DEFAULT_START_METHOD,
    LoaderConfig,
    check_start_method,
)
from loadersearch._options import FLAG, WHOLE, declared
from loadersearch.search._space_text import (
    KNOBS,
    SpaceError,
    _check_knob,
    _parse_bool,
    _parse_choices,
    _parse_int,
)

if TYPE_CHECKING:
    import optuna

# The knobs are LoaderConfig's declared options: whole numbers are ranges, flags true/false
# or both, choices (strings) sets of choices.
INT_KNOBS = tuple(k for k, o in declared(LoaderConfig).items() if o.kind == WHOLE)
BOOL_KNOBS = tuple(k for k, o in declared(LoaderConfig).items() if o.kind == FLAG)
CHOICE_KNOBS = tuple(k for k, o in declared(LoaderConfig).items() if o.choices)
MAX_PREFETCH = 8


def default_worker_bound(budget: CpuBudget | None = None) -> int:
    """Upper bound of ``num_workers`` per rank: the CPU budget's :attr:`~CpuBudget.worker_bound`
    (``budget``; None: this process's, :func:`~loadersearch._cpu_budget.cpu_budget`). One rank:
    2x the CPUs this process may use (affinity and cgroup quota), at most 32, deliberately
    more workers than CPUs (loads that wait on storage latency pay off with them); several
    ranks (DDP): ``cpus // ranks`` (at least 1), so that ``ranks x num_workers`` stays within
    the CPUs they share."""
    return (budget or cpu_budget()).worker_bound


@dataclass(frozen=True)
class SearchSpace:
    """Ranges and choices of the five knobs. ``batch_step == 0`` means powers of two."""

    num_workers: tuple[int, int] = (0, 4)  # inclusive range
    batch_size: tuple[int, int] = (8, 64)  # inclusive range (upper bound also limited by probe)
    batch_step: int = 8  # grid of batch sizes: lo, lo+step, ...; 0 = powers of two
    prefetch_factor: tuple[int, int] = (1, MAX_PREFETCH)  # only used when num_workers > 0
    pin_memory: tuple[bool, ...] = (False, True)
    persistent_workers: tuple[bool, ...] = (False, True)  # only used when num_workers > 0
    # fixed unless the user asks
    start_method: tuple[str, ...] = (DEFAULT_START_METHOD,)  # only used when num_workers > 0
    # cache modes to search; empty = not searched (the workload's cache)
    cache: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in INT_KNOBS:
            lo, hi = (int(v) for v in getattr(self, name))
            object.__setattr__(self, name, (lo, hi))
            floor = 0 if name == "num_workers" else 1
            if lo < floor:
                raise SpaceError(f"{name} range starts at {lo}; it must be at least {floor}.")
            if lo > hi:
                raise SpaceError(
                    f"{name} range {lo}:{hi} is inverted; write it low:high, e.g. {hi}:{lo}."
                )
        if self.num_workers[1] > MAX_WORKERS:
            raise SpaceError(
                f"num_workers up to {self.num_workers[1]} is more than {MAX_WORKERS}; "
                f"narrow it, e.g. num_workers=0:{MAX_WORKERS}."
            )
        if self.prefetch_factor[1] > MAX_PREFETCH:
            raise SpaceError(
                f"prefetch_factor up to {self.prefetch_factor[1]} is more than {MAX_PREFETCH}; "
                f"use prefetch_factor=1:{MAX_PREFETCH} or less."
            )
        if self.batch_step < 0:
            raise SpaceError(f"batch_size step cannot be negative but got {self.batch_step}.")
        if self.batch_step == 0 and not _powers_of_two(*self.batch_size):
            raise SpaceError(
                f"batch_size range {self.batch_size[0]}:{self.batch_size[1]} holds no power of "
                "two; widen it, e.g. batch_size=pow2:8:64."
            )
        for name in BOOL_KNOBS:
            choices = tuple(dict.fromkeys(bool(v) for v in getattr(self, name)))
            if not choices:
                raise SpaceError(f"{name} needs at least one choice (true, false or both).")
            # A fixed order keeps a categorical's choices identical across resumes.
            object.__setattr__(self, name, tuple(sorted(choices)))
        if isinstance(self.start_method, str):
            object.__setattr__(self, "start_method", (self.start_method,))
        methods = tuple(dict.fromkeys(str(m) for m in self.start_method))
        if not methods:
            raise SpaceError("start_method needs at least one choice, e.g. start_method=fork.")
        for m in methods:
            try:
                check_start_method(m)
            except ValueError as e:
                raise SpaceError(str(e)) from e
        object.__setattr__(self, "start_method", tuple(sorted(methods)))
        if isinstance(self.cache, str):
            object.__setattr__(self, "cache", (self.cache,))
        unknown = [c for c in self.cache if c not in CACHES]
        if unknown:
            raise SpaceError(
                f"unknown cache {unknown[0]!r}; choose among {', '.join(CACHES)}, e.g. "
                "cache=none,memmap."
            )
        # CACHES' order (none first): the baselines clamp to the first, no cache
        object.__setattr__(self, "cache", tuple(c for c in CACHES if c in self.cache))

    # -- building ------------------------------------------------------------------------------

    def with_range(self, knob: str, text: str | int | bool | list | tuple) -> SearchSpace:
        """A copy with ``knob`` narrowed to ``text`` (``lo:hi``, ``lo:hi:step``, ``pow2:lo:hi``
        or, for boolean knobs, ``true``/``false``/``both``), or to a list of the same parts as
        a spec file writes it (``[0, 8]``, ``["pow2", 8, 64]``, ``["fork", "spawn"]``,
        ``[false, true]``)."""
        _check_knob(knob)
        if isinstance(text, bool):
            text = [text]
        listed = isinstance(text, (list, tuple))
        if knob in CHOICE_KNOBS:
            return dataclasses.replace(self, **{knob: _parse_choices(text, knob)})
        if knob in BOOL_KNOBS:
            if listed:
                read = (v if isinstance(v, bool) else _parse_bool(knob, str(v)) for v in text)
                return dataclasses.replace(self, **{knob: tuple(read)})
            if str(text).strip().lower() in ("both", "any", "true,false", "false,true"):
                return dataclasses.replace(self, **{knob: (False, True)})
            return dataclasses.replace(self, **{knob: (_parse_bool(knob, str(text)),)})
        parts = [str(p).strip() for p in (text if listed else str(text).split(":"))]
        changes: dict[str, Any] = {}
        if knob == "batch_size" and parts and parts[0].lower() == "pow2":
            parts = parts[1:]
            changes["batch_step"] = 0
        if len(parts) == 1:  # a single value narrows to that value
            parts = [parts[0], parts[0]]
        if len(parts) == 3 and knob == "batch_size" and "batch_step" not in changes:
            changes["batch_step"] = _parse_int(knob, parts[2])
            if changes["batch_step"] <= 0:  # (0 stands for pow2 inside; a user writes pow2)
                raise SpaceError(
                    f"batch_size step must be 1 or more but got {changes['batch_step']}; "
                    f"for powers of two write batch_size=pow2:{parts[0]}:{parts[1]}."
                )
            parts = parts[:2]
        if len(parts) != 2:
            raise SpaceError(
                f"cannot read the range {knob}={text!r}; write {knob}=LOW:HIGH"
                + (" (or LOW:HIGH:STEP, or pow2:LOW:HIGH)" if knob == "batch_size" else "")
                + "."
            )
        changes[knob] = (_parse_int(knob, parts[0]), _parse_int(knob, parts[1]))
        return dataclasses.replace(self, **changes)

    def with_fixed(self, knob: str, text: str | int | bool) -> SearchSpace:
        """A copy with ``knob`` fixed to one value."""
        _check_knob(knob)
        if knob in CHOICE_KNOBS:
            choices = _parse_choices(str(text), knob)
            if len(choices) != 1:
                raise SpaceError(
                    f"--fix {knob} takes one value but got {text!r}; to search several use "
                    f"--space {knob}={text}."
                )
            return dataclasses.replace(self, **{knob: choices})
        if knob in BOOL_KNOBS:
            value = text if isinstance(text, bool) else _parse_bool(knob, str(text))
            return dataclasses.replace(self, **{knob: (value,)})
        value = text if isinstance(text, int) else _parse_int(knob, str(text))
        return dataclasses.replace(self, **{knob: (value, value)})

    def with_batch_bound(self, max_batch: int) -> SearchSpace:
        """A copy whose batch sizes do not exceed ``max_batch`` (the probe's result)."""
        lo, hi = self.batch_size
        if max_batch < lo:
            raise SpaceError(
                f"the largest batch that fits is {max_batch}, below the smallest batch_size in "
                f"the space ({lo}); raise the VRAM cap or lower batch_size, "
                f"e.g. --space batch_size={max(1, max_batch)}:{max(1, max_batch)}."
            )
        return dataclasses.replace(self, batch_size=(lo, min(hi, max_batch)))

    # -- reading -------------------------------------------------------------------------------

    def fixed(self) -> dict[str, Any]:
        """Knobs that have a single possible value, with that value."""
        out: dict[str, Any] = {}
        for name in INT_KNOBS:
            lo, hi = getattr(self, name)
            if lo == hi:
                out[name] = lo
        if len(self.batch_choices()) == 1:
            out["batch_size"] = self.batch_choices()[0]
        for name in BOOL_KNOBS + CHOICE_KNOBS:
            if len(getattr(self, name)) == 1:
                out[name] = getattr(self, name)[0]
        return out

    def batch_choices(self) -> list[int]:
        """Every batch size the space allows, ascending."""
        lo, hi = self.batch_size
        if self.batch_step == 0:
            return [2**k for k in range(0, 31) if lo <= 2**k <= hi]
        return list(range(lo, hi + 1, self.batch_step))

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SearchSpace:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        )

    def describe(self) -> str:
        """One line, e.g. ``num_workers 0..4, batch_size 8..64 step 8, pin_memory {F,T} ...``."""
        parts = []
        for name in KNOBS:
            if name == "cache" and not self.cache:
                continue  # not searched: the workload's cache
            if name == "batch_size":
                lo, hi = self.batch_size
                step = "powers of two" if self.batch_step == 0 else f"step {self.batch_step}"
                parts.append(f"batch_size {lo}..{hi} {step}" if lo != hi else f"batch_size={lo}")
            elif name in INT_KNOBS:
                lo, hi = getattr(self, name)
                parts.append(f"{name} {lo}..{hi}" if lo != hi else f"{name}={lo}")
            else:
                choices = getattr(self, name)
                parts.append(
                    f"{name} {{{', '.join(str(c) for c in choices)}}}"
                    if len(choices) > 1
                    else f"{name}={choices[0]}"
                )
        return ", ".join(parts)

    # -- Optuna --------------------------------------------------------------------------------

    def suggest(self, trial: optuna.trial.BaseTrial) -> LoaderConfig:
        """Sample a configuration; fixed knobs are not suggested, conditional ones only with
        workers."""
        fixed = self.fixed()

        def int_knob(name: str) -> int:
            if name in fixed:
                return fixed[name]
            lo, hi = getattr(self, name)
            return trial.suggest_int(name, lo, hi)

        def choice_knob(name: str) -> Any:
            if name in fixed:
                return fixed[name]
            return trial.suggest_categorical(name, list(getattr(self, name)))

        workers = int_knob("num_workers")
        if "batch_size" in fixed:
            batch = fixed["batch_size"]
        elif self.batch_step == 0:
            batch = trial.suggest_categorical("batch_size", self.batch_choices())
        else:
            choices = self.batch_choices()
            batch = trial.suggest_int("batch_size", choices[0], choices[-1], step=self.batch_step)
        pin = choice_knob("pin_memory")
        prefetch: int | None = None
        persistent = False
        start: str | None = None
        if workers > 0:
            prefetch = int_knob("prefetch_factor")
            persistent = choice_knob("persistent_workers")
            start = choice_knob("start_method")
        return LoaderConfig(
            num_workers=workers,
            batch_size=batch,
            pin_memory=pin,
            prefetch_factor=prefetch,
            persistent_workers=persistent,
            start_method=start,
            cache=choice_knob("cache") if self.cache else None,
        )

    def clamp(self, config: LoaderConfig) -> LoaderConfig:
        """The configuration of the space nearest to ``config`` (used for baselines)."""
        fixed = self.fixed()

        def clip(name: str, value: int) -> int:
            lo, hi = getattr(self, name)
            return fixed.get(name, min(max(value, lo), hi))

        def pick(name: str, value: Any) -> Any:
            choices = getattr(self, name)
            return value if value in choices else choices[0]

        workers = clip("num_workers", config.num_workers)
        choices = self.batch_choices()
        batch = min(choices, key=lambda b: (abs(b - config.batch_size), b))
        prefetch = None
        persistent = False
        start = None
        if workers > 0:
            # a 0-worker config clamped to workers has no prefetch_factor: PyTorch's default
            prefetch = clip("prefetch_factor", config.prefetch_factor or DEFAULT_PREFETCH)
            persistent = pick("persistent_workers", config.persistent_workers)
            # A baseline rule names no start method: the space's default (or fixed) one.
            start = pick("start_method", config.start_method or DEFAULT_START_METHOD)
        return LoaderConfig(
            num_workers=workers,
            batch_size=batch,
            pin_memory=pick("pin_memory", config.pin_memory),
            prefetch_factor=prefetch,
            persistent_workers=persistent,
            start_method=start,
            cache=pick("cache", config.cache) if self.cache else None,
        )

    def distributions(self) -> dict[str, optuna.distributions.BaseDistribution]:
        """The Optuna distribution of every knob :meth:`suggest` suggests (the conditional
        ones included: they are suggested only with workers), as ``suggest`` builds them."""
        from optuna.distributions import CategoricalDistribution, IntDistribution

        fixed = self.fixed()
        out: dict[str, optuna.distributions.BaseDistribution] = {}
        for name in KNOBS:
            if name in fixed or (name == "cache" and not self.cache):
                continue
            if name == "batch_size":
                choices = self.batch_choices()
                out[name] = (
                    CategoricalDistribution(choices)
                    if self.batch_step == 0
                    else IntDistribution(choices[0], choices[-1], step=self.batch_step)
                )
            elif name in INT_KNOBS:
                out[name] = IntDistribution(*getattr(self, name))
            else:
                out[name] = CategoricalDistribution(list(getattr(self, name)))
        return out

    def config_of(self, params: dict[str, Any]) -> LoaderConfig:
        """The configuration that Optuna parameters ``params`` (as :meth:`suggest` makes
        them) stand for, the fixed knobs included."""
        return config_from_params(params, self.fixed())

    def configs(self) -> list[LoaderConfig]:
        """Every distinct configuration of the space (with 0 workers, prefetch_factor and
        persistent_workers do not apply, so those collapse into one)."""
        lo, hi = self.num_workers
        out: dict[LoaderConfig, None] = {}
        for cache in self.cache or (None,):
            for workers in range(lo, hi + 1):
                for batch in self.batch_choices():
                    for pin in self.pin_memory:
                        if workers == 0:
                            out.setdefault(LoaderConfig(0, batch, pin, cache=cache), None)
                            continue
                        prefetches = range(self.prefetch_factor[0], self.prefetch_factor[1] + 1)
                        for prefetch in prefetches:
                            for persistent in self.persistent_workers:
                                config = LoaderConfig(
                                    workers, batch, pin, prefetch, persistent, cache=cache
                                )
                                out.setdefault(config, None)
        return list(out)

    def params_of(self, config: LoaderConfig) -> dict[str, Any]:
        """The Optuna parameters :meth:`suggest` would produce for ``config`` (for
        ``enqueue_trial``): fixed knobs and conditional knobs without workers are left out."""
        fixed = self.fixed()
        params = {"num_workers": config.num_workers, "batch_size": config.batch_size}
        params["pin_memory"] = config.pin_memory
        if config.num_workers > 0:
            params["prefetch_factor"] = config.prefetch_factor
            params["persistent_workers"] = config.persistent_workers
            params["start_method"] = config.start_method
        if self.cache:
            params["cache"] = config.cache
        return {k: v for k, v in params.items() if k not in fixed}


def config_from_params(params: dict[str, Any], fixed: dict[str, Any]) -> LoaderConfig:
    """The configuration of a trial's parameters plus the space's fixed knobs."""
    data = {**fixed, **params}
    if data.get("num_workers", 0) == 0:
        data.pop("prefetch_factor", None)
        data["persistent_workers"] = False
    return LoaderConfig.from_dict(data)


def _powers_of_two(lo: int, hi: int) -> bool:
    return any(lo <= 2**k <= hi for k in range(31))
