"""Classification of failures into a status and a reason."""

from __future__ import annotations

import signal

import pytest
import torch
from torch._utils import ExceptionWrapper
from torch.utils.data._utils.pin_memory import pin_memory

from loadersearch.errors import BadSampleError, DatasetError, DeviceError
from loadersearch.measure._cuda import CapTooSmall
from loadersearch.measure._failures import classify_exception, classify_exit
from loadersearch.measure._result import (
    BAD_DATASET,
    BAD_SAMPLE,
    CRASH,
    ERROR,
    HOST_OOM,
    INFEASIBLE,
    KILLED,
    NO_DEVICE,
    SHM_FULL,
    VRAM_CAP,
    WORKER_KILLED,
)

# Messages as torch 2.14 words them (c10/cuda/CUDACachingAllocator.cpp, c10/cuda/CUDAException.cpp,
# ATen's cuBLAS and cuDNN checks), with a per-process fraction set ("... allowed; ").
ALLOCATOR_OOM = (
    "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.81 GiB "
    "of which 120.42 GiB is free. Including non-PyTorch memory, this process has 7.46 GiB "
    "memory in use. 6.00 GiB allowed; Of the allocated memory 5.61 GiB is allocated by "
    "PyTorch, and 312.00 MiB is reserved by PyTorch but unallocated. If reserved but "
    "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
    "to avoid fragmentation.  See documentation for Memory Management  "
    "(https://docs.pytorch.org/docs/stable/notes/cuda.html#optimizing-memory-usage-with-"
    "pytorch-cuda-alloc-conf)"
)
CUDA_ERROR_OOM = (
    "CUDA error: out of memory\nCUDA kernel errors might be asynchronously reported at some "
    "other API call, so the stacktrace below might be incorrect.\nFor debugging consider "
    "passing CUDA_LAUNCH_BLOCKING=1\nCompile with `TORCH_USE_CUDA_DSA` to enable device-side "
    "assertions.\n"
)


def test_worker_killed_by_a_bus_error_is_shared_memory_full_with_the_fix():
    e = RuntimeError("DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible")
    status, reason, message = classify_exception(e)
    assert (status, reason) == (INFEASIBLE, SHM_FULL)
    assert "pid 4242" in message and "/dev/shm ran out" in message
    assert "--shm-size" in message and "--ipc=host" in message and "fewer workers" in message


# torch 2.14's words when a worker cannot get a /dev/shm file for a batch (file_descriptor
# strategy), as the DataLoader re-raises them in the training process.
SHM_ALLOC = (
    "Caught RuntimeError in DataLoader worker process 0.\nOriginal Traceback (most recent call "
    "last):\n  File \".../torch/storage.py\", line 423, in _new_shared\n    return "
    "cls._new_using_fd_cpu(size)\nRuntimeError: unable to allocate shared memory(shm) for file "
    "</torch_12189_1230178752_0>: No space left on device (28)\n"
)


@pytest.mark.parametrize(
    "text",
    [
        SHM_ALLOC,
        "unable to write to file </torch_77_123_0>: No space left on device (28)",
        "[Errno 28] No space left on device: '/dev/shm/pym-1234-abcd'",
    ],
)
def test_shared_memory_exhaustion_is_infeasible_shm_full_with_torchs_words(text):
    status, reason, message = classify_exception(RuntimeError(text))
    assert (status, reason) == (INFEASIBLE, SHM_FULL)
    assert message.startswith("/dev/shm ran out")
    assert "docker run --shm-size=" in message and "num_workers=0" in message
    if text is SHM_ALLOC:
        assert "unable to allocate shared memory(shm) for file </torch_12189" in message
        assert "Traceback" not in message


def test_a_full_disk_elsewhere_is_not_shared_memory():
    e = OSError(28, "No space left on device", "/data/cache.bin")
    assert classify_exception(e)[1] != SHM_FULL


def test_a_measuring_process_killed_by_sigbus_is_shared_memory_full():
    status, reason, message = classify_exit(-signal.SIGBUS, "")
    assert (status, reason) == (INFEASIBLE, SHM_FULL)
    assert "SIGBUS" in message and "--shm-size" in message


def test_worker_exited_unexpectedly_is_a_killed_worker():
    e = RuntimeError("DataLoader worker (pid(s) 11, 12) exited unexpectedly")
    assert classify_exception(e)[:2] == (INFEASIBLE, WORKER_KILLED)


def test_cuda_out_of_memory_names_the_batch_and_the_cap():
    e = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    status, reason, message = classify_exception(e, batch_size=64, cap_bytes=6 * 2**30)
    assert (status, reason) == (INFEASIBLE, VRAM_CAP)
    assert message.startswith("over the VRAM cap at batch 64")
    assert "6,144 MiB" in message


def test_torchs_out_of_memory_error_is_over_the_cap_and_keeps_torchs_detail():
    e = torch.OutOfMemoryError(ALLOCATOR_OOM)
    status, reason, message = classify_exception(e, batch_size=64, cap_bytes=6 * 2**30)
    assert (status, reason) == (INFEASIBLE, VRAM_CAP)
    assert message.startswith("over the VRAM cap at batch 64")
    assert "Tried to allocate 2.00 GiB" in message and "6.00 GiB allowed" in message
    assert "5.61 GiB is allocated by PyTorch" in message
    assert "expandable_segments" not in message  # torch's generic advice is left out


@pytest.mark.parametrize(
    "error",
    [
        torch.AcceleratorError(CUDA_ERROR_OOM),
        RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
        RuntimeError("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"),
    ],
    ids=["cuda-error", "cublas", "cudnn"],
)
def test_cuda_and_library_allocation_failures_are_over_the_cap(error: Exception):
    status, reason, message = classify_exception(error, batch_size=32, cap_bytes=2**30)
    assert (status, reason) == (INFEASIBLE, VRAM_CAP)
    assert "batch 32" in message and str(error).splitlines()[0] in message
    assert "CUDA_LAUNCH_BLOCKING" not in message


def _raised_in_the_pin_memory_thread(error: Exception) -> Exception:
    """The exception the DataLoader raises in the training loop when its pin-memory thread
    failed: torch wraps it in that thread and re-raises it in the loop."""
    try:
        raise error
    except Exception:
        wrapper = ExceptionWrapper(where="in pin memory thread for device 0")
    try:
        wrapper.reraise()
    except Exception as reraised:
        return reraised
    raise AssertionError("reraise() did not raise")


class _Unpinnable:
    def pin_memory(self, device=None):  # noqa: ANN001, ANN201 - torch's duck-typed protocol
        raise torch.AcceleratorError(CUDA_ERROR_OOM)


def test_an_out_of_memory_while_pinning_is_host_memory_not_the_vram_cap():
    wrapped = _raised_in_the_pin_memory_thread(torch.AcceleratorError(CUDA_ERROR_OOM))
    assert "Caught AcceleratorError in pin memory thread" in str(wrapped)
    status, reason, message = classify_exception(wrapped, batch_size=64, cap_bytes=2**30)
    assert (status, reason) == (INFEASIBLE, HOST_OOM)
    assert "pinned host memory" in message and message.endswith("CUDA error: out of memory")
    # with num_workers=0 the loop itself pins: torch's pin_memory() is in the traceback
    try:
        pin_memory(_Unpinnable())
    except torch.AcceleratorError as e:
        assert classify_exception(e, batch_size=64)[:2] == (INFEASIBLE, HOST_OOM)
    else:
        raise AssertionError("pin_memory() did not raise")


def test_no_cuda_device_for_a_cuda_study_and_a_cap_below_the_context_are_classified():
    status, reason, message = classify_exception(DeviceError("torch sees no CUDA device"))
    assert (status, reason, message) == (ERROR, NO_DEVICE, "torch sees no CUDA device")
    assert classify_exception(CapTooSmall("leaves nothing"))[:2] == (INFEASIBLE, VRAM_CAP)


def test_bad_sample_and_bad_dataset_are_errors_naming_the_file():
    status, reason, message = classify_exception(BadSampleError("/d/img7.jpg", "truncated"))
    assert (status, reason) == (ERROR, BAD_SAMPLE) and "/d/img7.jpg" in message
    assert classify_exception(DatasetError("/d: no images"))[:2] == (ERROR, BAD_DATASET)


def test_unknown_exception_is_a_crash_with_its_last_line():
    status, reason, message = classify_exception(ZeroDivisionError("division by zero"))
    assert (status, reason) == (ERROR, CRASH)
    assert message == "ZeroDivisionError: division by zero"


def test_silent_sigkill_suggests_the_oom_killer():
    status, reason, message = classify_exit(-signal.SIGKILL, "")
    assert (status, reason) == (INFEASIBLE, KILLED)
    assert "OOM killer" in message
    assert classify_exit(-signal.SIGSEGV, "")[:2] == (ERROR, KILLED)


def test_exit_without_result_quotes_the_last_stderr_line():
    status, reason, message = classify_exit(1, "Traceback...\nImportError: no module named x\n")
    assert (status, reason) == (ERROR, CRASH)
    assert message.endswith("ImportError: no module named x")


def test_a_limit_met_after_the_workload_was_built_depends_on_the_configuration(monkeypatch):
    from loadersearch import _limits as limits
    from loadersearch.measure._result import RESOURCE_LIMIT

    monkeypatch.setattr(limits, "soft_limit", lambda which: 20)
    said = "OSError: [Errno 24] Too many open files: '/x/cuda.py'"
    status, reason, message = classify_exit(1, said, started=True)
    assert (status, reason) == (INFEASIBLE, RESOURCE_LIMIT)  # fewer workers fit
    assert "may open 20 (ulimit -n)" in message
    status, reason, message = classify_exit(1, said)  # before "ready": every one fails alike
    assert (status, reason) == (ERROR, RESOURCE_LIMIT) and "could not run" in message


def test_a_measurement_stopped_from_outside_is_interrupted_not_a_failure():
    from loadersearch.measure._result import INTERRUPTED

    for sig in (signal.SIGTERM, signal.SIGINT):
        assert classify_exit(-sig, "")[0] == INTERRUPTED


def test_process_limits_are_named_as_limits(monkeypatch):
    import resource

    from loadersearch import _limits as limits
    from loadersearch.measure._result import RESOURCE_LIMIT

    caps = {resource.RLIMIT_NOFILE: 16, resource.RLIMIT_AS: 1_500_000 * 1024}
    monkeypatch.setattr(limits, "soft_limit", lambda which: caps.get(which))
    fd = RuntimeError("Too many open files. Communication with the workers is no longer possible")
    status, reason, message = classify_exception(fd)
    assert (status, reason) == (INFEASIBLE, RESOURCE_LIMIT)  # more workers, more descriptors
    assert "may open 16 (ulimit -n)" in message
    status, reason, message = classify_exit(
        1, "ImportError: /x/libtorch_cpu.so: failed to map segment from shared object"
    )
    assert (status, reason) == (ERROR, RESOURCE_LIMIT)  # every configuration fails alike
    assert "PyTorch could not be loaded" in message and "ulimit -v 1500000 KiB" in message
    status, reason, message = classify_exit(-signal.SIGABRT, "terminate called ... bad_alloc")
    assert (status, reason) == (INFEASIBLE, RESOURCE_LIMIT) and "SIGABRT" in message
    status, reason, _ = classify_exception(MemoryError())
    assert reason == RESOURCE_LIMIT
    monkeypatch.setattr(limits, "soft_limit", lambda which: None)  # no limit: host RAM
    assert classify_exception(MemoryError())[1] == "host_oom"
    assert classify_exit(-signal.SIGABRT, "")[1] == KILLED
