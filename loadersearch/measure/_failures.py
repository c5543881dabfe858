"""Classify why a measurement failed: (status, reason, message), never a crash of the parent.

The child classifies the exceptions it catches (:func:`classify_exception`); the parent
classifies what only it can see: a child that died without a word (:func:`classify_exit`).
"""

from __future__ import annotations

import re
import signal
import traceback

from loadersearch._limits import address_space_problem, limit_problem
from loadersearch.errors import BadSampleError, DatasetError, DeviceError, PipelineError
from loadersearch.measure._result import (
    BAD_DATASET,
    BAD_PIPELINE,
    BAD_SAMPLE,
    CRASH,
    ERROR,
    HOST_OOM,
    INFEASIBLE,
    INTERRUPTED,
    INVALID_CONFIG,
    KILLED,
    NO_DEVICE,
    RESOURCE_LIMIT,
    SHM_FULL,
    VRAM_CAP,
    WORKER_KILLED,
)
from loadersearch.measure._shm import shm_full_message

# Signals that stop a process from outside (Ctrl-C, preemption, a closed terminal): the
# measurement was interrupted, which says nothing about the configuration.
_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
# Deaths a process limit can cause (an allocation refused under ulimit -v aborts C++ code).
_LIMIT_SIGNALS = (signal.SIGABRT, signal.SIGSEGV, signal.SIGBUS)

_WORKER_DIED = re.compile(r"DataLoader worker \(pid.*")
# A worker's exception reaches the loop as "Caught X in DataLoader worker process N. Original
# Traceback ... module.X: message"; the last "X: message" line is the original one.
_WORKER_EXC = re.compile(r"^(?:[\w.]+\.)?(\w+): (.*)$", re.MULTILINE)


# /dev/shm exhausted, as torch and the kernel word it: torch's allocation of a shared-memory
# file ("unable to allocate shared memory(shm) for file </torch_...>: No space left on device
# (28)", with the file_descriptor sharing strategy; "unable to write to file </torch_...>"
# with file_system), and an ENOSPC that names /dev/shm.
_SHM_FULL = re.compile(
    r"unable to allocate shared memory|unable to write to file </torch_"
    r"|No space left on device.*/dev/shm|/dev/shm.*No space left on device"
)


# Device memory exhausted, as torch words it: the caching allocator's torch.OutOfMemoryError
# ("CUDA out of memory. Tried to allocate ..."), a CUDA call that failed for lack of memory
# (torch.AcceleratorError "CUDA error: out of memory", e.g. creating the context or loading a
# kernel), and cuBLAS/cuDNN failing to allocate their workspaces or handles.
_DEVICE_OOM = re.compile(
    r"CUDA out of memory|CUDA error: out of memory|CUBLAS_STATUS_ALLOC_FAILED"
    r"|CUDNN_STATUS_ALLOC_FAILED"
)
# torch's advice after its OOM detail; the detail (sizes, "N GiB allowed") is what we keep.
_OOM_ADVICE = re.compile(r"\s*(If reserved but unallocated|CUDA kernel errors might|Compile with)")


def _shm_detail(text: str) -> str:
    """torch's words about the shared memory it could not get, on one line."""
    line = next((ln for ln in text.splitlines() if _SHM_FULL.search(ln)), _last_line(text))
    return " ".join(line.split()).removeprefix("RuntimeError: ").rstrip(". ")


def _torch_detail(text: str) -> str:
    """torch's own description of an out-of-memory error, without its generic advice."""
    first = _OOM_ADVICE.split(text.strip(), maxsplit=1)[0]
    return " ".join(first.split())


def _in_pin_memory(e: BaseException) -> bool:
    """Whether ``e`` came from pinning a batch: the pin-memory thread's wrapped exception
    ("Caught ... in pin memory thread for device N"), or a traceback through DataLoader's
    pin_memory (with num_workers=0 the main thread pins)."""
    if "in pin memory thread" in str(e):
        return True
    frames = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    return any(f.filename.replace("\\", "/").endswith("_utils/pin_memory.py") for f in frames)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in str(text).strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _original_text(text: str) -> str:
    """The original exception's message when ``text`` is a wrapped one ("Caught X in ...
    Original Traceback ... module.X: message"), else ``text``."""
    if not text.startswith("Caught "):
        return text
    found = list(_WORKER_EXC.finditer(text))
    return text[found[-1].start(2) :] if found else text


def _original(e: BaseException, name: str) -> str | None:
    """The message of the original ``name`` exception raised in a DataLoader worker, if any."""
    text = str(e)
    if f"Caught {name}" not in text:
        return None
    found = [m.group(2) for m in _WORKER_EXC.finditer(text) if m.group(1) == name]
    return found[-1] if found else _last_line(text)


def classify_exception(
    e: BaseException, batch_size: int | None = None, cap_bytes: int | None = None
) -> tuple[str, str, str]:
    """(status, reason, message) for an exception raised in the measuring child."""
    from loadersearch.measure._cuda import CapTooSmall
    from loadersearch.workload import VramCapExceeded

    if isinstance(e, VramCapExceeded):
        return INFEASIBLE, VRAM_CAP, str(e)
    if isinstance(e, CapTooSmall):
        return INFEASIBLE, VRAM_CAP, str(e)
    if isinstance(e, DeviceError):
        return ERROR, NO_DEVICE, str(e)
    text = str(e)
    oom = type(e).__name__ == "OutOfMemoryError" or _DEVICE_OOM.search(text) is not None
    if oom and _in_pin_memory(e):
        # Pinned (page-locked) batches are host memory: cudaHostAlloc failing is host RAM
        # exhausted (or the locked-memory limit), whatever the CUDA error says.
        return (
            INFEASIBLE,
            HOST_OOM,
            "pinned host memory exhausted while pinning a batch (pin_memory=True: fewer "
            "workers, a smaller batch or prefetch_factor, or no pinning): "
            + _torch_detail(_original_text(text)),
        )
    if oom:
        limit = str(VramCapExceeded(batch_size or 0, None, cap_bytes))
        return INFEASIBLE, VRAM_CAP, f"{limit} (torch: {_torch_detail(_original_text(text))})"
    if isinstance(e, BadSampleError):
        return ERROR, BAD_SAMPLE, f"bad sample {e.path}: {e.reason}"
    sample = _original(e, "BadSampleError")
    if sample is not None:
        return ERROR, BAD_SAMPLE, f"bad sample {sample}"
    if isinstance(e, DatasetError):
        return ERROR, BAD_DATASET, _original(e, "DatasetError") or str(e)
    if isinstance(e, PipelineError):  # also rebuilt from a DataLoader worker's traceback text
        return ERROR, BAD_PIPELINE, _original(e, "PipelineError") or str(e)
    if isinstance(e, MemoryError) or _original(e, "MemoryError") is not None:
        limited = address_space_problem("a memory allocation failed (MemoryError)")
        if limited:
            return INFEASIBLE, RESOURCE_LIMIT, limited
        return INFEASIBLE, HOST_OOM, "host memory exhausted (MemoryError)"
    shm = _SHM_FULL.search(text)
    if shm is not None:
        return INFEASIBLE, SHM_FULL, shm_full_message(_shm_detail(_original_text(text)))
    limited = limit_problem(f"{type(e).__name__}: {text}")
    if limited:
        # A library that cannot be loaded fails every configuration alike; an allocation or
        # a file descriptor too many depends on the workers and the batch.
        status = ERROR if isinstance(e, ImportError) else INFEASIBLE
        return status, RESOURCE_LIMIT, limited
    m = _WORKER_DIED.search(text)
    if isinstance(e, RuntimeError) and m and "Caught " not in text:
        msg = m.group(0).rstrip(". ")
        if "Bus error" in msg:  # a worker writing a batch to a /dev/shm file with no room
            return INFEASIBLE, SHM_FULL, shm_full_message(msg.split(". ")[0])
        if "Killed" in msg or "exited unexpectedly" in msg:
            msg += " (killed from outside, e.g. by the OOM killer: see dmesg)"
        return INFEASIBLE, WORKER_KILLED, msg
    if isinstance(e, ValueError) and "num_workers" in text:
        return ERROR, INVALID_CONFIG, text
    where = type(e).__name__
    return ERROR, CRASH, f"{where}: {_last_line(text) or '(no message)'}"


def classify_exit(
    returncode: int, stderr_tail: str, *, started: bool = False
) -> tuple[str, str, str]:
    """(status, reason, message) for a child that exited without sending a result;
    ``started``: it had built the workload (said "ready") before it ended."""
    if returncode < 0:
        sig = -returncode
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        if sig == signal.SIGKILL:
            return (
                INFEASIBLE,
                KILLED,
                "the measuring process was killed by SIGKILL with no message: probably the "
                "kernel's OOM killer (host RAM exhausted; see dmesg)",
            )
        if sig in _STOP_SIGNALS:
            return INTERRUPTED, KILLED, f"the measuring process was stopped by {name}"
        limited = limit_problem(stderr_tail, aborted=sig in _LIMIT_SIGNALS)
        if limited:
            return INFEASIBLE, RESOURCE_LIMIT, f"the measuring process died of {name}: {limited}"
        if sig == signal.SIGBUS:  # touching a shared-memory batch that /dev/shm had no room for
            return (
                INFEASIBLE,
                SHM_FULL,
                shm_full_message(f"the measuring process was killed by {name}"),
            )
        return ERROR, KILLED, f"the measuring process was killed by {name}"
    limited = limit_problem(stderr_tail)
    if limited and started:
        # It was built and ran out while measuring: the workers and the batch decide how many
        # descriptors (or how much address space) it needs, so a smaller configuration fits.
        return INFEASIBLE, RESOURCE_LIMIT, f"the measuring process ran out: {limited}"
    if limited:  # before the workload was built: every configuration fails alike
        return ERROR, RESOURCE_LIMIT, f"the measuring process could not run: {limited}"
    tail = _last_line(stderr_tail)
    return (
        ERROR,
        CRASH,
        f"the measuring process exited with code {returncode} without a result"
        + (f": {tail}" if tail else ""),
    )
