"""Classification of failures into a status and a reason."""

from __future__ import annotations

import signal

from loadersearch.errors import BadSampleError, DatasetError
from loadersearch.measure.failures import classify_exception, classify_exit
from loadersearch.measure.result import (
    BAD_DATASET,
    BAD_SAMPLE,
    CRASH,
    ERROR,
    INFEASIBLE,
    KILLED,
    VRAM_CAP,
    WORKER_KILLED,
)


def test_worker_killed_by_a_bus_error_points_at_shared_memory():
    e = RuntimeError("DataLoader worker (pid 4242) is killed by signal: Bus error. It is possible")
    status, reason, message = classify_exception(e)
    assert (status, reason) == (INFEASIBLE, WORKER_KILLED)
    assert "pid 4242" in message and "/dev/shm" in message


def test_worker_exited_unexpectedly_is_a_killed_worker():
    e = RuntimeError("DataLoader worker (pid(s) 11, 12) exited unexpectedly")
    assert classify_exception(e)[:2] == (INFEASIBLE, WORKER_KILLED)


def test_cuda_out_of_memory_names_the_batch_and_the_cap():
    e = RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    status, reason, message = classify_exception(e, batch_size=64, cap_bytes=6 * 2**30)
    assert (status, reason) == (INFEASIBLE, VRAM_CAP)
    assert message.startswith("over the VRAM cap at batch 64")
    assert "6,144 MiB" in message


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


def test_a_measurement_stopped_from_outside_is_interrupted_not_a_failure():
    from loadersearch.measure.result import INTERRUPTED

    for sig in (signal.SIGTERM, signal.SIGINT):
        assert classify_exit(-sig, "")[0] == INTERRUPTED


def test_process_limits_are_named_as_limits(monkeypatch):
    import resource

    from loadersearch import limits
    from loadersearch.measure.result import RESOURCE_LIMIT

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
