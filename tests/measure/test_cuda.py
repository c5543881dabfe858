"""The CUDA calls of the measurement, checked against the installed torch without a GPU.

Each ``torch.cuda`` function resolves its device argument with ``_get_device_index(device,
optional=...)``; the flag differs between functions (``set_per_process_memory_fraction`` is
strict). These tests read the flag from the installed torch's own source and resolve the exact
arguments loadersearch passes with torch's own resolver, which needs no driver, so a torch that
changes a contract, or a call site that passes an index-less device, fails here on any machine.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.cuda._utils import _get_device_index

import loadersearch
from loadersearch.measure._cuda import (
    CALLS,
    CapTooSmall,
    CudaMemory,
    cap_notes,
    device_index,
    memory_fraction,
    overhead_bytes,
    pressure_note,
)

GIB = 2**30


def _optional_flag(name: str) -> bool:
    """How torch.cuda.<name> resolves its device: the ``optional`` flag of its
    ``_get_device_index`` call, read from the installed source. ``synchronize`` goes through
    ``torch.cuda.device(device)``, whose constructor makes the call."""
    func = getattr(torch.cuda, name)
    source = inspect.getsource(func)
    if "_get_device_index(" not in source and "torch.cuda.device(device)" in source:
        source = inspect.getsource(torch.cuda.device.__init__)
    if "_get_device_index(" not in source:  # memory_reserved -> memory_stats -> ..._dict
        callee = re.search(r"(\w+)\((?:device=)?device\)", source)
        assert callee and hasattr(torch.cuda, callee.group(1)), (
            f"cannot see how torch.cuda.{name} resolves its device"
        )
        return _optional_flag(callee.group(1))
    call = re.search(r"_get_device_index\(\s*device\s*(,[^)]*)?\)", source)
    assert call, f"torch.cuda.{name} no longer calls _get_device_index(device, ...)"
    return "optional=True" in (call.group(1) or "")


@pytest.mark.parametrize("name", CALLS)
def test_every_device_argument_we_pass_resolves_with_torchs_own_rule(name: str) -> None:
    func = getattr(torch.cuda, name)
    assert "device" in inspect.signature(func).parameters
    index = device_index(torch.device("cuda", 1))
    assert _get_device_index(index, optional=_optional_flag(name)) == 1


# Every torch.cuda function loadersearch calls, and what it passes. A new call fails
# test_every_torch_cuda_call_in_loadersearch_was_reviewed until it is added here (and checked).
_NO_DEVICE_ARGUMENT = {
    "is_available",
    "is_initialized",  # online: synchronise only once the user's loop has used CUDA
    "current_device",
    "Event",
    "empty_cache",
    "device_count",
}
_GIVEN_AN_INDEX = set(CALLS) | {"get_device_name", "set_device"}  # set_device: a DDP rank's


def test_every_torch_cuda_call_in_loadersearch_was_reviewed() -> None:
    root = Path(loadersearch.__file__).parent
    called = set()
    for path in root.rglob("*.py"):
        text = path.read_text()
        called |= set(re.findall(r"torch\.cuda\.(\w+)\(", text))
        called |= set(re.findall(r"self\.cuda\.(\w+)\(", text))  # CudaMemory's torch.cuda
    assert called, "the scan found no torch.cuda call at all"
    unreviewed = called - _NO_DEVICE_ARGUMENT - _GIVEN_AN_INDEX
    assert not unreviewed, f"review these torch.cuda calls' device arguments: {unreviewed}"
    for name in called & _GIVEN_AN_INDEX:
        assert "device" in inspect.signature(getattr(torch.cuda, name)).parameters
        assert _get_device_index(0, optional=_optional_flag(name)) == 0
    for name in called & _NO_DEVICE_ARGUMENT:
        target = getattr(torch.cuda, name)
        params = inspect.signature(target.__init__ if inspect.isclass(target) else target)
        assert "device" not in params.parameters, name


def test_the_strict_call_refuses_an_index_less_device_which_is_why_we_pass_ints() -> None:
    # The bug this module exists for: torch 2.14's set_per_process_memory_fraction resolves
    # with optional=False, so torch.device("cuda") raises before anything is set.
    assert _optional_flag("set_per_process_memory_fraction") is False
    with pytest.raises(ValueError, match="specified index"):
        _get_device_index(torch.device("cuda"), optional=False)
    with pytest.raises(ValueError, match="no index"):
        device_index(torch.device("cuda"))


def test_device_index_takes_ints_strings_and_indexed_devices_only() -> None:
    assert device_index(0) == 0
    assert device_index("cuda:3") == 3
    assert device_index(torch.device("cuda", 2)) == 2
    for bad in ("cpu", torch.device("cpu"), -1, True):
        with pytest.raises(ValueError):
            device_index(bad)


def test_the_fraction_is_a_python_float_in_range_as_torch_checks_it() -> None:
    source = inspect.getsource(torch.cuda.set_per_process_memory_fraction)
    assert "isinstance(fraction, float)" in source and "fraction > 1" in source
    f = memory_fraction(8 * GIB, 80 * GIB)
    assert type(f) is float and f == pytest.approx(0.1)
    assert memory_fraction(8 * GIB, 80 * GIB, overhead_bytes=GIB) == pytest.approx(7 / 80)
    assert memory_fraction(100 * GIB, 80 * GIB) == 1.0  # a cap above the card: no limit
    with pytest.raises(ValueError, match="leaves nothing for tensors"):
        memory_fraction(GIB, 80 * GIB, overhead_bytes=GIB)


def test_the_overhead_is_nvmls_process_figure_less_the_allocators() -> None:
    assert overhead_bytes(3 * GIB, 2 * GIB) == GIB
    assert overhead_bytes(GIB, 2 * GIB) == 0  # NVML sampled before the allocator grew
    assert overhead_bytes(None, 2 * GIB) is None


def test_a_cap_at_or_above_the_card_and_an_unknown_overhead_are_noted() -> None:
    (note,) = cap_notes(80 * GIB, 80 * GIB, GIB // 2)
    assert "at or above the card's memory" in note and "512 MiB" in note
    assert cap_notes(8 * GIB, 80 * GIB, GIB // 2) == []
    (unknown,) = cap_notes(8 * GIB, 80 * GIB, None)
    assert "allocator only" in unknown


def test_allocator_retries_or_ooms_while_measuring_are_flagged() -> None:
    assert pressure_note({"num_alloc_retries": 0, "num_ooms": 0}, 8 * GIB) is None
    assert pressure_note({}, None) is None
    note = pressure_note({"num_alloc_retries": 3, "num_ooms": 1}, 8 * GIB)
    assert "near the VRAM cap (8.00 GiB)" in note and "retried 3" in note and "1 out-of" in note
    # the keys read are the ones torch's memory_stats documents
    doc = inspect.getsource(torch.cuda.reset_accumulated_memory_stats)
    assert '"num_alloc_retries"' in doc and '"num_ooms"' in doc
    assert '"allocated_bytes.all.peak"' in inspect.getsource(torch.cuda.max_memory_allocated)
    assert '"reserved_bytes.all.peak"' in inspect.getsource(torch.cuda.max_memory_reserved)


class _RecordingCuda:
    """A stand-in for torch.cuda that records calls. Used only because this machine has no
    CUDA driver (torch.cuda's functions initialise CUDA before anything else); every recorded
    device argument is then resolved by torch's real resolver with the real flag."""

    def __init__(self, total: int, reserved: int, stats: dict[str, int]) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.total, self.reserved, self.stats = total, reserved, stats

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> Any:
            self.calls.append((name, args))
            if name == "get_device_properties":
                return type("Props", (), {"total_memory": self.total})()
            if name == "memory_reserved":
                return self.reserved
            if name == "memory_stats":
                return self.stats
            return None

        return call


def test_the_cap_is_set_then_tightened_by_the_measured_overhead_with_resolvable_arguments():
    stats = {
        "allocated_bytes.all.peak": 5 * GIB,
        "reserved_bytes.all.peak": 6 * GIB,
        "num_alloc_retries": 2,
        "num_ooms": 0,
    }
    cuda = _RecordingCuda(total=80 * GIB, reserved=2 * GIB, stats=stats)
    memory = CudaMemory(torch.device("cuda", 1), 8 * GIB, lambda: 3 * GIB, cuda=cuda)
    memory.apply_cap()
    memory.settle()
    memory.settle()  # once only
    memory.begin_measured()
    summary = memory.summary()
    fractions = [args[0] for name, args in cuda.calls if name == "set_per_process_memory_fraction"]
    assert fractions == [pytest.approx(8 / 80), pytest.approx(7 / 80)]  # cap, then cap - 1 GiB
    assert all(type(f) is float for f in fractions)
    assert [n for n, _ in cuda.calls].count("empty_cache") == 1
    for name, args in cuda.calls:
        if name in CALLS:
            device = args[-1]
            assert name in CALLS and _get_device_index(device, optional=_optional_flag(name)) == 1
        else:
            assert name == "empty_cache" and args == ()
    assert summary["cuda_overhead_bytes"] == GIB
    assert summary["memory_fraction"] == pytest.approx(7 / 80)
    assert summary["peak_allocated_bytes"] == 5 * GIB
    assert summary["peak_reserved_bytes"] == 6 * GIB
    assert summary["alloc_retries"] == 2 and "retried 2" in summary["notes"][-1]


def test_an_overhead_that_fills_the_cap_leaves_the_trial_infeasible() -> None:
    cuda = _RecordingCuda(total=80 * GIB, reserved=0, stats={})
    memory = CudaMemory(0, GIB, lambda: GIB + 1, cuda=cuda)
    memory.apply_cap()
    with pytest.raises(CapTooSmall, match="leaves nothing for tensors"):
        memory.settle()


def test_without_a_cap_nothing_is_limited_but_the_overhead_is_still_measured() -> None:
    cuda = _RecordingCuda(total=80 * GIB, reserved=GIB, stats={})
    memory = CudaMemory(0, None, lambda: 2 * GIB, cuda=cuda)
    memory.apply_cap()
    memory.settle()
    assert not any(n == "set_per_process_memory_fraction" for n, _ in cuda.calls)
    assert memory.summary()["cuda_overhead_bytes"] == GIB


@pytest.mark.cuda
def test_on_a_gpu_the_cap_is_enforced_at_the_tightened_fraction() -> None:
    from loadersearch.measure._probes import Probes

    index = torch.cuda.current_device()
    probes = Probes(index)
    memory = CudaMemory(torch.device("cuda", index), 2 * GIB, probes.process_used)
    memory.apply_cap()
    x = torch.randn(1024, 1024, device=f"cuda:{index}")
    (x @ x).sum().item()  # loads cuBLAS: memory outside the allocator
    memory.settle()
    assert torch.cuda.get_per_process_memory_fraction(index) == pytest.approx(
        memory.state.fraction
    )
    if memory.state.overhead_bytes is not None:  # NVML sees this pid (not in a PID namespace)
        assert memory.state.overhead_bytes > 0
        assert memory.state.fraction < 2 * GIB / memory.state.total_bytes
    memory.begin_measured()
    with pytest.raises(torch.OutOfMemoryError, match="allowed"):
        torch.empty(3 * GIB, dtype=torch.uint8, device=f"cuda:{index}")
    assert memory.summary()["alloc_ooms"] >= 1
