"""The landscape zoo: models of the hosts users have, as tables in the documented format, so
that every search method is replayed on landscapes it was not designed on (issue 23).

A model is a function of the configuration giving its *true* objective (images/s of the
projected full epoch) and the noise of one measurement (its coefficient of variation). The
table stores them per point (``truth``, ``noise``); it stores no measurements: the replay
draws them from the truth and the noise (``--fair``), or reads three repeats drawn once, with
a fixed seed, from the same (``Table.from_data``). Every model is a few lines, built from the
parts below; docs/benchmarks/landscape-zoo.md says what each one stands for.

The parts (the shape of the problem):

* workers: a loader rate that rises with workers, ``min(w x per-worker rate, the CPUs'
  rate)`` as a soft minimum, or an explicit peak (a log-normal bump at any worker count);
  beyond the cores, contention takes a share per extra worker;
* the accelerator: ``b / (fixed + per image x b)`` per second, the soft minimum with the
  loader's rate (a pipeline never reaches the slower stage exactly);
* batch: a log-normal bump around the best batch (the loader's per-batch work and memory
  make the largest batch lose on a server), or none;
* persistent_workers: without it every epoch pays a worker start of ``s0 + s1 x w`` seconds;
* prefetch_factor: hides the spread of reads, ``1 - hide / (pf + 1)``;
* pin_memory: on a GPU host a gain on the copy, absent on a CPU host.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from loadersearch import LoaderConfig

Model = Callable[[LoaderConfig], float]

DATASET = 2048  # images in the modelled full epoch (the objective's projection)
IMG_SIZE = 416  # the modelled network input (where a landscape models memory)
# One image as a worker sends it through /dev/shm: uint8 3 x 416 x 416 and its boxes
# (loadersearch.measure._shm.batch_bytes for one image).
IMAGE_BYTES = 3 * IMG_SIZE * IMG_SIZE + 512
GIB = 2**30


@dataclass(frozen=True)
class Landscape:
    """One modelled host: its hardware, the axes of its table, its model and its noise."""

    name: str
    about: str  # one line: what it stands for
    model: Model
    cpus: int
    physical: int
    gpus: int = 0  # replayed as a CUDA host (baselines and pinned memory) when > 0
    workers: tuple[int, ...] = ()  # default: 0 .. min(2 x cpus, 32), every count
    batches: tuple[int, ...] = (8, 16, 32, 64, 128)
    prefetch: tuple[int, ...] = (1, 2, 4, 8)
    cap_batches: tuple[int, ...] = ()  # over the VRAM cap (infeasible)
    noise: float = 0.04  # CV of one measurement
    held_out: bool = False
    extra: dict[str, Any] = field(default_factory=dict)
    # The host's memory, in the table's hardware as a run's probe records it (None: not
    # modelled): /dev/shm's and RAM's size in bytes. With ``shm_bytes`` a configuration whose
    # batches in flight (workers x prefetch x batch images of IMAGE_BYTES) exceed /dev/shm
    # is infeasible (shm_full), as torch fails there.
    shm_bytes: int | None = None
    ram_bytes: int | None = None
    shm_fails: bool = True  # False: the sizes recorded only (a model written before them)
    memory_limit_bytes: int | None = None  # a container's cgroup memory limit (below the RAM)

    def worker_axis(self) -> tuple[int, ...]:
        return self.workers or tuple(range(0, min(2 * self.cpus, 32) + 1))


# -- parts ---------------------------------------------------------------------------------------


def soft_min(a: float, b: float, p: float = 4.0) -> float:
    """A pipeline's rate from its stages' rates: below the slower one, near it when far apart."""
    return (a**-p + b**-p) ** (-1.0 / p)


def bump(x: float, best: float, width: float) -> float:
    """A log-normal bump: 1 at ``best``, ``exp(-1/2)`` ``width`` doublings away."""
    return math.exp(-0.5 * (math.log2(x / best) / width) ** 2)


def loader_rate(w: int, *, per_worker: float, cpu_rate: float, serial: float, cores: int,
                contention: float = 0.0) -> float:  # fmt: skip
    """Images/s the loader delivers: ``serial`` in the main process (0 workers), else
    ``w x per_worker`` up to the CPUs' rate, less ``contention`` per worker beyond the cores."""
    if w == 0:
        return serial
    rate = soft_min(w * per_worker, cpu_rate)
    return rate / (1.0 + contention * max(0, w - cores) / cores)


def accelerator(b: int, *, fixed_ms: float, per_image_ms: float) -> float:
    return 1000.0 * b / (fixed_ms + per_image_ms * b)


def epoch(steady: float, c: LoaderConfig, *, s0: float, s1: float) -> float:
    """The full epoch's rate: the steady rate and, without persistent workers, a worker start
    of ``s0 + s1 x w`` seconds every epoch."""
    start = 0.0 if c.num_workers == 0 or c.persistent_workers else s0 + s1 * c.num_workers
    return DATASET / (DATASET / steady + start)


def prefetch(c: LoaderConfig, hide: float) -> float:
    return 1.0 if c.num_workers == 0 else 1.0 - hide / (c.prefetch_factor + 1)


def pinned(c: LoaderConfig, gain: float) -> float:
    return 1.0 + gain if c.pin_memory else 1.0


# -- the landscapes ------------------------------------------------------------------------------


def gpu_server(*, batch_width: float = 3.56, best_batch: int = 32, cores: int = 16) -> Model:
    """A 16-core GPU server, loader-bound: decode scales with workers up to the cores, the
    best batch in the middle. Its ten numbers were fitted (least squares on the logarithm)
    through the 8 configurations the H200 study measured, each within 5%
    (docs/benchmarks/landscape-zoo.md lists model against measurement)."""

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        loader = loader_rate(w, per_worker=107.1, cpu_rate=107.1 * cores * 0.796, serial=83.5,
                             cores=cores, contention=0.509)  # fmt: skip
        gpu = accelerator(b, fixed_ms=13.22, per_image_ms=1.395) * pinned(c, 0.06)
        steady = soft_min(loader, gpu) * prefetch(c, 0.352) * bump(b, best_batch, batch_width)
        return epoch(steady, c, s0=0.132, s1=0.059)

    return f


def many_core(*, cores: int = 64) -> Model:
    """64 cores and a fast GPU: decode-bound up to ~28 workers, so the rules of thumb (8 and 32
    workers) beat a search that starts at 4."""

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        loader = loader_rate(w, per_worker=45.0, cpu_rate=45.0 * 28, serial=40.0, cores=28,
                             contention=0.25)  # fmt: skip
        gpu = accelerator(b, fixed_ms=4.0, per_image_ms=0.5) * pinned(c, 0.04)
        steady = soft_min(loader, gpu) * prefetch(c, 0.08) * bump(b, 64, 1.8)
        return epoch(steady, c, s0=0.3, s1=0.04)

    return f


def slow_storage() -> Model:
    """Network storage on an 8-core host: every read waits 50 ms (no CPU), decode takes 6 ms,
    so the rate grows with workers past the cores and a deep prefetch hides the reads'
    spread."""

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        loader = loader_rate(w, per_worker=1000.0 / 56.0, cpu_rate=1000.0 / 6.0 * 7, serial=16.0,
                             cores=8, contention=0.02)  # fmt: skip
        gpu = accelerator(b, fixed_ms=10.0, per_image_ms=1.5)
        steady = soft_min(loader, gpu) * prefetch(c, 0.45) * bump(b, 32, 2.5)
        return epoch(steady, c, s0=0.3, s1=0.05)

    return f


def compute_bound() -> Model:
    """Fast local storage, a slow model on the GPU: from 2 workers on the loader barely
    matters (every answer near 100%)."""

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        loader = loader_rate(w, per_worker=400.0, cpu_rate=400.0 * 8, serial=120.0, cores=8,
                             contention=0.03)  # fmt: skip
        gpu = accelerator(b, fixed_ms=8.0, per_image_ms=6.0) * pinned(c, 0.01)
        return epoch(soft_min(loader, gpu, 8.0), c, s0=0.2, s1=0.02)

    return f


def peak_at(peak: int, *, cores: int, best_batch: int = 32, drop: float = 0.10) -> Model:
    """An optimum at ``peak`` workers, ``drop`` (10%) above the nearest power of two on
    either side: a log-normal bump in workers on a floor of 0-worker speed."""
    below = 2 ** math.floor(math.log2(peak))
    near = min((below, 2 * below), key=lambda v: abs(math.log2(v / peak)))
    width = abs(math.log2(near / peak)) / math.sqrt(-2.0 * math.log(1.0 - drop))

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        profile = 0.25 if w == 0 else 0.25 + 0.75 * bump(w, peak, width)
        steady = 400.0 * profile * prefetch(c, 0.06) * bump(b, best_batch, 1.5) * pinned(c, 0.03)
        return epoch(steady, c, s0=0.2, s1=0.03)

    return f


def small_vram() -> Model:
    """A GPU with little memory: batch 64 and 128 do not fit, and the largest batch that fits
    (32) is the best; 12 cores, decode-bound."""
    return gpu_server(best_batch=128, batch_width=3.0, cores=12)


def article(*, at: dict[int, float] | None = None) -> Model:
    """The source article's own figures (YOLOv4-tiny, RTX 2070S, 6 cores / 12 threads,
    VOC's 16,551 images): epoch time by num_workers at batch 16 with pin_memory
    [78.3, 65.2, 58.7, 55.1, 54.8, 55.3, 56.2] s for [0, 1, 2, 4, 8, 16, 32], between them
    log-linear; its orthogonal table: batch 32 4.4% faster (w8: 54.8 -> 52.4 s, w4: 55.1 ->
    53.8 s), no pinning 4.2% slower (w8 b16: 57.2 s); batch 8 and 64 and the other knobs are
    assumptions (8: 5% slower than 16; 64 as 32; persistence and prefetch: 1%)."""
    seconds = at or {0: 78.3, 1: 65.2, 2: 58.7, 4: 55.1, 8: 54.8, 16: 55.3, 32: 56.2}
    ws = sorted(seconds)
    batch = {8: 0.95, 16: 1.0, 32: 54.8 / 52.4, 64: 54.8 / 52.4}

    def f(c: LoaderConfig) -> float:
        w = c.num_workers
        hi = next(v for v in ws if v >= w)
        lo = max(v for v in ws if v <= w)
        t = 0.0 if hi == lo else (math.log2(w) - math.log2(max(lo, 0.5))) / (
            math.log2(hi) - math.log2(max(lo, 0.5)))  # fmt: skip
        sec = seconds[lo] + t * (seconds[hi] - seconds[lo])
        rate = 16551.0 / sec * batch[c.batch_size] * (1.0 if c.pin_memory else 54.8 / 57.2)
        if w:
            rate *= (1.01 if c.persistent_workers else 1.0) * (1.0 + 0.01 * (c.prefetch_factor
                                                                           >= 2))  # fmt: skip
        return rate

    return f


def zoo() -> list[Landscape]:
    """The design landscapes (the measured 2-core table is the ``measured`` one, read from
    benchmarks/data/tabular-grid.json.gz)."""
    return [
        Landscape("gpu-server-16", "16-core GPU server fitted to the H200 study's 8 points; "
                  "many workers, a middle batch", gpu_server(), cpus=16, physical=16, gpus=1,
                  noise=0.04),
        Landscape("gpu-server-16-weak-batch", "the same server with a weak batch effect",
                  gpu_server(batch_width=8.0), cpus=16, physical=16, gpus=1, noise=0.04),
        Landscape("many-core-64", "64 cores, 1 GPU: the baselines (w8, w32) beat a start at 4",
                  many_core(), cpus=64, physical=32, gpus=1, noise=0.04),
        Landscape("slow-storage", "8 cores, network storage at 50 ms a read: latency-bound, "
                  "prefetch matters", slow_storage(), cpus=8, physical=8, noise=0.06),
        Landscape("compute-bound", "fast storage, a slow model on the GPU: flat",
                  compute_bound(), cpus=8, physical=8, gpus=1, noise=0.03),
        Landscape("peak-5", "an optimum at 5 workers (8 cores)", peak_at(5, cores=8),
                  cpus=8, physical=8, noise=0.04),
        Landscape("peak-7", "an optimum at 7 workers (8 cores)", peak_at(7, cores=8,
                  best_batch=64), cpus=8, physical=8, gpus=1, noise=0.04),
        Landscape("peak-14", "an optimum at 14 workers (16 cores)", peak_at(14, cores=16),
                  cpus=16, physical=8, gpus=1, noise=0.04),
        Landscape("peak-20", "an optimum at 20 workers (16 cores)", peak_at(20, cores=16,
                  best_batch=16), cpus=16, physical=16, noise=0.04),
        Landscape("small-vram", "12 cores, a GPU whose memory holds batch 32 at most",
                  small_vram(), cpus=12, physical=6, gpus=1, batches=(8, 16, 32),
                  cap_batches=(64, 128), noise=0.04),
        Landscape("article", "the source article's figures (RTX 2070S, 6 cores / 12 threads)",
                  article(), cpus=12, physical=6, gpus=1, batches=(8, 16, 32, 64),
                  noise=0.02),
    ]  # fmt: skip


def held_out(seed: int) -> Landscape:
    """A landscape of the randomised family (held out from the design, issue 23): the host's
    cores, the worker optimum (a rise to the cores, a plateau or a peak), the best batch and
    its strength, persistence's and prefetch's effects and the noise, drawn from ``seed``."""
    rng = random.Random(seed)
    cpus = rng.choice([4, 6, 8, 12, 16, 24, 32, 48, 64])
    top = min(2 * cpus, 32)
    gpus = rng.choice([0, 1, 1, 2])
    shape = rng.choice(["rise", "peak", "latency"])
    knee = rng.randint(2, top)
    best_batch = rng.choice([8, 16, 32, 64, 128])
    width = rng.uniform(0.8, 4.0)
    hide = rng.uniform(0.0, 0.4)
    pin_gain = rng.uniform(0.0, 0.08) if gpus else 0.0
    s1 = rng.uniform(0.01, 0.08)
    contention = rng.uniform(0.05, 0.6)
    serial = rng.uniform(0.1, 0.4)
    noise = rng.uniform(0.02, 0.08)
    peak_width = rng.uniform(0.4, 1.2)

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        if w == 0:
            profile = serial
        elif shape == "peak":
            profile = serial + (1 - serial) * bump(w, knee, peak_width)
        else:
            profile = soft_min(w / knee, 1.0) / (1.0 + contention * max(0, w - knee) / knee)
        steady = 500.0 * profile * prefetch(c, hide) * bump(b, best_batch, width)
        return epoch(steady * pinned(c, pin_gain), c, s0=0.2, s1=s1)

    return Landscape(f"heldout-{seed}", f"held out: randomised family, seed {seed}", f,
                     cpus=cpus, physical=max(1, cpus // rng.choice([1, 2])), gpus=gpus,
                     noise=noise, held_out=True)  # fmt: skip


HELD_OUT_SEEDS = (2301, 2302, 2303, 2304)


def renamed_family(prefix: str, seeds: tuple[int, ...]) -> list[Landscape]:
    """The randomised family's landscapes for ``seeds``, named ``{prefix}-{seed}`` (a held-out
    set's share of new seeds)."""
    return [replace(land, name=f"{prefix}-{land.name.split('-')[1]}")
            for land in (held_out(s) for s in seeds)]  # fmt: skip


def server(*, cores: int, per_worker: float, knee: float, serial: float, contention: float,
           fixed_ms: float, per_image_ms: float, best_batch: int, batch_width: float,
           hide: float, pin_gain: float, s0: float, s1: float) -> Model:  # fmt: skip
    """A host whose decode scales with workers up to ``knee`` workers' worth (contention
    beyond the cores), an accelerator, a batch bump, prefetch, pinning and worker start: the
    parts above with every number a parameter (the unseen landscapes)."""

    def f(c: LoaderConfig) -> float:
        w, b = c.num_workers, c.batch_size
        loader = loader_rate(w, per_worker=per_worker, cpu_rate=per_worker * knee,
                             serial=serial, cores=cores, contention=contention)  # fmt: skip
        gpu = accelerator(b, fixed_ms=fixed_ms, per_image_ms=per_image_ms) * pinned(c, pin_gain)
        steady = soft_min(loader, gpu) * prefetch(c, hide) * bump(b, best_batch, batch_width)
        return epoch(steady, c, s0=s0, s1=s1)

    return f


def unseen() -> list[Landscape]:
    """The second held-out set (issue 23, the default sampler's redesign): written before the
    design started and replayed only for the final figures. New host shapes (24 and 48
    cores, a peak at 10 workers, network storage on 32 cores, a VRAM cap at a middle batch,
    a 4-core laptop) and four new seeds of the randomised family."""
    lands = [
        Landscape("unseen-24core", "24 cores (12 physical), 1 GPU, decode-bound to ~19 "
                  "workers, best batch 16", server(cores=24, per_worker=38.0, knee=19.0,
                  serial=30.0, contention=0.4, fixed_ms=6.0, per_image_ms=0.9, best_batch=16,
                  batch_width=2.2, hide=0.25, pin_gain=0.05, s0=0.25, s1=0.05),
                  cpus=24, physical=12, gpus=1, noise=0.04, held_out=True),
        Landscape("unseen-48core-2gpu", "48 cores (24 physical), 2 GPUs, decode-bound to ~26 "
                  "workers, a weak batch effect", server(cores=48, per_worker=30.0, knee=26.0,
                  serial=25.0, contention=0.3, fixed_ms=5.0, per_image_ms=0.6, best_batch=128,
                  batch_width=5.0, hide=0.15, pin_gain=0.04, s0=0.4, s1=0.03),
                  cpus=48, physical=24, gpus=2, noise=0.05, held_out=True),
        Landscape("unseen-peak-10", "an optimum at 10 workers (12 cores, 1 GPU), batch 32",
                  peak_at(10, cores=12, best_batch=32, drop=0.12), cpus=12, physical=12,
                  gpus=1, noise=0.04, held_out=True),
        Landscape("unseen-netstore-32", "32 cores, network storage at 80 ms a read: rises to "
                  "the top of the range, prefetch matters", server(cores=32, per_worker=12.0,
                  knee=60.0, serial=11.0, contention=0.02, fixed_ms=12.0, per_image_ms=1.0,
                  best_batch=64, batch_width=2.5, hide=0.5, pin_gain=0.0, s0=0.4, s1=0.06),
                  cpus=32, physical=16, gpus=0, noise=0.06, held_out=True),
        Landscape("unseen-vram-mid", "16 cores, a GPU whose memory holds batch 64 at most, "
                  "the best batch 32", server(cores=16, per_worker=50.0, knee=12.0,
                  serial=40.0, contention=0.35, fixed_ms=8.0, per_image_ms=1.0,
                  best_batch=32, batch_width=1.3, hide=0.2, pin_gain=0.05, s0=0.2, s1=0.04),
                  cpus=16, physical=8, gpus=1, batches=(8, 16, 32, 64), cap_batches=(128,),
                  noise=0.04, held_out=True),
        Landscape("unseen-laptop-4", "4 cores, no GPU: the rate levels at 3-4 workers, "
                  "contention beyond the cores, batch 64", server(cores=4, per_worker=70.0,
                  knee=3.0, serial=60.0, contention=0.5, fixed_ms=20.0, per_image_ms=2.0,
                  best_batch=64, batch_width=1.8, hide=0.1, pin_gain=0.0, s0=0.3, s1=0.08),
                  cpus=4, physical=4, gpus=0, noise=0.05, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("unseen", UNSEEN_SEEDS)


UNSEEN_SEEDS = (2311, 2312, 2313, 2314)


def fresh() -> list[Landscape]:
    """The third held-out set (issue 23, stop 30): written before that stop changed the
    search (heldout-2303, looked at to find why the search lost at budget 6, is held out no
    longer) and replayed only for its final figures. Two new host shapes (an 8-core CPU
    training host whose model is the bottleneck, noisy; an 8-core one-GPU workstation) and
    eight new seeds of the randomised family."""
    lands = [
        Landscape("fresh-cpu-8-noisy", "8 cores, no GPU, training on the CPU: the model is "
                  "the bottleneck from ~3 workers, noisy measurements", server(cores=8,
                  per_worker=40.0, knee=3.0, serial=25.0, contention=0.15, fixed_ms=40.0,
                  per_image_ms=18.0, best_batch=32, batch_width=2.0, hide=0.05, pin_gain=0.0,
                  s0=0.3, s1=0.05), cpus=8, physical=4, gpus=0, noise=0.09, held_out=True),
        Landscape("fresh-gpu-8", "an 8-core workstation, 1 GPU, loader-bound to ~6 workers, "
                  "best batch 64", server(cores=8, per_worker=45.0, knee=6.0, serial=35.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.8, best_batch=64,
                  batch_width=1.6, hide=0.2, pin_gain=0.05, s0=0.3, s1=0.05),
                  cpus=8, physical=8, gpus=1, noise=0.04, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("fresh", FRESH_SEEDS)


FRESH_SEEDS = (2321, 2322, 2323, 2324, 2325, 2326, 2327, 2328)


def reserve() -> list[Landscape]:
    """The fourth held-out set (issue 23, stop 31): written before that stop changed the
    search (fresh-2322, looked at to find why the search lost at budget 6, is held out no
    longer) and replayed only for its final figures. Two new host shapes (one rank of an
    8-GPU server with 16 cores of its own; a 6-core laptop whose small GPU holds batch 32 at
    most) and eight new seeds of the randomised family."""
    lands = [
        Landscape("reserve-rank-16", "one rank of an 8-GPU server: 16 cores of its own, "
                  "decode-bound to ~12 workers, best batch 64", server(cores=16,
                  per_worker=42.0, knee=12.0, serial=30.0, contention=0.25, fixed_ms=4.0,
                  per_image_ms=0.5, best_batch=64, batch_width=2.0, hide=0.2, pin_gain=0.06,
                  s0=0.4, s1=0.05), cpus=16, physical=16, gpus=1, noise=0.05, held_out=True),
        Landscape("reserve-laptop-gpu-6", "a 6-core laptop (12 threads), a small GPU that "
                  "holds batch 32 at most, loader-bound to ~5 workers, best batch 16",
                  server(cores=12, per_worker=35.0, knee=5.0, serial=28.0, contention=0.4,
                  fixed_ms=10.0, per_image_ms=1.5, best_batch=16, batch_width=1.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.06), cpus=12, physical=6, gpus=1,
                  batches=(8, 16, 32), cap_batches=(64, 128), noise=0.06, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("reserve", RESERVE_SEEDS)


RESERVE_SEEDS = (2331, 2332, 2333, 2334, 2335, 2336, 2337, 2338)


def spare() -> list[Landscape]:
    """The fifth held-out set (issues 23 and 26, stop 32): written before that stop changed
    the confirmation's finalists (fresh-cpu-8-noisy and reserve-laptop-gpu-6 were traced to
    find why its 10th percentile missed) and replayed only for its final figures. Two new
    host shapes (a 32-core CPU-training host whose model is the bottleneck, the quick start's
    kind at scale; a 12-core workstation whose worker start is dear) and eight new seeds of
    the randomised family."""
    lands = [
        Landscape("spare-cpu-32", "32 cores (16 physical), no GPU, training on the CPU: the "
                  "model is the bottleneck from ~6 workers, best batch 16, noisy",
                  server(cores=32, per_worker=30.0, knee=6.0, serial=22.0, contention=0.1,
                  fixed_ms=25.0, per_image_ms=9.0, best_batch=16, batch_width=1.8, hide=0.05,
                  pin_gain=0.0, s0=0.35, s1=0.04), cpus=32, physical=16, gpus=0, noise=0.07,
                  held_out=True),
        Landscape("spare-gpu-12", "a 12-core workstation (6 physical), 1 GPU, decode-bound "
                  "to ~9 workers, best batch 32, a dear worker start",
                  server(cores=12, per_worker=33.0, knee=9.0, serial=26.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=32, batch_width=2.4, hide=0.2,
                  pin_gain=0.05, s0=0.8, s1=0.1), cpus=12, physical=6, gpus=1, noise=0.05,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("spare", SPARE_SEEDS)


SPARE_SEEDS = (2341, 2342, 2343, 2344, 2345, 2346, 2347, 2348)


def memory_tight(model: Model, *, budget: float, slope: float, leak: float = 0.0,
                 cores: int = 1) -> Model:  # fmt: skip
    """``model`` on a host short of memory: the images in flight (``workers x prefetch x
    batch``) beyond ``budget`` cost ``slope`` of the rate per ``budget`` more (shared memory or
    RAM spills: a container's small /dev/shm), and persistent workers, whose memory grows
    while they live (copy-on-access of the dataset's Python objects), cost ``leak`` of the
    rate per ``cores`` workers. Deep prefetch and persistence, which the other models never
    penalise, can lose here."""

    def f(c: LoaderConfig) -> float:
        rate = model(c)
        if c.num_workers == 0:
            return rate
        inflight = c.num_workers * c.prefetch_factor * c.batch_size
        rate /= 1.0 + slope * max(0.0, inflight - budget) / budget
        if c.persistent_workers:
            rate /= 1.0 + leak * c.num_workers / cores
        return rate

    return f


def sixth() -> list[Landscape]:
    """The sixth held-out set (issue 23, stop 33): written before that stop changed the search
    (reserve-laptop-gpu-6 was traced seed by seed to find why its 10th percentile missed) and
    replayed only for its final figures. Two new host shapes, both short of memory, where the
    search's own defaults (the deepest prefetch, persistent workers) can lose to the baselines'
    (a 16-core GPU host in a container with a small /dev/shm; a 6-core CPU host whose
    persistent workers grow), and eight new seeds of the randomised family."""
    lands = [
        Landscape("sixth-shm-16", "16 cores (8 physical), 1 GPU, a container's small shared "
                  "memory: deep prefetch at many workers and large batches spills, "
                  "decode-bound to ~11 workers, best batch 32",
                  memory_tight(server(cores=16, per_worker=36.0, knee=11.0, serial=28.0,
                  contention=0.3, fixed_ms=6.0, per_image_ms=0.9, best_batch=32,
                  batch_width=2.0, hide=0.2, pin_gain=0.05, s0=0.3, s1=0.04),
                  budget=1024.0, slope=0.25), cpus=16, physical=8, gpus=1, noise=0.05,
                  held_out=True, shm_bytes=1 * GIB, ram_bytes=64 * GIB, shm_fails=False),
        Landscape("sixth-cpu-6-leak", "6 cores, no GPU, a peak near 5 workers, persistent "
                  "workers that grow (persistence a small loss at many workers), best batch 16",
                  memory_tight(server(cores=6, per_worker=20.0, knee=5.0, serial=15.0,
                  contention=0.5, fixed_ms=8.0, per_image_ms=3.0, best_batch=16,
                  batch_width=1.6, hide=0.1, pin_gain=0.0, s0=0.15, s1=0.02),
                  budget=2048.0, slope=0.1, leak=0.06, cores=6), cpus=6, physical=6, gpus=0,
                  noise=0.05, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("sixth", SIXTH_SEEDS)


SIXTH_SEEDS = (2351, 2352, 2353, 2354, 2355, 2356, 2357, 2358)


def seventh() -> list[Landscape]:
    """The seventh held-out set (issue 23, stop 33): written after the sixth set's replay
    showed the search losing on a host short of memory (sixth-shm-16) and before the change
    designed on it, and replayed only for its final figures. Two new host shapes (an 8-GPU
    node's rank with little RAM per rank, where a deep queue and persistent workers both cost
    a little; an 8-core GPU workstation where pinning matters and the loader barely does) and
    eight new seeds of the randomised family."""
    lands = [
        Landscape("seventh-ram-rank-12", "one rank of an 8-GPU node: 12 cores and little RAM "
                  "of its own, deep prefetch at large batches and persistent workers cost, "
                  "decode-bound to ~8 workers, best batch 64",
                  memory_tight(server(cores=12, per_worker=40.0, knee=8.0, serial=30.0,
                  contention=0.35, fixed_ms=5.0, per_image_ms=0.7, best_batch=64,
                  batch_width=2.5, hide=0.25, pin_gain=0.05, s0=0.3, s1=0.05),
                  budget=2048.0, slope=0.12, leak=0.03, cores=12), cpus=12, physical=12,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=8 * GIB, ram_bytes=16 * GIB,
                  shm_fails=False),
        Landscape("seventh-pin-gpu-8", "8 cores (4 physical), 1 GPU behind a slow PCIe link: "
                  "pinning +12%, compute-bound from ~4 workers, best batch 32",
                  server(cores=8, per_worker=60.0, knee=8.0, serial=40.0, contention=0.3,
                  fixed_ms=6.0, per_image_ms=2.5, best_batch=32, batch_width=2.0, hide=0.1,
                  pin_gain=0.12, s0=0.2, s1=0.03), cpus=8, physical=4, gpus=1, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("seventh", SEVENTH_SEEDS)


SEVENTH_SEEDS = (2361, 2362, 2363, 2364, 2365, 2366, 2367, 2368)

def eighth() -> list[Landscape]:
    """The eighth held-out set (issue 23, stop 34): written before the memory-aware prefetch
    default was designed, and replayed only for its final figures. Four hosts whose memory is
    modelled as the table's hardware says it (/dev/shm and RAM sizes, as a run's probe records
    them): two containers whose /dev/shm is too small for a deep queue at many workers (such
    configurations fail, shm_full, as torch does), a small VM whose queue beyond a share of
    its RAM swaps, and slow storage on a modest host where a deep queue is what pays (memory
    says "small" there, but the queue fits). Each onset is the host's, not a share any search
    was told of. Eight new seeds of the randomised family."""
    lands = [
        Landscape("eighth-shm-1g-16", "16 cores (8 physical), 1 GPU in a container run with "
                  "--shm-size=1g: a queue beyond /dev/shm fails (shm_full), decode-bound to "
                  "~12 workers, best batch 32",
                  server(cores=16, per_worker=30.0, knee=12.0, serial=25.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=32, batch_width=2.2, hide=0.2,
                  pin_gain=0.05, s0=0.3, s1=0.04), cpus=16, physical=8, gpus=1, noise=0.05,
                  held_out=True, shm_bytes=1 * GIB, ram_bytes=64 * GIB),
        Landscape("eighth-shm-4g-32", "32 cores (16 physical), 1 fast GPU, --shm-size=4g: "
                  "the queue slows beyond 60% of /dev/shm (page reclaim) and fails beyond it, "
                  "decode-bound to ~24 workers, best batch 64",
                  memory_tight(server(cores=32, per_worker=40.0, knee=24.0, serial=30.0,
                  contention=0.25, fixed_ms=4.0, per_image_ms=0.4, best_batch=64,
                  batch_width=2.5, hide=0.15, pin_gain=0.04, s0=0.4, s1=0.03),
                  budget=0.6 * 4 * GIB / IMAGE_BYTES, slope=0.3), cpus=32, physical=16,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=4 * GIB, ram_bytes=128 * GIB),
        Landscape("eighth-ram-vm-8", "a cloud VM: 8 vCPUs (4 physical), no GPU, 8 GiB of RAM: "
                  "a queue beyond 15% of RAM swaps, persistent workers grow a little, peak "
                  "near 6 workers, best batch 64",
                  memory_tight(server(cores=8, per_worker=22.0, knee=6.0, serial=18.0,
                  contention=0.4, fixed_ms=6.0, per_image_ms=2.0, best_batch=64,
                  batch_width=2.0, hide=0.12, pin_gain=0.0, s0=0.2, s1=0.03),
                  budget=0.15 * 8 * GIB / IMAGE_BYTES, slope=0.35, leak=0.04, cores=8),
                  cpus=8, physical=4, gpus=0, noise=0.05, held_out=True, shm_bytes=4 * GIB,
                  ram_bytes=8 * GIB),
        Landscape("eighth-nfs-16g-8", "8 cores, 1 GPU, 16 GiB of RAM, network storage (reads "
                  "~40 ms): a deep queue hides the reads, the rate grows with workers past the "
                  "cores; the queue slows only beyond half the RAM, best batch 32",
                  memory_tight(server(cores=8, per_worker=1000.0 / 46.0, knee=40.0,
                  serial=15.0, contention=0.02, fixed_ms=8.0, per_image_ms=1.2, best_batch=32,
                  batch_width=2.5, hide=0.4, pin_gain=0.03, s0=0.3, s1=0.05),
                  budget=0.5 * 16 * GIB / IMAGE_BYTES, slope=0.2), cpus=8, physical=8,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=8 * GIB, ram_bytes=16 * GIB),
    ]  # fmt: skip
    return lands + renamed_family("eighth", EIGHTH_SEEDS)


EIGHTH_SEEDS = (2371, 2372, 2373, 2374, 2375, 2376, 2377, 2378)


def ninth() -> list[Landscape]:
    """The ninth held-out set (issue 23, stop 34): written after the memory-aware prefetch's
    second form (a move never deepens the queue, stop 34's review) was designed, with the
    eighth set seen, and replayed only for its final figures. Four new memory shapes: Docker's
    default 64 MiB /dev/shm (most of the space fails), a Kubernetes pod whose memory limit is
    a sixteenth of its node's RAM, a local disk where a deep queue pays and RAM is modest, and
    a 64-core host with a 2 GiB /dev/shm; eight new seeds of the randomised family."""
    lands = [
        Landscape("ninth-docker-64m-8", "8 cores (4 physical), 1 GPU in a container with "
                  "Docker's default 64 MiB /dev/shm: a queue beyond it fails (129 images), "
                  "decode-bound to ~6 workers, best batch 16",
                  server(cores=8, per_worker=28.0, knee=6.0, serial=24.0, contention=0.35,
                  fixed_ms=6.0, per_image_ms=1.5, best_batch=16, batch_width=2.0, hide=0.15,
                  pin_gain=0.05, s0=0.25, s1=0.04), cpus=8, physical=4, gpus=1, noise=0.05,
                  held_out=True, shm_bytes=64 * 2**20, ram_bytes=32 * GIB),
        Landscape("ninth-pod-limit-32", "a Kubernetes pod: 32 cores, 1 GPU, a 256 GiB node "
                  "but a 16 GiB memory limit, /dev/shm 8 GiB (counted in the limit): a queue "
                  "beyond 12% of the limit pages (40% per 3,966 images more), persistent "
                  "workers grow 3% per 32; decode-bound to ~20 workers, best batch 64",
                  memory_tight(server(cores=32, per_worker=35.0, knee=20.0, serial=28.0,
                  contention=0.25, fixed_ms=4.0, per_image_ms=0.5, best_batch=64,
                  batch_width=2.2, hide=0.2, pin_gain=0.04, s0=0.4, s1=0.03),
                  budget=0.12 * 16 * GIB / IMAGE_BYTES, slope=0.4, leak=0.03, cores=32),
                  cpus=32, physical=16, gpus=1, noise=0.05, held_out=True, shm_bytes=8 * GIB,
                  ram_bytes=256 * GIB, memory_limit_bytes=16 * GIB),
        Landscape("ninth-hdd-32g-12", "12 cores, 1 GPU, a local hard disk (seeks ~10 ms): a "
                  "deep queue hides the seeks, the rate grows with workers to ~20; 32 GiB of "
                  "RAM, the queue slows only beyond 40% of it, best batch 64",
                  memory_tight(server(cores=12, per_worker=60.0, knee=20.0, serial=30.0,
                  contention=0.05, fixed_ms=6.0, per_image_ms=0.8, best_batch=64,
                  batch_width=2.5, hide=0.3, pin_gain=0.04, s0=0.3, s1=0.04),
                  budget=0.4 * 32 * GIB / IMAGE_BYTES, slope=0.2), cpus=12, physical=12,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=16 * GIB, ram_bytes=32 * GIB),
        Landscape("ninth-shm-2g-64", "64 cores (32 physical), 1 fast GPU, --shm-size=2g: the "
                  "queue slows beyond 70% of /dev/shm and fails beyond it, decode-bound to "
                  "~40 workers, best batch 64",
                  memory_tight(server(cores=64, per_worker=30.0, knee=40.0, serial=25.0,
                  contention=0.2, fixed_ms=3.0, per_image_ms=0.3, best_batch=64,
                  batch_width=2.5, hide=0.15, pin_gain=0.03, s0=0.5, s1=0.02),
                  budget=0.7 * 2 * GIB / IMAGE_BYTES, slope=0.3), cpus=64, physical=32,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=2 * GIB, ram_bytes=256 * GIB),
    ]  # fmt: skip
    return lands + renamed_family("ninth", NINTH_SEEDS)


NINTH_SEEDS = (2381, 2382, 2383, 2384, 2385, 2386, 2387, 2388)


def tenth() -> list[Landscape]:
    """The tenth held-out set (issue 23, stop 35): written before the start's batch was
    bounded by memory (ninth-docker-64m-8: at the baselines' workers even a queue of one
    batch a worker overflows /dev/shm), and replayed only for its final figures. Four hosts
    whose /dev/shm holds a few hundred images or fewer, so that the optimum trades workers
    against batch under the limit: Docker's default 64 MiB on a 16-core host, a 6-core
    workstation container with 128 MiB, a CI runner with 256 MiB whose queue slows before it
    fails, a pod with a 512 MiB memory-backed /dev/shm and an 8 GiB limit; eight new seeds of
    the randomised family."""
    lands = [
        Landscape("tenth-docker-64m-16", "16 cores (8 physical), 1 GPU, Docker's default 64 MiB "
                  "/dev/shm: a queue beyond it fails (129 images), decode-bound to ~10 "
                  "workers, best batch 32",
                  server(cores=16, per_worker=26.0, knee=10.0, serial=22.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=1.0, best_batch=32, batch_width=2.2, hide=0.15,
                  pin_gain=0.05, s0=0.3, s1=0.04), cpus=16, physical=8, gpus=1, noise=0.05,
                  held_out=True, shm_bytes=64 * 2**20, ram_bytes=64 * GIB),
        Landscape("tenth-shm-128m-6", "6 cores, 1 GPU, a workstation container with "
                  "--shm-size=128m: a queue beyond it fails (258 images), decode-bound to ~5 "
                  "workers, best batch 16",
                  server(cores=6, per_worker=24.0, knee=5.0, serial=20.0, contention=0.4,
                  fixed_ms=7.0, per_image_ms=2.0, best_batch=16, batch_width=2.0, hide=0.12,
                  pin_gain=0.05, s0=0.25, s1=0.05), cpus=6, physical=6, gpus=1, noise=0.05,
                  held_out=True, shm_bytes=128 * 2**20, ram_bytes=32 * GIB),
        Landscape("tenth-ci-256m-12", "a CI runner: 12 cores (6 physical), 1 GPU, 256 MiB "
                  "/dev/shm: the queue slows beyond 70% of it and fails beyond it, "
                  "decode-bound to ~10 workers, best batch 64",
                  memory_tight(server(cores=12, per_worker=30.0, knee=10.0, serial=24.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.9, best_batch=64,
                  batch_width=2.4, hide=0.15, pin_gain=0.04, s0=0.3, s1=0.04),
                  budget=0.7 * 256 * 2**20 / IMAGE_BYTES, slope=0.3), cpus=12, physical=6,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=256 * 2**20, ram_bytes=32 * GIB),
        Landscape("tenth-pod-512m-24", "a pod: 24 cores (12 physical), 1 GPU, a 512 MiB "
                  "memory-backed /dev/shm (fails beyond it) and an 8 GiB limit on a 128 GiB "
                  "node, persistent workers grow 2% per 24; decode-bound to ~16 workers, best "
                  "batch 64",
                  memory_tight(server(cores=24, per_worker=32.0, knee=16.0, serial=26.0,
                  contention=0.25, fixed_ms=4.0, per_image_ms=0.6, best_batch=64,
                  batch_width=2.3, hide=0.18, pin_gain=0.04, s0=0.35, s1=0.03),
                  budget=1e12, slope=0.0, leak=0.02, cores=24), cpus=24, physical=12,
                  gpus=1, noise=0.05, held_out=True, shm_bytes=512 * 2**20,
                  ram_bytes=128 * GIB, memory_limit_bytes=8 * GIB),
    ]  # fmt: skip
    return lands + renamed_family("tenth", TENTH_SEEDS)


TENTH_SEEDS = (2391, 2392, 2393, 2394, 2395, 2396, 2397, 2398)


def eleventh() -> list[Landscape]:
    """The eleventh held-out set (issue 23, stop 36): written after stop 35's change landed and
    before any further change, so that the search is judged on knobs whose usual sign is
    reversed or whose size is unusual, which no earlier set models: pinning that costs (the pin
    thread takes a core of four), prefetch that costs (deep queues thrash the caches of a
    memory-bandwidth-bound host), a worker start so costly that persistence decides, a
    two-socket host whose rate falls beyond one socket, a small best batch, a shared host at
    10% noise, a launch-bound GPU whose largest batch is best; eight new seeds of the
    randomised family."""
    lands = [
        Landscape("eleventh-pin-costs-4", "4 cores, 1 GPU: pinning costs 7% (the pin thread "
                  "takes one of four cores), decode-bound to ~4 workers, best batch 32",
                  server(cores=4, per_worker=40.0, knee=3.5, serial=30.0, contention=0.5,
                  fixed_ms=6.0, per_image_ms=1.2, best_batch=32, batch_width=2.5, hide=0.15,
                  pin_gain=-0.07, s0=0.25, s1=0.05), cpus=4, physical=4, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("eleventh-shallow-queue-16", "16 cores, 1 GPU, memory-bandwidth-bound: every "
                  "batch in a deep queue evicts the caches, prefetch 1 is best (prefetch 8 7% "
                  "slower), decode-bound to ~12 workers, best batch 32",
                  server(cores=16, per_worker=35.0, knee=12.0, serial=28.0, contention=0.3,
                  fixed_ms=4.0, per_image_ms=0.7, best_batch=32, batch_width=2.2, hide=-0.2,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=16, physical=8, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("eleventh-worker-init-8", "8 cores, 1 GPU, a dataset whose every worker "
                  "loads a large annotation index (1.5 s + 0.4 s a worker each epoch without "
                  "persistence): persistence decides, decode-bound to ~8 workers, best batch 16",
                  server(cores=8, per_worker=45.0, knee=8.0, serial=35.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=1.0, best_batch=16, batch_width=2.5, hide=0.2,
                  pin_gain=0.04, s0=1.5, s1=0.4), cpus=8, physical=8, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("eleventh-numa-32", "two sockets of 16 cores, 1 GPU: decode scales to one "
                  "socket, beyond it every worker reads across the sockets (a steep fall), "
                  "best batch 64",
                  server(cores=16, per_worker=30.0, knee=15.0, serial=25.0, contention=0.9,
                  fixed_ms=4.0, per_image_ms=0.5, best_batch=64, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=0.4, s1=0.03), cpus=32, physical=32, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("eleventh-small-batch-12", "12 cores, 1 GPU, heavy per-batch augmentation "
                  "(mosaic on the batch): batch 8 is best and every doubling costs ~20%, "
                  "decode-bound to ~10 workers",
                  server(cores=12, per_worker=30.0, knee=10.0, serial=24.0, contention=0.3,
                  fixed_ms=2.0, per_image_ms=1.0, best_batch=8, batch_width=1.0, hide=0.2,
                  pin_gain=0.05, s0=0.3, s1=0.04), cpus=12, physical=6, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("eleventh-shared-24", "a shared 24-core GPU host whose other users make every "
                  "measurement vary by 10%: decode-bound to ~14 workers, best batch 32",
                  server(cores=24, per_worker=32.0, knee=14.0, serial=26.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=32, batch_width=2.5, hide=0.2,
                  pin_gain=0.05, s0=0.3, s1=0.04), cpus=24, physical=12, gpus=1, noise=0.10,
                  held_out=True),
        Landscape("eleventh-launch-bound-8", "8 cores, 1 GPU whose every step pays 40 ms of "
                  "launches: the largest batch (128) is best by far, decode-bound to ~6 workers",
                  server(cores=8, per_worker=60.0, knee=6.0, serial=40.0, contention=0.3,
                  fixed_ms=40.0, per_image_ms=0.6, best_batch=128, batch_width=3.0, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=8, physical=4, gpus=1, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("eleventh", ELEVENTH_SEEDS)


ELEVENTH_SEEDS = (2401, 2402, 2403, 2404, 2405, 2406, 2407, 2408)


def queue_hump(model: Model, *, best: int, cost: float) -> Model:
    """``model`` whose prefetch has an optimum at ``best``: a shallower queue starves the
    accelerator and a deeper one thrashes the caches, ``cost`` of the rate per doubling away."""

    def f(c: LoaderConfig) -> float:
        rate = model(c)
        if c.num_workers == 0:
            return rate
        return rate * (1.0 - cost * abs(math.log2(c.prefetch_factor / best)))

    return f


def twelfth() -> list[Landscape]:
    """The twelfth held-out set (issue 23, stop 36): written after the eleventh set's figures
    (eleventh-shallow-queue-16: the search never left the deepest prefetch) and before the
    change they led to, and replayed before it and for its final figures only. Four hosts: one
    whose best prefetch is in the middle (2), one where network storage makes the deepest
    queue worth most (the risk of any change to prefetch), a CPU-only 16-core host where the
    model competes with the workers for the cores, a two-GPU 48-core host whose persistent
    workers grow; eight new seeds of the randomised family."""
    lands = [
        Landscape("twelfth-mid-prefetch-12", "12 cores, 1 GPU: prefetch 2 is best, every "
                  "doubling away costs 4% (a shallow queue starves the GPU, a deep one thrashes "
                  "the caches), decode-bound to ~9 workers, best batch 32",
                  queue_hump(server(cores=12, per_worker=34.0, knee=9.0, serial=26.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.8, best_batch=32,
                  batch_width=2.5, hide=0.0, pin_gain=0.04, s0=0.3, s1=0.04), best=2,
                  cost=0.04), cpus=12, physical=6, gpus=1, noise=0.04, held_out=True),
        Landscape("twelfth-nfs-deep-16", "16 cores, 1 GPU, network storage (reads ~30 ms, "
                  "widely spread): the deepest queue is worth most (prefetch 8 13% above 2), "
                  "the rate grows with workers past the cores, best batch 32",
                  server(cores=16, per_worker=1000.0 / 36.0, knee=28.0, serial=14.0,
                  contention=0.03, fixed_ms=6.0, per_image_ms=1.0, best_batch=32,
                  batch_width=2.5, hide=0.5, pin_gain=0.03, s0=0.3, s1=0.04), cpus=16,
                  physical=16, gpus=1, noise=0.05, held_out=True),
        Landscape("twelfth-cpu-16", "16 cores, no GPU: the model trains on the same cores as "
                  "the workers, so the rate peaks at ~3 workers and falls beyond; best batch 16",
                  server(cores=3, per_worker=12.0, knee=2.5, serial=10.0, contention=0.25,
                  fixed_ms=60.0, per_image_ms=25.0, best_batch=16, batch_width=2.0, hide=0.1,
                  pin_gain=0.0, s0=0.4, s1=0.1), cpus=16, physical=8, noise=0.05,
                  held_out=True),
        Landscape("twelfth-2gpu-leak-48", "48 cores (24 physical), 2 GPUs: persistent workers "
                  "grow (4% per 24 workers), decode-bound to ~20 workers, best batch 16",
                  memory_tight(server(cores=48, per_worker=30.0, knee=20.0, serial=25.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.9, best_batch=16,
                  batch_width=2.0, hide=0.15, pin_gain=0.05, s0=0.3, s1=0.03),
                  budget=1e12, slope=0.0, leak=0.04, cores=24), cpus=48, physical=24,
                  gpus=2, noise=0.04, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twelfth", TWELFTH_SEEDS)


TWELFTH_SEEDS = (2411, 2412, 2413, 2414, 2415, 2416, 2417, 2418)


def thirteenth() -> list[Landscape]:
    """The thirteenth held-out set (issue 23, stop 36): twelve new seeds of the randomised
    family only, drawn after twelfth-2413 (a narrow peak at 2 workers on a 32-core host, where
    every baseline measures as if without workers) was traced and before the change it led to;
    replayed before it and for its final figures only. No host written by hand: the family's
    shapes as they fall."""
    return renamed_family("thirteenth", THIRTEENTH_SEEDS)


THIRTEENTH_SEEDS = tuple(range(2421, 2433))


def fourteenth() -> list[Landscape]:
    """The fourteenth held-out set (issue 23, stop 36): twelve new seeds of the randomised
    family only, drawn after the thirteenth set's figures and before the flat-workers rule's
    descent below the lowest worker count measured; replayed before it and for its final
    figures only."""
    return renamed_family("fourteenth", FOURTEENTH_SEEDS)


FOURTEENTH_SEEDS = tuple(range(2441, 2453))


def fifteenth() -> list[Landscape]:
    """The fifteenth held-out set (issue 23, stop 37): written after stop 36 landed and before
    any change of stop 37, and replayed before and for the final figures only. Eight hosts
    around the knobs the search checks late (prefetch and persistence) and around sizes no
    earlier set models: a best prefetch of 4 on 24 cores, a shallow queue best on 8 cores,
    persistence that costs (growing workers, a cheap worker start), a 64-core host whose
    storage saturates at ~6 workers, a quiet host (1% noise) with small effects and a peak at
    10 workers, a CPU-only 4-core host, a compute-bound GPU on 32 cores where pinning is worth
    8%, a two-GPU 32-core host whose best prefetch is 2; twelve new seeds of the randomised
    family."""
    lands = [
        Landscape("fifteenth-pf4-hump-24", "24 cores, 1 GPU: prefetch 4 is best, every "
                  "doubling away costs 5%, decode-bound to ~16 workers, best batch 64",
                  queue_hump(server(cores=24, per_worker=30.0, knee=16.0, serial=24.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.6, best_batch=64,
                  batch_width=2.5, hide=0.0, pin_gain=0.04, s0=0.3, s1=0.03), best=4,
                  cost=0.05), cpus=24, physical=12, gpus=1, noise=0.04, held_out=True),
        Landscape("fifteenth-shallow-queue-8", "8 cores, 1 GPU, memory-bandwidth-bound: "
                  "prefetch 1 is best (prefetch 8 ~9% slower), decode-bound to ~6 workers, "
                  "best batch 16",
                  server(cores=8, per_worker=40.0, knee=6.0, serial=30.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=1.0, best_batch=16, batch_width=2.0, hide=-0.25,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=8, physical=4, gpus=1, noise=0.03,
                  held_out=True),
        Landscape("fifteenth-persist-costs-12", "12 cores, 1 GPU: persistent workers grow "
                  "(10% per 12 workers) and a worker start is cheap (0.1 s), so persistence "
                  "loses; decode-bound to ~10 workers, best batch 32",
                  memory_tight(server(cores=12, per_worker=36.0, knee=10.0, serial=28.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.8, best_batch=32,
                  batch_width=2.5, hide=0.15, pin_gain=0.04, s0=0.1, s1=0.005),
                  budget=1e12, slope=0.0, leak=0.10, cores=12), cpus=12, physical=6,
                  gpus=1, noise=0.04, held_out=True),
        Landscape("fifteenth-storage-plateau-64", "64 cores, 1 GPU, storage-bound: the rate "
                  "saturates at ~6 workers and stays level to 32, a deep queue hides the "
                  "reads (prefetch 8 ~6% above 2), best batch 128",
                  server(cores=64, per_worker=50.0, knee=6.0, serial=30.0, contention=0.02,
                  fixed_ms=6.0, per_image_ms=0.4, best_batch=128, batch_width=3.0, hide=0.3,
                  pin_gain=0.03, s0=0.3, s1=0.02), cpus=64, physical=32, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("fifteenth-quiet-16", "16 cores, 1 GPU, a quiet host (1% noise) whose "
                  "effects are small (pinning 2%, prefetch 2%): a peak at 10 workers (steep "
                  "contention beyond), best batch 32",
                  server(cores=10, per_worker=30.0, knee=10.0, serial=25.0, contention=0.6,
                  fixed_ms=4.0, per_image_ms=0.8, best_batch=32, batch_width=1.5, hide=0.08,
                  pin_gain=0.02, s0=0.3, s1=0.03), cpus=16, physical=8, gpus=1, noise=0.01,
                  held_out=True),
        Landscape("fifteenth-cpu-4", "4 cores, no GPU: the model trains on the same cores, "
                  "the rate peaks at 1-2 workers and falls beyond; best batch 8",
                  server(cores=2, per_worker=8.0, knee=1.5, serial=6.0, contention=0.3,
                  fixed_ms=80.0, per_image_ms=40.0, best_batch=8, batch_width=1.5, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.1), cpus=4, physical=2, noise=0.05,
                  held_out=True),
        Landscape("fifteenth-compute-32", "32 cores, 1 slow GPU (4 ms an image): the loader "
                  "keeps up from ~4 workers, pinning is worth 8%, best batch 16",
                  server(cores=32, per_worker=40.0, knee=24.0, serial=30.0, contention=0.1,
                  fixed_ms=8.0, per_image_ms=4.0, best_batch=16, batch_width=2.0, hide=0.1,
                  pin_gain=0.08, s0=0.3, s1=0.02), cpus=32, physical=16, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("fifteenth-2gpu-pf2-32", "32 cores, 2 GPUs: prefetch 2 is best (3% a "
                  "doubling away), decode-bound to ~24 workers, best batch 32",
                  queue_hump(server(cores=32, per_worker=25.0, knee=24.0, serial=20.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.7, best_batch=32,
                  batch_width=2.5, hide=0.0, pin_gain=0.05, s0=0.4, s1=0.03), best=2,
                  cost=0.03), cpus=32, physical=16, gpus=2, noise=0.04, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("fifteenth", FIFTEENTH_SEEDS)


FIFTEENTH_SEEDS = tuple(range(2461, 2473))


def sixteenth() -> list[Landscape]:
    """The sixteenth held-out set (issue 23, stop 37): written after the fifteenth set's
    replay and before the change it led to, and replayed only before it and for the final
    figures (not looked at while designing). Four hosts whose late knobs decide (a best
    prefetch of 2 on 16 cores, persistence that costs on 24 cores, a shallow queue best on a
    two-GPU 32-core host, a best prefetch of 4 on 6 cores) and twelve new seeds of the
    randomised family."""
    lands = [
        Landscape("sixteenth-pf2-hump-16", "16 cores, 1 GPU: prefetch 2 is best, every "
                  "doubling away costs 5%, decode-bound to ~10 workers, best batch 16",
                  queue_hump(server(cores=16, per_worker=32.0, knee=10.0, serial=25.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.9, best_batch=16,
                  batch_width=2.0, hide=0.0, pin_gain=0.04, s0=0.3, s1=0.03), best=2,
                  cost=0.05), cpus=16, physical=8, gpus=1, noise=0.04, held_out=True),
        Landscape("sixteenth-persist-leak-24", "24 cores, 1 GPU: persistent workers grow "
                  "(12% per 24 workers), a worker start is cheap (0.2 s), decode-bound to ~16 "
                  "workers, best batch 64",
                  memory_tight(server(cores=24, per_worker=30.0, knee=16.0, serial=24.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.6, best_batch=64,
                  batch_width=2.5, hide=0.15, pin_gain=0.04, s0=0.2, s1=0.01),
                  budget=1e12, slope=0.0, leak=0.12, cores=24), cpus=24, physical=12,
                  gpus=1, noise=0.04, held_out=True),
        Landscape("sixteenth-shallow-queue-32", "32 cores, 2 GPUs, memory-bandwidth-bound: "
                  "prefetch 1 is best (prefetch 8 ~5% slower), decode-bound to ~20 workers, "
                  "best batch 32",
                  server(cores=32, per_worker=28.0, knee=20.0, serial=22.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=0.7, best_batch=32, batch_width=2.5, hide=-0.15,
                  pin_gain=0.05, s0=0.3, s1=0.03), cpus=32, physical=16, gpus=2, noise=0.04,
                  held_out=True),
        Landscape("sixteenth-pf4-hump-6", "6 cores, 1 GPU: prefetch 4 is best (4% a doubling "
                  "away), decode-bound to ~5 workers, best batch 16, 5% noise",
                  queue_hump(server(cores=6, per_worker=45.0, knee=5.0, serial=35.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=1.0, best_batch=16,
                  batch_width=2.0, hide=0.0, pin_gain=0.04, s0=0.3, s1=0.04), best=4,
                  cost=0.04), cpus=6, physical=6, gpus=1, noise=0.05, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("sixteenth", SIXTEENTH_SEEDS)


SIXTEENTH_SEEDS = tuple(range(2481, 2493))


def seventeenth() -> list[Landscape]:
    """The seventeenth held-out set (issue 23, stop 39): written after stop 37's change (the
    prefetch check before the fine worker steps) and before any replay of it, as an
    independent judge of that change and of the search as a whole. Not aimed at the late
    knobs: five hosts of shapes the earlier sets cover thinly (40 cores with a large best
    batch, an 8-thread laptop GPU whose loader peaks at 3 workers, a deep queue best on 12
    cores, a two-GPU 64-core host whose storage saturates at ~12 workers, a CPU-only 8-core
    host) and twelve new seeds of the randomised family."""
    lands = [
        Landscape("seventeenth-40core-b64", "40 cores (20 physical), 1 GPU, decode-bound to "
                  "~30 workers, best batch 64, a modest queue effect",
                  server(cores=40, per_worker=26.0, knee=30.0, serial=22.0, contention=0.35,
                  fixed_ms=5.0, per_image_ms=0.6, best_batch=64, batch_width=3.0, hide=0.2,
                  pin_gain=0.05, s0=0.3, s1=0.03), cpus=40, physical=20, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("seventeenth-laptop-peak-3", "8 threads (4 physical), a laptop GPU: the "
                  "loader peaks at ~3 workers (steep contention beyond), best batch 8, 5% "
                  "noise",
                  server(cores=4, per_worker=60.0, knee=3.0, serial=40.0, contention=0.5,
                  fixed_ms=6.0, per_image_ms=1.5, best_batch=8, batch_width=1.8, hide=0.1,
                  pin_gain=0.03, s0=0.4, s1=0.05), cpus=8, physical=4, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("seventeenth-pf8-12", "12 cores, 1 GPU: the deepest queue is best (prefetch "
                  "8, 4% a halving), decode-bound to ~10 workers, best batch 32",
                  queue_hump(server(cores=12, per_worker=36.0, knee=10.0, serial=28.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.8, best_batch=32,
                  batch_width=2.5, hide=0.0, pin_gain=0.04, s0=0.3, s1=0.03), best=8,
                  cost=0.04), cpus=12, physical=6, gpus=1, noise=0.04, held_out=True),
        Landscape("seventeenth-2gpu-storage-64", "64 cores, 2 GPUs, storage-bound: the rate "
                  "saturates at ~12 workers and sags slowly beyond, best batch 32",
                  server(cores=64, per_worker=22.0, knee=12.0, serial=20.0, contention=0.05,
                  fixed_ms=5.0, per_image_ms=0.5, best_batch=32, batch_width=2.5, hide=0.2,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=64, physical=32, gpus=2, noise=0.04,
                  held_out=True),
        Landscape("seventeenth-cpu-8", "8 cores, no GPU: the model trains on the same cores, "
                  "the rate peaks at ~2-3 workers, best batch 16",
                  server(cores=4, per_worker=10.0, knee=2.5, serial=8.0, contention=0.3,
                  fixed_ms=60.0, per_image_ms=25.0, best_batch=16, batch_width=1.8, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.08), cpus=8, physical=4, noise=0.05,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("seventeenth", SEVENTEENTH_SEEDS)


SEVENTEENTH_SEEDS = tuple(range(2501, 2513))


def eighteenth() -> list[Landscape]:
    """The eighteenth held-out set (issue 23, stop 39): written after the fifteenth set's
    traces (fifteenth-persist-costs-12: persistence that costs is a late check) and before
    any change they lead to; replayed only before it and for its final figures. Five hosts:
    persistence that costs a little on 20 cores, persistence worth ~15% on 16 cores (the risk
    of checking it earlier), a two-GPU 24-core host whose best prefetch is 2 and whose
    persistent workers grow, a 48-core storage-bound host, a 6-core host with a peak at 5
    workers; and twelve new seeds of the randomised family."""
    lands = [
        Landscape("eighteenth-persist-leak-20", "20 cores, 1 GPU: persistent workers grow (6% "
                  "per 20 workers), a worker start is cheap (0.15 s), decode-bound to ~14 "
                  "workers, best batch 32",
                  memory_tight(server(cores=20, per_worker=32.0, knee=14.0, serial=26.0,
                  contention=0.3, fixed_ms=5.0, per_image_ms=0.7, best_batch=32,
                  batch_width=2.5, hide=0.15, pin_gain=0.04, s0=0.15, s1=0.005),
                  budget=1e12, slope=0.0, leak=0.06, cores=20), cpus=20, physical=10,
                  gpus=1, noise=0.04, held_out=True),
        Landscape("eighteenth-persist-pays-16", "16 cores, 1 GPU: a worker start of 2 s "
                  "(a large dataset object) makes persistence worth ~15%, decode-bound to ~12 "
                  "workers, best batch 32",
                  server(cores=16, per_worker=34.0, knee=12.0, serial=26.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=32, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=2.0, s1=0.08), cpus=16, physical=8, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("eighteenth-2gpu-pf2-leak-24", "24 cores, 2 GPUs: prefetch 2 is best (4% a "
                  "doubling away) and persistent workers grow (8% per 24 workers), "
                  "decode-bound to ~18 workers, best batch 64",
                  memory_tight(queue_hump(server(cores=24, per_worker=28.0, knee=18.0,
                  serial=22.0, contention=0.3, fixed_ms=5.0, per_image_ms=0.6, best_batch=64,
                  batch_width=2.5, hide=0.0, pin_gain=0.05, s0=0.2, s1=0.01), best=2,
                  cost=0.04), budget=1e12, slope=0.0, leak=0.08, cores=24), cpus=24,
                  physical=12, gpus=2, noise=0.04, held_out=True),
        Landscape("eighteenth-storage-48", "48 cores, 1 GPU, storage-bound: the rate saturates "
                  "at ~8 workers, a deep queue hides the reads (prefetch 8 ~8% above 2), best "
                  "batch 64",
                  server(cores=48, per_worker=45.0, knee=8.0, serial=30.0, contention=0.03,
                  fixed_ms=6.0, per_image_ms=0.5, best_batch=64, batch_width=3.0, hide=0.35,
                  pin_gain=0.03, s0=0.3, s1=0.02), cpus=48, physical=24, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("eighteenth-peak-5-6", "6 cores, 1 GPU: the loader peaks at 5 workers (8% "
                  "above 4), best batch 16",
                  peak_at(5, cores=6, best_batch=16, drop=0.08), cpus=6, physical=6, gpus=1,
                  noise=0.04, held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("eighteenth", EIGHTEENTH_SEEDS)


EIGHTEENTH_SEEDS = tuple(range(2521, 2533))


def nineteenth() -> list[Landscape]:
    """The nineteenth held-out set (issue 26, stop 40): written before this stop's settle
    experiment (a study that settles sooner once the walk has measured every move around its
    best; turned down on the design set) and before any replay of it: five hosts (a 2-core
    CPU-only host like the quick start's, where half the configurations with workers lie
    within ~9%; a 32-core host whose loader peaks at 10 workers; a 4-core workstation whose
    largest batch is best; a 24-core host on network storage whose queue is best 6 deep,
    between the table's rungs; a 16-core two-GPU host where the batch barely matters) and
    twelve new seeds of the randomised family."""
    lands = [
        Landscape("nineteenth-cpu-2", "2 cores, no GPU: the model trains on the same cores, "
                  "half the configurations with workers within ~9% of the best (2 workers, "
                  "batch 32-64), 4% noise",
                  server(cores=2, per_worker=40.0, knee=1.5, serial=20.0, contention=0.15,
                  fixed_ms=80.0, per_image_ms=30.0, best_batch=32, batch_width=5.0, hide=0.05,
                  pin_gain=0.0, s0=0.5, s1=0.05), cpus=2, physical=1, noise=0.04,
                  held_out=True),
        Landscape("nineteenth-peak-10-32", "32 cores, 1 GPU: the loader peaks at 10 workers "
                  "(8% above 8 and 12), best batch 32",
                  peak_at(10, cores=32, best_batch=32, drop=0.08), cpus=32, physical=16,
                  gpus=1, noise=0.04, held_out=True),
        Landscape("nineteenth-b128-4", "4 cores, 1 GPU workstation: decode-bound at ~4 workers, "
                  "the largest batch best (a fixed cost per batch), 5% noise",
                  server(cores=4, per_worker=40.0, knee=4.0, serial=30.0, contention=0.4,
                  fixed_ms=25.0, per_image_ms=0.8, best_batch=128, batch_width=3.5, hide=0.1,
                  pin_gain=0.05, s0=0.4, s1=0.04), cpus=4, physical=4, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("nineteenth-pf6-storage-24", "24 cores, 1 GPU on network storage: the queue "
                  "is best 6 deep, between the table's rungs (4 and 8 alike, 2 ~5% below), the "
                  "rate saturates at ~16 workers, best batch 32",
                  queue_hump(server(cores=24, per_worker=30.0, knee=16.0, serial=24.0,
                  contention=0.1, fixed_ms=5.0, per_image_ms=0.6, best_batch=32,
                  batch_width=2.5, hide=0.0, pin_gain=0.04, s0=0.3, s1=0.03), best=6,
                  cost=0.05), cpus=24, physical=12, gpus=1, noise=0.04, held_out=True),
        Landscape("nineteenth-2gpu-flat-batch-16", "16 cores, 2 GPUs: decode-bound to ~12 "
                  "workers, the batch barely matters (a wide bump at 32)",
                  server(cores=16, per_worker=34.0, knee=12.0, serial=26.0, contention=0.3,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=32, batch_width=6.0, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=16, physical=8, gpus=2, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("nineteenth", NINETEENTH_SEEDS)


NINETEENTH_SEEDS = tuple(range(2541, 2553))


def twentieth() -> list[Landscape]:
    """The twentieth held-out set (issue 23, stop 40): written before stop 40's change to the
    workers' first direction and before any replay of it, as its judge (it turned the change
    down). Three hosts where two of the three baselines' rules name the same worker count (the
    article's 2 x physical cores and Ultralytics' ``min(cpus // gpus, 8)`` meet on an 8-, 6-
    or 4-thread host): an 8-thread host on network storage, the change's risk (an optimum
    above the CPUs, where the reads wait), a 6-thread host peaking at 3 workers, a 4-thread
    CPU-only host; and where the rules differ, a 12-core host without SMT and an 8-thread
    two-GPU host; and twelve new seeds of the randomised family."""
    lands = [
        Landscape("twentieth-storage-8", "8 threads (4 physical), 1 GPU, network storage: "
                  "reads wait, so the rate grows with workers past the CPUs to the range's top "
                  "(16), best batch 32",
                  server(cores=8, per_worker=22.0, knee=20.0, serial=14.0, contention=0.02,
                  fixed_ms=8.0, per_image_ms=1.2, best_batch=32, batch_width=2.5, hide=0.35,
                  pin_gain=0.03, s0=0.3, s1=0.04), cpus=8, physical=4, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("twentieth-peak-3-6", "6 threads (3 physical), 1 GPU: the loader peaks at 3 "
                  "workers (8% above 2 and 4), best batch 16",
                  peak_at(3, cores=6, best_batch=16, drop=0.08), cpus=6, physical=3, gpus=1,
                  noise=0.04, held_out=True),
        Landscape("twentieth-cpu-4", "4 threads (2 physical), no GPU: the model trains on the "
                  "same cores, the rate peaks at ~2 workers, best batch 32, 5% noise",
                  server(cores=2, per_worker=16.0, knee=2.0, serial=10.0, contention=0.35,
                  fixed_ms=60.0, per_image_ms=20.0, best_batch=32, batch_width=2.0, hide=0.08,
                  pin_gain=0.0, s0=0.5, s1=0.06), cpus=4, physical=2, noise=0.05,
                  held_out=True),
        Landscape("twentieth-12core-nosmt", "12 cores, no SMT, 1 GPU: decode-bound to ~12 "
                  "workers, flat from ~15 to ~20, best batch 64",
                  server(cores=12, per_worker=30.0, knee=12.0, serial=24.0, contention=0.15,
                  fixed_ms=5.0, per_image_ms=0.6, best_batch=64, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=12, physical=12, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("twentieth-2gpu-8", "8 threads (4 physical), 2 GPUs: the rate peaks at "
                  "~8 workers, contention beyond, best batch 32",
                  server(cores=8, per_worker=40.0, knee=6.0, serial=30.0, contention=0.4,
                  fixed_ms=5.0, per_image_ms=0.7, best_batch=32, batch_width=2.5, hide=0.15,
                  pin_gain=0.05, s0=0.3, s1=0.04), cpus=8, physical=4, gpus=2, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentieth", TWENTIETH_SEEDS)


TWENTIETH_SEEDS = tuple(range(2561, 2573))


def twentyfirst() -> list[Landscape]:
    """The twenty-first held-out set (issue 23, stop 40): written after the twentieth's replay
    for a second change (where a baseline beats the search's start, the first worker step
    before the baseline's workers and batch with the search's settings), which a trace then
    showed could not reach the misses it was meant for (its worker step goes the same way), so
    it was never written: replayed once, every method, the search as it stands. Hosts whose
    best batch is small, so that a baseline (batch 16) beats the start
    (batch 32): 16 cores with batch 8 best and the optimum above the baselines' 8 workers, an
    8-thread host peaking at 5 workers, a 12-thread CPU-only host peaking at ~5-6, 24 cores whose
    persistent workers grow, two GPUs on 32 cores on storage; and twelve new seeds of the
    randomised family."""
    lands = [
        Landscape("twentyfirst-b8-16", "16 cores (8 physical), 1 GPU: batch 8 best (16 "
                  "at 80%), the rate peaks at ~16 workers",
                  server(cores=16, per_worker=30.0, knee=12.0, serial=24.0, contention=0.3,
                  fixed_ms=3.0, per_image_ms=0.8, best_batch=8, batch_width=1.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=16, physical=8, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("twentyfirst-peak-5-8", "8 threads (4 physical), 1 GPU: the loader peaks at "
                  "5 workers (8% above 4), best batch 16",
                  peak_at(5, cores=8, best_batch=16, drop=0.08), cpus=8, physical=4, gpus=1,
                  noise=0.04, held_out=True),
        Landscape("twentyfirst-cpu-12", "12 threads (6 physical), no GPU: the model trains on "
                  "the same cores, the rate peaks at ~5-6 workers, best batch 16, 5% noise",
                  server(cores=6, per_worker=12.0, knee=3.0, serial=9.0, contention=0.3,
                  fixed_ms=50.0, per_image_ms=20.0, best_batch=16, batch_width=1.5, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.06), cpus=12, physical=6, noise=0.05,
                  held_out=True),
        Landscape("twentyfirst-leak-b16-24", "24 cores (12 physical), 1 GPU: persistent "
                  "workers grow (7% per 24 workers), the rate rises to ~24 workers, best batch 16",
                  memory_tight(server(cores=24, per_worker=30.0, knee=16.0, serial=24.0,
                  contention=0.3, fixed_ms=4.0, per_image_ms=0.7, best_batch=16,
                  batch_width=1.8, hide=0.15, pin_gain=0.04, s0=0.15, s1=0.005),
                  budget=1e12, slope=0.0, leak=0.07, cores=24), cpus=24, physical=12,
                  gpus=1, noise=0.04, held_out=True),
        Landscape("twentyfirst-2gpu-storage-32", "32 cores (16 physical), 2 GPUs, "
                  "storage-bound: the rate rises to the range's top (32), best batch 16",
                  server(cores=32, per_worker=24.0, knee=20.0, serial=20.0, contention=0.05,
                  fixed_ms=4.0, per_image_ms=0.6, best_batch=16, batch_width=1.8, hide=0.25,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=32, physical=16, gpus=2, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentyfirst", TWENTYFIRST_SEEDS)


TWENTYFIRST_SEEDS = tuple(range(2581, 2593))


def twentysecond() -> list[Landscape]:
    """The twenty-second held-out set (issue 23, stop 40): written after the twentieth's
    replay and before a gated form of stop 40's worker rule (down first at a worker per CPU
    only where the rise from none to that count is small) was tried, as its judge. Hosts where
    the article's and Ultralytics' rules meet at the CPU count, with the optimum below it or
    above it: an 8-thread host peaking at ~3-4 workers, an 8-thread host rising to 16, a
    6-thread CPU-only host peaking at ~4-5, a 4-thread host on network storage, a 6-thread host
    rising to ~11; and twelve new seeds of the randomised family."""
    lands = [
        Landscape("twentysecond-peak-4-8", "8 threads (4 physical), 1 GPU: the loader peaks "
                  "at ~3-4 workers (contention beyond), best batch 32",
                  server(cores=4, per_worker=60.0, knee=2.0, serial=45.0, contention=0.6,
                  fixed_ms=5.0, per_image_ms=1.0, best_batch=32, batch_width=2.5, hide=0.1,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=8, physical=4, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("twentysecond-rise-16-8", "8 threads (4 physical), 1 GPU: light work per "
                  "image, the rate rises to the range's top (16), best batch 16",
                  server(cores=16, per_worker=30.0, knee=12.0, serial=26.0, contention=0.1,
                  fixed_ms=4.0, per_image_ms=0.6, best_batch=16, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=8, physical=4, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("twentysecond-cpu-6", "6 threads (3 physical), no GPU: the model trains on "
                  "the same cores, the rate peaks at ~4-5 workers, best batch 16, 5% noise",
                  server(cores=3, per_worker=12.0, knee=4.0, serial=9.0, contention=0.3,
                  fixed_ms=50.0, per_image_ms=20.0, best_batch=16, batch_width=1.8, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.06), cpus=6, physical=3, noise=0.05,
                  held_out=True),
        Landscape("twentysecond-storage-4", "4 threads (2 physical), 1 GPU, network storage: "
                  "reads wait, so the rate rises with workers to the range's top (8), best "
                  "batch 32",
                  server(cores=4, per_worker=20.0, knee=10.0, serial=12.0, contention=0.02,
                  fixed_ms=8.0, per_image_ms=1.2, best_batch=32, batch_width=2.5, hide=0.35,
                  pin_gain=0.03, s0=0.3, s1=0.04), cpus=4, physical=2, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("twentysecond-rise-12-6", "6 threads (3 physical), 1 GPU: the rate rises to "
                  "~11 workers and stays level to the range's top (12), best batch 32",
                  server(cores=9, per_worker=35.0, knee=9.0, serial=28.0, contention=0.2,
                  fixed_ms=5.0, per_image_ms=0.7, best_batch=32, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=6, physical=3, gpus=1, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentysecond", TWENTYSECOND_SEEDS)


TWENTYSECOND_SEEDS = tuple(range(2601, 2613))


def twentythird() -> list[Landscape]:
    """The twenty-third held-out set (issue 23, stop 41): written after the traces of the
    misses at budget 14 (most measured a configuration within 3% of the optimum once, below
    a luckier neighbour, and named the neighbour) and before any change they lead to, as its
    judge. Noisy hosts (6-9% a measurement) whose optimum is broad or lies between rungs, where
    single measurements of neighbours differ by less than their noise: a 32-thread host
    peaking at ~22 workers, a 4-thread CPU-only host peaking at 3, a shared 12-thread host
    peaking at ~10-11, a 16-thread host on network storage rising to the range's top, a
    two-GPU 24-thread host level within 3% from ~15 workers up; and twelve new seeds of the
    randomised family."""
    lands = [
        Landscape("twentythird-noisy-peak-20", "32 threads (16 physical), 1 GPU, 8% noise: "
                  "decode-bound to ~22 workers, contention beyond, best batch 16",
                  server(cores=20, per_worker=26.0, knee=20.0, serial=22.0, contention=0.4,
                  fixed_ms=5.0, per_image_ms=0.6, best_batch=16, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=32, physical=16, gpus=1, noise=0.08,
                  held_out=True),
        Landscape("twentythird-noisy-cpu-4", "4 threads (2 physical), no GPU, 7% noise: the "
                  "model trains on the same cores, the rate peaks at ~3 workers, best batch 16",
                  server(cores=2, per_worker=10.0, knee=3.0, serial=8.0, contention=0.3,
                  fixed_ms=60.0, per_image_ms=25.0, best_batch=16, batch_width=1.8, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.06), cpus=4, physical=2, noise=0.07,
                  held_out=True),
        Landscape("twentythird-shared-12", "12 threads (6 physical), 1 GPU, shared with other "
                  "jobs (9% noise): the rate peaks at ~10-11 workers, best batch 32",
                  server(cores=9, per_worker=30.0, knee=9.0, serial=24.0, contention=0.35,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=32, batch_width=2.5, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=12, physical=6, gpus=1, noise=0.09,
                  held_out=True),
        Landscape("twentythird-storage-16", "16 threads (8 physical), 1 GPU, network storage, "
                  "7% noise: reads wait, the rate rises to the range's top (32), best batch 64",
                  server(cores=32, per_worker=14.0, knee=28.0, serial=10.0, contention=0.02,
                  fixed_ms=6.0, per_image_ms=0.8, best_batch=64, batch_width=3.0, hide=0.35,
                  pin_gain=0.03, s0=0.3, s1=0.03), cpus=16, physical=8, gpus=1, noise=0.07,
                  held_out=True),
        Landscape("twentythird-flat-top-24", "24 threads (12 physical), 2 GPUs, 6% noise: "
                  "level within ~3% from ~15 workers to the range's top (32), best batch 32",
                  server(cores=24, per_worker=40.0, knee=10.0, serial=30.0, contention=0.05,
                  fixed_ms=5.0, per_image_ms=0.7, best_batch=32, batch_width=2.5, hide=0.15,
                  pin_gain=0.05, s0=0.2, s1=0.01), cpus=24, physical=12, gpus=2, noise=0.06,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentythird", TWENTYTHIRD_SEEDS)


TWENTYTHIRD_SEEDS = tuple(range(2621, 2633))


def twentyfourth() -> list[Landscape]:
    """The twenty-fourth held-out set (issue 23, stop 42): written after stop 41's count of
    the misses at budget 14 (113 of 215 bad seeds never measured a good configuration; several
    with the optimum at batch 8, where a baseline's batch 16 beats the start's 32 and the batch
    below comes only after the workers' walk) and before any change it leads to, as its judge.
    Hosts whose best batch lies at either end of the ladder: a 16-thread GPU host and an
    8-thread CPU-only host at batch 8, a noisy 12-thread host with a broad optimum at batch 8-16,
    a two-GPU 32-thread host at batch 128, a 64-thread host at batch 64 whose rate rises to the
    range's top; and twelve new seeds of the randomised family."""
    lands = [
        Landscape("twentyfourth-batch-8-16", "16 threads (8 physical), 1 GPU: heavy per-batch "
                  "work (large images, many boxes), best batch 8, the rate peaks at ~12 workers",
                  server(cores=12, per_worker=24.0, knee=12.0, serial=18.0, contention=0.3,
                  fixed_ms=4.0, per_image_ms=0.9, best_batch=8, batch_width=1.3, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=16, physical=8, gpus=1, noise=0.04,
                  held_out=True),
        Landscape("twentyfourth-cpu-batch-8", "8 threads (4 physical), no GPU: the model "
                  "trains on the same cores, best batch 8, the rate peaks at ~4 workers",
                  server(cores=4, per_worker=9.0, knee=4.0, serial=7.0, contention=0.35,
                  fixed_ms=40.0, per_image_ms=22.0, best_batch=8, batch_width=1.5, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.05), cpus=8, physical=4, noise=0.05,
                  held_out=True),
        Landscape("twentyfourth-noisy-small-12", "12 threads (6 physical), 1 GPU, 7% noise: "
                  "best batch ~11 (batch 8 and 16 within 5%), the rate rises to ~8 workers",
                  server(cores=8, per_worker=30.0, knee=8.0, serial=22.0, contention=0.2,
                  fixed_ms=5.0, per_image_ms=0.8, best_batch=11, batch_width=1.4, hide=0.2,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=12, physical=6, gpus=1, noise=0.07,
                  held_out=True),
        Landscape("twentyfourth-batch-128-32", "32 threads (16 physical), 2 GPUs: light "
                  "images, a large per-step cost, best batch 128, the rate rises to ~24 workers",
                  server(cores=24, per_worker=40.0, knee=24.0, serial=30.0, contention=0.15,
                  fixed_ms=30.0, per_image_ms=0.5, best_batch=128, batch_width=2.0, hide=0.1,
                  pin_gain=0.05, s0=0.3, s1=0.02), cpus=32, physical=16, gpus=2, noise=0.04,
                  held_out=True),
        Landscape("twentyfourth-rise-64", "64 threads (32 physical), 1 GPU: the rate rises to "
                  "the range's top (32), best batch 64, 5% noise",
                  server(cores=48, per_worker=16.0, knee=40.0, serial=12.0, contention=0.05,
                  fixed_ms=8.0, per_image_ms=0.5, best_batch=64, batch_width=2.0, hide=0.2,
                  pin_gain=0.04, s0=0.4, s1=0.03), cpus=64, physical=32, gpus=1, noise=0.05,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentyfourth", TWENTYFOURTH_SEEDS)


TWENTYFOURTH_SEEDS = tuple(range(2641, 2653))

def twentyfifth() -> list[Landscape]:
    """The twenty-fifth held-out set (issue 23, stop 43): written after stop 43's change to the
    confirmation's race (the machine's common drift since the trials taken out of its noise
    bound) and before its replay on the zoo, as its judge; also before any change to the
    answer's choice among the finalists. Hosts where the race decides between near-ties: a
    baseline within 9% of the optimum on an 8-thread GPU host, a 6-thread CPU-only host peaking
    at ~5-6 workers, a noisy 40-thread host rising to the range's top, a 16-thread host where
    pinning is worth 12%, a 20-thread host with a narrow peak at ~7 workers; and twelve new
    seeds of the randomised family."""
    lands = [
        Landscape("twentyfifth-near-baseline-8", "8 threads (4 physical), 1 GPU, 5% noise: "
                  "the rate peaks at ~7-8 workers, best batch 16; Ultralytics' w8 b16 within 9%",
                  server(cores=6, per_worker=45.0, knee=6.0, serial=35.0, contention=0.25,
                  fixed_ms=5.0, per_image_ms=1.0, best_batch=16, batch_width=1.8, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=8, physical=4, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("twentyfifth-cpu-6", "6 threads (3 physical), no GPU, 6% noise: the model "
                  "trains on the same cores, the rate peaks at ~5-6 workers, best batch 32",
                  server(cores=4, per_worker=12.0, knee=5.0, serial=9.0, contention=0.3,
                  fixed_ms=50.0, per_image_ms=20.0, best_batch=32, batch_width=1.8, hide=0.1,
                  pin_gain=0.0, s0=0.5, s1=0.05), cpus=6, physical=3, noise=0.06,
                  held_out=True),
        Landscape("twentyfifth-noisy-rise-40", "40 threads (20 physical), 1 GPU, 8% noise: "
                  "the rate rises to the range's top (32), within 3% from ~28, best batch 32",
                  server(cores=28, per_worker=22.0, knee=28.0, serial=18.0, contention=0.2,
                  fixed_ms=5.0, per_image_ms=0.5, best_batch=32, batch_width=2.2, hide=0.2,
                  pin_gain=0.04, s0=0.35, s1=0.03), cpus=40, physical=20, gpus=1, noise=0.08,
                  held_out=True),
        Landscape("twentyfifth-pin-16", "16 threads (8 physical), 1 GPU, 5% noise: pinning "
                  "worth 12%, the rate peaks at ~12 workers, best batch 64",
                  server(cores=12, per_worker=35.0, knee=10.0, serial=28.0, contention=0.3,
                  fixed_ms=6.0, per_image_ms=1.2, best_batch=64, batch_width=2.0, hide=0.15,
                  pin_gain=0.12, s0=0.3, s1=0.03), cpus=16, physical=8, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("twentyfifth-narrow-7", "20 threads (10 physical), 1 GPU, 6% noise: heavy "
                  "contention, a narrow peak at ~7 workers, best batch 16",
                  server(cores=7, per_worker=40.0, knee=7.0, serial=30.0, contention=0.8,
                  fixed_ms=4.0, per_image_ms=0.8, best_batch=16, batch_width=1.6, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=20, physical=10, gpus=1, noise=0.06,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentyfifth", TWENTYFIFTH_SEEDS)


TWENTYFIFTH_SEEDS = tuple(range(2661, 2673))


def twentysixth() -> list[Landscape]:
    """The twenty-sixth held-out set (issue 23, stop 47): written after stop 47's change to the
    worker ladder's direction (a fall at a count more than twice the best's, the baselines' 32
    above their 8, turns the ladder down only where it is steeper than half) and before its
    replay, as its judge. Hosts behind such baselines, both ways: a 32-thread GPU host peaking
    at ~12 workers (32 at two thirds of 8), a 24-thread CPU host peaking at ~6 (the article's 24
    at 60% of 8: the change steps up first, away from it), a 48-thread GPU host peaking at ~16
    (32 above 8: no fall), a 32-thread GPU host peaking at ~10 behind a steep fall (32 at a
    third of 8: the change keeps it stepping down), a 32-thread CPU host level from ~6 to 8
    workers behind a gentle fall (the change steps up first, away from it); and
    twelve new seeds of the randomised family."""
    lands = [
        Landscape("twentysixth-peak-12-32", "32 threads (16 physical), 1 GPU, 5% noise: the "
                  "rate peaks at ~12 workers, 32 at half of it (two thirds of 8), best batch 32",
                  server(cores=12, per_worker=30.0, knee=12.0, serial=25.0, contention=0.6,
                  fixed_ms=5.0, per_image_ms=0.6, best_batch=32, batch_width=2.0, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.03), cpus=32, physical=16, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("twentysixth-peak-6-24", "24 threads (12 physical), no GPU, 5% noise: the "
                  "rate peaks at ~5-6 workers, 8 within 3%, 24 (the article's) at 60% of 8, "
                  "best batch 16",
                  server(cores=5, per_worker=20.0, knee=5.0, serial=15.0, contention=0.3,
                  fixed_ms=40.0, per_image_ms=8.0, best_batch=16, batch_width=1.8, hide=0.1,
                  pin_gain=0.0, s0=0.4, s1=0.04), cpus=24, physical=12, noise=0.05,
                  held_out=True),
        Landscape("twentysixth-peak-16-48", "48 threads (24 physical), 1 GPU, 6% noise: the "
                  "rate peaks at ~16 workers, 32 above 8 (no fall), best batch 64",
                  server(cores=16, per_worker=25.0, knee=18.0, serial=20.0, contention=1.0,
                  fixed_ms=6.0, per_image_ms=0.4, best_batch=64, batch_width=2.2, hide=0.2,
                  pin_gain=0.05, s0=0.3, s1=0.03), cpus=48, physical=24, gpus=1, noise=0.06,
                  held_out=True),
        Landscape("twentysixth-steep-10-32", "32 threads (16 physical), 1 GPU, 5% noise: the "
                  "rate peaks at ~10 workers, 32 at a third of 8, best batch 16",
                  server(cores=10, per_worker=35.0, knee=10.0, serial=30.0, contention=1.5,
                  fixed_ms=4.0, per_image_ms=0.8, best_batch=16, batch_width=1.8, hide=0.15,
                  pin_gain=0.04, s0=0.3, s1=0.04), cpus=32, physical=16, gpus=1, noise=0.05,
                  held_out=True),
        Landscape("twentysixth-gentle-6-32", "32 threads (16 physical), no GPU, 4% noise: the "
                  "rate is level from ~6 to 8 workers, 32 a third lower, best batch 32",
                  server(cores=5, per_worker=15.0, knee=5.0, serial=12.0, contention=0.15,
                  fixed_ms=50.0, per_image_ms=10.0, best_batch=32, batch_width=2.0, hide=0.1,
                  pin_gain=0.0, s0=0.4, s1=0.05), cpus=32, physical=16, noise=0.04,
                  held_out=True),
    ]  # fmt: skip
    return lands + renamed_family("twentysixth", TWENTYSIXTH_SEEDS)


TWENTYSIXTH_SEEDS = tuple(range(2681, 2693))

# The 2nd to 26th held-out sets, each written before one design change, in the order written:
# name -> the landscapes (each set's tables in benchmarks/data/zoo-NAME/, its replay's pages
# docs/benchmarks/landscape-zoo-NAME.*).
HELD_OUT_SETS: dict[str, Callable[[], list[Landscape]]] = {
    "unseen": unseen, "fresh": fresh, "reserve": reserve, "spare": spare, "sixth": sixth,
    "seventh": seventh, "eighth": eighth, "ninth": ninth, "tenth": tenth,
    "eleventh": eleventh, "twelfth": twelfth, "thirteenth": thirteenth,
    "fourteenth": fourteenth, "fifteenth": fifteenth,
    "sixteenth": sixteenth, "seventeenth": seventeenth,
    "eighteenth": eighteenth, "nineteenth": nineteenth,
    "twentieth": twentieth, "twentyfirst": twentyfirst,
    "twentysecond": twentysecond, "twentythird": twentythird,
    "twentyfourth": twentyfourth, "twentyfifth": twentyfifth, "twentysixth": twentysixth,
}  # fmt: skip


# -- tables ---------------------------------------------------------------------------------------


def configs(land: Landscape) -> list[tuple[LoaderConfig, str]]:
    """Every point of the landscape's table with its group (grid or cap)."""
    pins = (False, True) if land.gpus else (False,)
    out = []
    for b in land.batches + land.cap_batches:
        group = "cap" if b in land.cap_batches else "grid"
        for pin in pins:
            for w in land.worker_axis():
                if w == 0:
                    out.append((LoaderConfig(0, b, pin), group))
                    continue
                for pf in land.prefetch:
                    full = (land.shm_bytes is not None and land.shm_fails and group == "grid"
                            and w * pf * b * IMAGE_BYTES > land.shm_bytes)  # fmt: skip
                    for persist in (False, True):
                        out.append((LoaderConfig(w, b, pin, pf, persist),
                                    "shm" if full else group))  # fmt: skip
    return out


def table_data(land: Landscape) -> dict[str, Any]:
    """The landscape as a table in the documented format (points with truth and noise)."""
    points = []
    for config, group in configs(land):
        point: dict[str, Any] = {"config": config.to_dict(), "group": group}
        if group == "grid":
            point.update(truth=round(land.model(config), 4), noise=land.noise)
        elif group == "shm":  # a point of the grid that fails: /dev/shm is too small
            point.update(group="grid", infeasible="shm_full")
        points.append(point)
    hardware = {"host": land.name, "cpu_model": "model", "cpu_count": land.cpus,
                "physical_cores": land.physical, "gpu_count": land.gpus,
                "gpu_model": "modelled GPU" if land.gpus else None}  # fmt: skip
    workload: dict[str, Any] = {"kind": "emulated"}
    if land.shm_bytes is not None or land.ram_bytes is not None:
        hardware.update(shm_bytes=land.shm_bytes, ram_bytes=land.ram_bytes)
        if land.memory_limit_bytes is not None:
            hardware["memory_limit_bytes"] = land.memory_limit_bytes
        workload["img_size"] = IMG_SIZE
    shm_images = land.shm_bytes / IMAGE_BYTES if land.shm_bytes and land.shm_fails else None
    meta = {
        "command": "benchmarks/make_zoo.py",
        "machine": f"MODEL {land.name}: {land.about}",
        "model": land.name,
        "about": land.about,
        "held_out": land.held_out,
        "gpu": bool(land.gpus),
        "hardware": hardware,
        "workload": workload,
        "workload_desc": f"a model ({land.about})",
        "plan": {
            "epochs": 2,
            "steps": 8,
            "windows_per_epoch": 2,
            "warmup_epochs": 1,
            "warmup_steps": 2,
        },  # fmt: skip
        "plan_desc": "modelled: 4 windows a measurement",
        "dataset_len": DATASET,
        **({"shm_images": shm_images} if shm_images is not None else {}),
        "grid_desc": (
            f"num_workers {min(land.worker_axis())}..{max(land.worker_axis())} x "
            f"batch_size {list(land.batches)} x prefetch_factor {list(land.prefetch)}"
            f" x persistent_workers x pin_memory {'{F,T}' if land.gpus else '{F}'}"
            + (f"; over the VRAM cap: batch {list(land.cap_batches)}" if land.cap_batches else "")
            + ("; /dev/shm too small (shm_full) where workers x prefetch x batch x "
               f"{IMAGE_BYTES} B > {land.shm_bytes} B" if shm_images is not None else "")
        ),  # fmt: skip
    }
    return {"meta": meta, "points": points, "measurements": []}
