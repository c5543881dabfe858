"""Where a measurement runs: the one device policy.

Two views, one policy. Before anything is measured, the parent decides from this machine's
fingerprint (NVML, no torch): :func:`uses_cuda`, :func:`resolved_workload` (``device="auto"``
becomes ``cuda`` or ``cpu`` before the measuring process starts, so that a study named and
sized for a GPU never silently measures the CPU) and :func:`check_gpus` (no more ranks than
GPUs). Inside the measuring process, :func:`resolve_device` holds torch to that decision: a
workload resolved to ``cuda`` where torch sees no CUDA device fails with the reason.
"""

from __future__ import annotations

import dataclasses
import os

from loadersearch._hardware import Hardware
from loadersearch.errors import DeviceError, SpecError
from loadersearch.workload._spec import WorkloadSpec


def uses_cuda(workload: WorkloadSpec, hardware: Hardware) -> bool:
    """Whether the measurement will run on a CUDA device (the emulated device never does)."""
    if workload.kind == "emulated" or workload.device == "cpu":
        return False
    return workload.device == "cuda" or hardware.gpu_count > 0


def resolved_workload(workload: WorkloadSpec, hardware: Hardware) -> WorkloadSpec:
    """``workload`` with ``device="auto"`` replaced by the device this study resolved to, as
    the measuring child must use it: a study named and sized for a GPU then runs on CUDA or
    fails with the reason (an old driver, ``CUDA_VISIBLE_DEVICES=""``), instead of silently
    measuring the CPU at 128 px under the GPU study's name. The emulated workload keeps
    ``auto``: it only moves its batches to whatever device is there."""
    if workload.device != "auto" or workload.kind == "emulated":
        return workload
    return dataclasses.replace(workload, device="cuda" if uses_cuda(workload, hardware) else "cpu")


def check_gpus(workload: WorkloadSpec, hardware: Hardware) -> None:
    """Refuse more ranks than this machine has GPUs when the ranks would run on CUDA (every
    workload moves its batches to CUDA when there is one and the device is not ``cpu``)."""
    on_cuda = workload.device == "cuda" or (workload.device == "auto" and hardware.gpu_count)
    if workload.gpus > 1 and on_cuda and workload.gpus > hardware.gpu_count:
        raise SpecError(
            f"gpus={workload.gpus} needs {workload.gpus} GPUs, one per rank, but this machine "
            f"has {hardware.gpu_count}; "
            + (f"use --gpus {hardware.gpu_count} or fewer (or " if hardware.gpu_count
               else "use --gpus 1 (one process; ")  # fmt: skip
            + "--device cpu for CPU ranks with gloo, for testing)."
        )


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def cuda_unavailable_reason() -> str:
    """Why this process's torch sees no CUDA device, as far as it can tell."""
    import ctypes
    import warnings

    import torch

    from loadersearch._hardware import VISIBLE_ENV, parse_visible_devices

    if torch.version.cuda is None:
        return f"this torch ({torch.__version__}) is built without CUDA"
    visible = os.environ.get(VISIBLE_ENV)
    if visible is not None and parse_visible_devices(visible) == []:
        return f"{VISIBLE_ENV}={visible!r} hides every GPU from this process"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.is_available()  # torch warns the reason (e.g. a driver too old for it)
    said = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
    if said:
        return "torch says: " + " ".join(said)
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver here (libcuda.so.1 cannot be loaded)"
    return (
        f"no CUDA device found (torch {torch.__version__} built for CUDA {torch.version.cuda}; "
        f"{VISIBLE_ENV}={visible!r})"
    )


def resolve_device(device: str) -> str:
    """In the measuring process: ``auto`` -> ``cuda`` when torch sees a CUDA device, else
    ``cpu`` (the emulated workload, or a direct :func:`~loadersearch.measure.measure` of an
    unresolved workload). ``cuda`` without a CUDA device raises
    :class:`~loadersearch.errors.DeviceError` with the reason: a study resolved to CUDA must
    not be measured on the CPU."""
    if device == "auto":
        return "cuda" if cuda_available() else "cpu"
    if device == "cuda" and not cuda_available():
        raise DeviceError(
            f"this measurement must run on CUDA but torch sees no CUDA device: "
            f"{cuda_unavailable_reason()}. Measuring on the CPU instead would answer for "
            "another machine; make the GPU visible (driver, CUDA_VISIBLE_DEVICES, container "
            "--gpus), or measure on the CPU on purpose with --device cpu (a separate study)."
        )
    return device
