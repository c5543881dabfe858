"""How long one measurement runs: :class:`MeasurePlan` (warm-up, short epochs sized to the
configuration, windows for the pruner, the precision the epoch time is measured to)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loadersearch._loader_config import DEFAULT_PREFETCH, LoaderConfig
from loadersearch._options import NUMBER, WHOLE, Record, check_fields, opt

# How measure.projection turns short epochs into a full epoch's time, stored with each study
# so that trials projected one way are not ranked against trials projected another: 1, the
# steady rate from the second group of batches to the last (the loader's drain in the rate);
# 2, from the first group's last arrival to the group before the drain (the drain and the
# start are per-epoch costs).
PROJECTION_METHOD = 2
DEFAULT_PRECISION = 0.05  # a study's measurements: the epoch time to +/-5% (90% confidence)
# The command line's plan is a study's (search.default_plan): its defaults are said in the
# options' help, for both kinds of study (tests/measure/test_plan_help.py checks them).
_CPU = "a study where the CPU does the heavy work"


@dataclass(frozen=True)
class MeasurePlan(Record):
    """How long one measurement runs: warm-up, then ``epochs`` short epochs of ``steps``, or
    more for a configuration with many batches in flight (:meth:`sized_steps`)."""

    # Defaults: 4 warm-up + 3 x 8 measured steps, about 10 s on a 2-core CPU for the train
    # workload at 128 px, batch 16 (process start and imports ~3.5 s of it, not measured).
    epochs: int = opt(
        3, kind=WHOLE, low=1, help="Measured short epochs, after the warm-up "
        f"[default: 3; {_CPU}: 2].",
    )  # fmt: skip
    steps: int = opt(
        8, kind=WHOLE, low=1, help="Batches per short epoch "
        f"[default: 8; {_CPU}: 4].",
    )  # fmt: skip
    windows_per_epoch: int = opt(
        2, kind=WHOLE, low=1, flags=("--windows-per-epoch", "--windows"),
        help="Measurement windows per short epoch: the steps the pruner compares "
        "[default: 4].",
    )  # fmt: skip
    warmup_epochs: int = opt(  # not measured: cudnn autotune, page cache, allocator growth
        1, kind=WHOLE, low=0, help="Unmeasured warm-up epochs [default: {default}]."
    )
    warmup_steps: int | None = opt(
        4, kind=WHOLE, low=1, help="Batches per warm-up epoch "
        f"[default: 4; {_CPU}: 2].",
    )  # fmt: skip
    timeout_s: float = opt(
        300.0, kind=NUMBER, low=0, low_open=True, flags=("--timeout", "--trial-timeout"),
        help="Wall-clock limit of one measurement in seconds, start-up included "
        "[default: {default:g}; " + _CPU + ": 120].",
    )  # fmt: skip
    # after start-up, no window for this long = a hang (TIMEOUT)
    stall_s: float = opt(120.0, kind=NUMBER, low=0, low_open=True, flags=())
    # Sized to the configuration (sized_steps): a measured epoch of a configuration with
    # workers holds at least in_flight_rounds x the batches its DataLoader keeps in flight,
    # plus one batch per worker, so that every worker count has a steady part to measure.
    in_flight_rounds: int = opt(
        2, kind=WHOLE, low=0,
        help="Size each measured epoch to its configuration: with W workers and prefetch "
        "factor P, at least ROUNDS x W x P + W steps (the batches in flight, ROUNDS times "
        "over), so that every worker count has a steady part; 0 = --steps for every "
        "configuration [default: {default}].",
    )  # fmt: skip
    epoch_limit_s: float = opt(  # without a warm-up, not cut
        20.0, kind=NUMBER, low=0, low_open=True, flags=("--epoch-limit",),
        help="Seconds a sized epoch may take at the warm-up's rate; longer ones are cut "
        "(never below --steps) [default: {default:g}; " + _CPU + ": 8].",
    )  # fmt: skip
    # The relative half-width of the projected epoch time's 90% confidence interval
    # (measure.projection.epoch_time_precision). The extra epochs have the same length (not
    # cut into windows: the pruner compares the same windows in every trial). Reads whose time
    # varies a lot (a disk's seeks, a network file system) need it: a few short epochs see the
    # typical read, not the mean one.
    precision: float = opt(
        0.0, kind=NUMBER, low=0, high=1, high_open=True,
        help="Measure until the projected epoch time is known this well: the relative "
        "half-width of its 90% confidence interval, from the spread of the measured "
        "epochs; more epochs follow while it is wider, within --extend-limit seconds. "
        f"Storage whose reads vary a lot needs it. 0 = exactly --epochs [default: "
        f"{DEFAULT_PRECISION:g}].",
    )  # fmt: skip
    extend_limit_s: float = opt(
        20.0, kind=NUMBER, low=0, flags=("--extend-limit",),
        help="Seconds of measured epochs a measurement may add for --precision, and never "
        "more than 3x its planned epochs' time [default: {default:g}; a study where the CPU "
        "does the heavy work: 8].",
    )  # fmt: skip
    projection: int = PROJECTION_METHOD  # the projection's method (stored: see its comment)
    extra: dict[str, Any] = field(default_factory=dict)  # reserved for workload-specific knobs

    def __post_init__(self) -> None:
        check_fields(self)
        if self.windows_per_epoch > self.steps:
            raise ValueError(
                f"windows_per_epoch ({self.windows_per_epoch}) cannot exceed steps "
                f"({self.steps}): give fewer windows_per_epoch (--windows-per-epoch) or more "
                "steps (--steps)."
            )

    def sized_steps(self, config: LoaderConfig, full_steps: int = 0) -> int:
        """Steps of one measured epoch of ``config`` before the time limit: ``steps``, or for
        ``w`` workers with prefetch factor ``p`` at least ``in_flight_rounds * w * p + w`` (the
        batches in flight, ``in_flight_rounds`` times over, then one more batch per worker: a
        whole number of rounds of ``w`` batches); never more than ``full_steps``, one full
        epoch of the dataset (when known and above ``steps``). The same for every trial of the
        same configuration and dataset."""
        target = self.steps
        if self.in_flight_rounds and config.num_workers > 0:
            in_flight = config.num_workers * (config.prefetch_factor or DEFAULT_PREFETCH)
            target = max(target, self.in_flight_rounds * in_flight + config.num_workers)
        if full_steps > 0:
            target = min(target, max(self.steps, full_steps))
        return target

    def warmup_steps_for(self, config: LoaderConfig, sized: int) -> int:
        """Steps of a warm-up epoch: ``warmup_steps`` (or ``steps``), and with sizing at least
        two batches per worker (within ``sized``), so that every worker has started and its
        rate can bound the measured epochs' length (:attr:`epoch_limit_s`)."""
        steps = self.warmup_steps or self.steps
        if self.in_flight_rounds and config.num_workers > 0:
            steps = max(steps, min(2 * config.num_workers, sized))
        return steps

    def limited_steps(
        self, sized: int, warmup_steps: int, warmup_s: float, num_workers: int = 0
    ) -> int:
        """``sized`` cut to what fits in :attr:`epoch_limit_s` at the warm-up's rate
        (``warmup_steps`` in ``warmup_s``, epoch start included), never below ``steps``. A cut
        keeps a whole number of rounds of ``num_workers`` batches: workers deliver in rounds,
        and an epoch ending in a partial round would count the whole round's time for part of
        its batches (the start cost, and so the projection, would come out too high)."""
        if warmup_s <= 0 or sized <= self.steps:
            return sized
        fits = int(self.epoch_limit_s * warmup_steps / warmup_s)
        if num_workers > 1:
            fits = fits // num_workers * num_workers
        return max(self.steps, min(sized, fits))

    @property
    def n_windows(self) -> int:
        return self.epochs * self.windows_per_epoch
