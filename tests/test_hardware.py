from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadersearch._hardware import (
    Gpu,
    Hardware,
    _nvml_gpus,
    check_compatible,
    fingerprint,
    host_name,
    parse_visible_devices,
    select_visible,
)
from loadersearch.errors import StudyError


def test_fingerprint_names_versions_without_importing_torch():
    code = (
        "import sys, json; from loadersearch._hardware import fingerprint; "
        "f = fingerprint(); print(json.dumps(f.to_dict())); assert 'torch' not in sys.modules"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    fp = json.loads(out.stdout)
    import torch

    assert fp["torch"] == torch.__version__.split("+")[0]
    assert fp["torch_cuda"] == torch.version.cuda
    assert fp["cpu_count"] >= 1 and fp["ram_bytes"] > 0


def test_host_identity_can_be_overridden(monkeypatch):
    monkeypatch.setenv("LOADERSEARCH_HOST", "node-17")
    assert host_name() == "node-17"
    assert fingerprint().host == "node-17"


def _other(fp: Hardware | dict, **changes) -> dict:
    """A stored fingerprint (the dict form a study keeps) with ``changes``."""
    return {**Hardware.from_dict(fp).to_dict(), **changes}


def test_identical_hardware_is_compatible():
    fp = fingerprint()
    elsewhere = Hardware.from_dict(_other(fp, host="elsewhere"))
    assert check_compatible(fp.to_dict(), elsewhere, allow_mixed=False) == []


def test_the_fingerprint_survives_the_trip_through_a_study_attribute():
    fp = fingerprint()
    assert Hardware.from_dict(json.loads(json.dumps(fp.to_dict()))) == fp
    # keys an older or newer loadersearch stored are tolerated
    assert Hardware.from_dict({"cpu_count": 4, "future_key": 1}).cpu_count == 4


def test_a_different_gpu_and_cpu_count_is_refused_with_the_differences_listed():
    stored = _other(fingerprint(), host="creator", gpu_model="NVIDIA H100", gpu_count=8)
    current = Hardware.from_dict(
        _other(stored, host="joiner", gpu_model="NVIDIA A100", cpu_count=3)
    )
    with pytest.raises(StudyError) as info:
        check_compatible(stored, current, allow_mixed=False)
    message = str(info.value)
    assert "gpu_model: study NVIDIA H100, this host NVIDIA A100" in message
    assert "cpu_count" in message and "--allow-mixed-hardware" in message
    assert "creator" in message and "joiner" in message


def test_allow_mixed_accepts_and_lists_relevant_then_informational_differences():
    stored = _other(fingerprint(), gpu_model="NVIDIA H100", ram_bytes=2**35, torch="2.4.0")
    current = Hardware.from_dict(
        _other(stored, gpu_model="NVIDIA A100", ram_bytes=2**36, torch="2.5.0")
    )
    diffs = check_compatible(stored, current, allow_mixed=True)
    assert diffs[0].startswith("gpu_model:")
    assert "ram_bytes: study 32.0 GiB, this host 64.0 GiB (informational)" in diffs
    assert any(d.startswith("torch:") and d.endswith("(informational)") for d in diffs)


def test_informational_differences_alone_are_not_refused():
    stored = _other(fingerprint(), shm_bytes=2**26, python="3.10.0")
    diffs = check_compatible(stored, fingerprint(), allow_mixed=False)
    assert len(diffs) == 2 and all(d.endswith("(informational)") for d in diffs)


def test_a_study_without_a_stored_fingerprint_accepts_any_host():
    assert check_compatible({}, fingerprint(), allow_mixed=False) == []
    assert check_compatible(None, fingerprint(), allow_mixed=False) == []


# --------------------------------------------------------------------------- visible devices

_VISIBLE = [
    "0",
    "1,0",
    "2,1gpu,3",
    "0,0",
    "1,-1,2",
    "",
    " 3 , 1",
    "GPU-8f2a,GPU-11aa",
    "MIG-5c7e",
    "GPU-8f2a,0",
    "GPU-8f2a,GPU-8f2a",
    "x",
]


@pytest.mark.parametrize("value", _VISIBLE)
def test_cuda_visible_devices_is_read_as_torch_reads_it(monkeypatch, value):
    from torch.cuda import _parse_visible_devices

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert parse_visible_devices(value) == _parse_visible_devices()


def test_an_unset_cuda_visible_devices_means_every_device(monkeypatch):
    assert parse_visible_devices(None) is None


_A = Gpu(0, "GPU-aaaa1111-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", 80 * 2**30)
_B = Gpu(1, "GPU-bbbb2222-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-40GB", 40 * 2**30)
_B_MIG = Gpu(
    1, "MIG-cccc3333-0000-0000-0000-000000000000", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", 5 * 2**30,
    mig=True,
)  # fmt: skip
_C = Gpu(2, "GPU-dddd4444-0000-0000-0000-000000000000", "NVIDIA H100 80GB HBM3", 80 * 2**30)


def test_visible_devices_select_by_ordinal_uuid_prefix_and_mig_uuid():
    gpus = [_A, _B, _B_MIG, _C]
    assert select_visible(gpus, None) == [_A, _B_MIG, _C]  # GPU 1 runs work on its slice only
    assert select_visible(gpus, [2, 0]) == [_C, _A]  # renumbered: CUDA's 0 is NVML's 2
    assert select_visible(gpus, [1]) == [_B_MIG]
    assert select_visible(gpus, ["GPU-dddd"]) == [_C]  # a prefix, as CUDA accepts
    assert select_visible(gpus, ["MIG-cccc3333"]) == [_B_MIG]
    assert select_visible(gpus, [5, 0]) == []  # an unknown ordinal ends the list
    assert select_visible(gpus, ["GPU-", "GPU-aaaa"]) == []  # ambiguous: ends the list
    assert select_visible(gpus, [0, 0]) == []  # torch and CUDA empty the list on a repeat
    assert select_visible(gpus, []) == []


class _FakePynvml:
    """A stand-in for the pynvml module with two GPUs, the second in MIG mode with one slice.
    Used only because this machine has no NVIDIA driver (nvmlInit raises here); the fingerprint
    reads the real NVML on a GPU machine (scripts/gpu_acceptance.sh)."""

    NVML_DEVICE_MIG_ENABLE = 1

    class NVMLError(Exception):
        pass

    def __init__(self) -> None:
        self.devices = {"h0": _A, "h1": _B, "m1": _B_MIG}

    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.65.06"

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"h{i}"

    def nvmlDeviceGetUUID(self, h: str) -> str:
        return self.devices[h].uuid

    def nvmlDeviceGetName(self, h: str) -> str:
        return self.devices[h].name

    def nvmlDeviceGetMemoryInfo(self, h: str):
        return type("Memory", (), {"total": self.devices[h].memory_bytes})()

    def nvmlDeviceGetMigMode(self, h: str) -> list[int]:
        if h == "h0":
            raise self.NVMLError("Not Supported")
        return [1, 1]

    def nvmlDeviceGetMaxMigDeviceCount(self, h: str) -> int:
        return 2

    def nvmlDeviceGetMigDeviceHandleByIndex(self, h: str, k: int) -> str:
        if k:
            raise self.NVMLError("Not Found")  # an empty slot
        return "m1"


@pytest.mark.parametrize(
    ("visible", "model", "count"),
    [
        (None, "NVIDIA H100 80GB HBM3", 2),
        ("1", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", 1),
        ("MIG-cccc", "NVIDIA A100-SXM4-40GB MIG 1g.5gb", 1),
        ("GPU-aaaa", "NVIDIA H100 80GB HBM3", 1),
        ("", None, 0),
    ],
)
def test_the_fingerprint_describes_the_devices_cuda_visible_devices_shows(
    monkeypatch, visible, model, count
):
    monkeypatch.setitem(sys.modules, "pynvml", _FakePynvml())
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    fp = fingerprint()
    assert (fp.gpu_model, fp.gpu_count, fp.nvidia_driver) == (model, count, "580.65.06")
    if "MIG" in (model or ""):
        assert fp.gpu_memory_bytes == 5 * 2**30  # the slice's memory, not the whole GPU's


def test_a_mig_slice_whose_nvml_name_does_not_say_so_is_named_a_mig_slice():
    nvml = _FakePynvml()
    nvml.devices["m1"] = Gpu(1, _B_MIG.uuid, "NVIDIA A100-SXM4-40GB", 5 * 2**30, mig=True)
    slices = [g for g in _nvml_gpus(nvml) if g.mig]
    assert [g.name for g in slices] == ["NVIDIA A100-SXM4-40GB MIG 5gb slice"]
