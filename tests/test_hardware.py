from __future__ import annotations

import json
import subprocess
import sys

import pytest

from loadersearch.errors import StudyError
from loadersearch.hardware import Hardware, check_compatible, fingerprint, host_name


def test_fingerprint_names_versions_without_importing_torch():
    code = (
        "import sys, json; from loadersearch.hardware import fingerprint; "
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
