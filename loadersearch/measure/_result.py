"""What a measurement reports: windows while it runs, one result at the end.

The measuring child writes these as JSON lines on a pipe; the parent turns them back into
these dataclasses. Window ``index`` k means the same position in every measurement with the
same :class:`~loadersearch.measure._plan.MeasurePlan` (epoch ``k // windows_per_epoch``, part
``k % windows_per_epoch``), so a pruner compares like with like.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from loadersearch._loader_config import LoaderConfig

# Status of a finished measurement.
OK = "ok"  # measured; the objective is valid
INFEASIBLE = "infeasible"  # this configuration cannot run here (over the cap, worker killed, ...)
PRUNED = "pruned"  # the caller stopped it early (on_window returned False)
INTERRUPTED = "interrupted"  # Ctrl-C in the parent
ERROR = "error"  # a problem that is not the configuration's fault (bad dataset, a bug)

# Reasons: why a measurement is INFEASIBLE or an ERROR. Stable strings, stored in studies.
VRAM_CAP = "vram_cap"  # device memory over the cap (CUDA OOM, or emulated allocation)
WORKER_KILLED = "worker_killed"  # a DataLoader worker died (killed from outside, OOM killer)
SHM_FULL = "shm_full"  # /dev/shm ran out (torch's shm allocation, SIGBUS): docker --shm-size
TIMEOUT = "timeout"  # the child or a DataLoader worker hung past the wall-clock limit
KILLED = "killed"  # the child itself was killed by a signal
HOST_OOM = "host_oom"  # host RAM exhausted
BAD_SAMPLE = "bad_sample"  # an unreadable image or malformed label (names the file)
BAD_DATASET = "bad_dataset"  # missing directory, unknown format, empty dataset
BAD_PIPELINE = "bad_pipeline"  # the user's pipeline cannot be imported, built or run
INVALID_CONFIG = "invalid_config"  # e.g. prefetch_factor with num_workers=0
NO_DEVICE = "no_device"  # the study runs on CUDA but the measuring process sees no GPU
RESOURCE_LIMIT = "resource_limit"  # a process limit (ulimit -n, ulimit -v), named with its fix
CRASH = "crash"  # anything else: a bug; the message carries the traceback's last line


@dataclass(frozen=True)
class Advice:
    """What to do about an infeasible measurement of one reason."""

    note: str  # why and what helps, in a trial's note in optuna-dashboard
    fix: str  # the options to change, when no trial of a study was feasible


_RAM_FIX = (
    "the host ran out of RAM: allow fewer workers (--space num_workers=0:N) or smaller "
    "batches, or free memory"
)
# The one table of advice by INFEASIBLE reason.
INFEASIBLE_ADVICE = {
    VRAM_CAP: Advice(
        "this batch does not fit under the VRAM cap. The batch-size probe keeps the search "
        "below the largest batch that fits (unless --no-probe); raise --vram-cap only if your "
        "real training has that memory to spare.",
        "raise --vram-cap, or allow smaller batches (--space batch_size=LOW:HIGH)",
    ),
    WORKER_KILLED: Advice(
        "a DataLoader worker died, usually because host RAM ran out (the OOM killer: see "
        "dmesg). Fewer workers, a smaller prefetch_factor or smaller batches need less.",
        "free host RAM or allow fewer workers and smaller batches",
    ),
    SHM_FULL: Advice(
        "/dev/shm ran out: DataLoader workers pass every batch through it, about batch bytes x "
        "num_workers x prefetch_factor at once (Docker gives a container 64 MB). Run the "
        "container with --shm-size=8g or --ipc=host; fewer workers, a smaller prefetch_factor "
        "or smaller batches need less, and num_workers=0 needs none.",
        "enlarge /dev/shm (docker run --shm-size=8g or --ipc=host) or allow fewer workers and "
        "smaller batches (--space num_workers=0:N)",
    ),
    TIMEOUT: Advice(
        "the measurement hung past the trial timeout (a worker stuck on I/O, or a deadlock). "
        "If this configuration is merely slow, raise --trial-timeout.",
        "raise --timeout, or look for a DataLoader worker that hangs (--debug)",
    ),
    KILLED: Advice(
        "the measuring process was killed without a word, most likely by the kernel's OOM "
        "killer (see dmesg). Fewer workers or a smaller prefetch_factor use less host RAM.",
        _RAM_FIX,
    ),
    HOST_OOM: Advice(
        "host RAM ran out. Fewer workers, a smaller prefetch_factor or smaller batches use "
        "less.",
        _RAM_FIX,
    ),
    INVALID_CONFIG: Advice(
        "PyTorch refuses this combination of settings; the search space should not offer it, "
        "so please report it with the configuration above.",
        "check --fix and --space",
    ),
}


@dataclass(frozen=True)
class Window:
    """One measurement window: a fixed slice of steps of one measured epoch."""

    index: int  # global window id, 0 .. plan.n_windows-1: the Optuna step
    epoch: int  # measured epoch, 0-based (the warm-up is not counted)
    images: int  # images consumed in the window
    seconds: float  # wall time of the window
    wait_s: float  # time the loop waited for the next batch from the DataLoader
    compute_s: float  # time spent in the step (device synchronised at window edges)
    h2d_s: float  # host-to-device copy time
    start_s: float = 0.0  # epoch start cost inside this window (iterator creation to 1st batch)
    # images of the measured epoch this window belongs to (its steps are sized to the
    # configuration: MeasurePlan.sized_steps); 0 = unknown (plan.steps x batch_size)
    epoch_images: int = 0

    @property
    def rate(self) -> float:
        """Images per second in this window."""
        return self.images / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Window:
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


@dataclass
class MeasureResult:
    """The outcome of measuring one :class:`LoaderConfig` on one workload."""

    config: LoaderConfig
    status: str  # OK | INFEASIBLE | PRUNED | INTERRUPTED | ERROR
    reason: str | None = None  # one of the reason strings above when not OK
    message: str = ""  # a sentence a user can act on, e.g. "over the VRAM cap at batch 64"
    device: str = "cpu"  # "cuda:0 (NVIDIA ...)" / "cpu" / "emulated"
    workload: str = "train"
    emulated: bool = False  # results of the emulated accelerator are labelled everywhere
    emulated_io_ms: float = 0.0  # emulated storage latency per sample read (labelled too)
    windows: list[Window] = field(default_factory=list)
    dataset_images: int = 0  # images in one full epoch of the user's dataset
    img_size: int | None = None  # network input the workload used (resolved from None)
    steady_rate: float = 0.0  # images/s between epoch starts
    start_cost_s: float = 0.0  # seconds each epoch start costs beyond the steady state
    objective: float = 0.0  # projected images/s of one full epoch (see measure.projection)
    epoch_time_s: float = 0.0  # projected seconds of one full epoch
    window_cv: float = 0.0  # coefficient of variation of the window rates
    wait_fraction: float = 0.0  # share of measured time the loop waited for data
    overhead_s: float = 0.0  # fixed cost of the trial: process start, imports, model build
    warmup_s: float = 0.0  # time of the unmeasured warm-up
    # Device memory, peaks of the measured epochs (CUDA) or of the run (emulated):
    peak_vram_bytes: int | None = None  # allocator peak reserved (or emulated allocation)
    peak_allocated_bytes: int | None = None  # allocator peak allocated (tensors alone)
    peak_reserved_bytes: int | None = None  # allocator peak reserved (tensors + its cache)
    nvml_peak_bytes: int | None = None  # NVML per-process peak, CUDA context included
    cuda_overhead_bytes: int | None = None  # device memory outside the allocator (context, ...)
    memory_fraction: float | None = None  # allocator fraction that enforced the VRAM cap
    alloc_retries: int | None = None  # allocator cache flushes + retries while measuring
    alloc_ooms: int | None = None  # out-of-memory errors the allocator recovered from
    gpu_util_mean: float | None = None  # % from NVML during the measured epochs
    cpu_util_mean: float | None = None  # % of one core, summed over the process tree
    peak_rss_bytes: int | None = None  # trainer + all DataLoader workers
    shm_peak_bytes: int | None = None  # /dev/shm used, peak during the measurement
    # The machine while measuring (measure.hostload): CPUs' worth used by processes outside
    # the measurement, as a number of CPUs and as a share of them; steal time's share; and
    # whether that was enough to flag the measurement (its figures may be low).
    outside_load: float | None = None
    outside_share: float | None = None
    steal_share: float | None = None
    busy_host: bool = False
    # A busy measurement measured again (search.objective.quieter): both outside shares and
    # values, and which one this result is.
    remeasured: dict[str, Any] | None = None
    nvml: str = "absent"  # "ok" or why NVML is not available ("absent: no NVIDIA driver")
    notes: list[str] = field(default_factory=list)  # e.g. "VRAM cap does not apply on CPU"
    # "path: reason" of each image skip_bad_samples replaced that failed only when decoded
    # (its header passed the dataset check: workload.datasets.skipped)
    skipped_samples: list[str] = field(default_factory=list)
    # Several ranks (DDP): one dict per rank (rank, device, steady_rate, wait_fraction,
    # window_rates, peak_vram_bytes, nvml_peak_bytes, peak_rss_bytes, gpu_util_mean,
    # cpu_util_mean), so a report can say when one rank starves; empty for one process.
    ranks: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0  # total wall time of the measurement, parent's view
    # Where wall_s went, seconds by phase (PHASES), as the parent saw the child's messages.
    phases: dict[str, float] = field(default_factory=dict)
    epoch_steps: int = 0  # steps of each measured epoch (sized to the configuration)
    # How well epoch_time_s is known: the relative half-width of its 90% confidence interval
    # over the measured epochs (None: fewer than two), and the measured epochs added beyond the
    # plan's to narrow it (MeasurePlan.precision).
    precision: float | None = None
    extra_epochs: int = 0
    # A cold-cache measurement (MeasurePlan.extra "cold_cache"): files, bytes, evictions,
    # checked (mincore answered), resident_after_evict (worst epoch's fraction still in memory).
    page_cache: dict[str, Any] | None = None
    # Per measured epoch: t0 (time.monotonic() at iter(loader)), arrivals (seconds from t0 to
    # each batch) and waits (each step's wait for its batch, seconds): the trainer's data-wait
    # timeline.
    steps: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["config"] = self.config.to_dict()
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeasureResult:
        data = dict(data)
        data["config"] = LoaderConfig.from_dict(data["config"])
        data["windows"] = [Window.from_dict(w) for w in data.get("windows", [])]
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


# A measurement's phases, in order: the measuring process's start (a fork of the fork server,
# or a whole Python and torch start), building the dataset, loader and model, the unmeasured
# warm-up, the planned measured epochs, the epochs added for the precision, and the teardown
# (ending the process and its workers). They add up to ``wall_s``.
PHASES = ("start", "build", "warmup", "planned", "extra", "teardown")


# The phase that begins at each moment the parent sees, in order.
_BEGINS = (("started", "build"), ("ready", "warmup"), ("measuring", "planned"),
           ("extra", "extra"), ("done", "teardown"))  # fmt: skip


def phases_of(marks: dict[str, float], t0: float, end: float) -> dict[str, float]:
    """Seconds by phase from the moments the parent saw (``time.monotonic()``, a clock shared
    by every process of the machine) between ``t0`` (the measurement's start) and ``end``:
    ``started`` (the child's own start), ``ready``, ``measuring`` (the last warm-up epoch's
    end), ``extra`` (the first added epoch's start) and ``done`` (its result, or the end of a
    pruned or failed one). A moment never reached leaves its phase at 0: the time stays with
    the phase before it."""
    phases = dict.fromkeys(PHASES, 0.0)
    current, last = "start", t0
    for mark, begins in _BEGINS:
        at = marks.get(mark)
        if at is None:
            continue
        at = min(max(at, last), end)
        phases[current] += at - last
        current, last = begins, at
    phases[current] += max(0.0, end - last)
    return {k: round(v, 3) for k, v in phases.items()}
