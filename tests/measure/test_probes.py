"""The probes' NVML side: the device is found by its UUID, whatever CUDA_VISIBLE_DEVICES did."""

from __future__ import annotations

import pynvml
import pytest

from loadersearch.measure._probes import Probes, handle_by_uuid, nvml_uuids

UUID = "8f2a11aa-3c4d-5e6f-7a8b-9c0d1e2f3a4b"  # torch prints cudaDeviceProp.uuid like this


def test_torchs_bare_uuid_is_tried_as_a_whole_gpu_then_as_a_mig_slice():
    assert nvml_uuids(UUID) == [f"GPU-{UUID}", f"MIG-{UUID}"]
    assert nvml_uuids(f"MIG-{UUID}") == [f"MIG-{UUID}"]


class _FakeNvmlByUuid:
    """The part of the real pynvml module that handle_by_uuid uses, over a fixed set of
    devices: a stand-in only because this machine has no NVIDIA driver (the real lookup runs
    in the cuda-marked test below). Its errors are pynvml's own classes."""

    NVMLError = pynvml.NVMLError
    NVMLError_NotFound = pynvml.NVMLError_NotFound

    def __init__(self, known: set[str]) -> None:
        self.known = known
        self.asked: list[str] = []

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> str:
        self.asked.append(uuid)
        if uuid not in self.known:
            raise pynvml.NVMLError_NotFound()
        return f"handle:{uuid}"


def test_the_handle_is_the_gpu_or_the_mig_slice_with_torchs_uuid():
    whole = _FakeNvmlByUuid({f"GPU-{UUID}"})
    assert handle_by_uuid(whole, UUID) == f"handle:GPU-{UUID}"
    mig = _FakeNvmlByUuid({f"MIG-{UUID}", "GPU-0000"})
    assert handle_by_uuid(mig, UUID) == f"handle:MIG-{UUID}"
    assert mig.asked == [f"GPU-{UUID}", f"MIG-{UUID}"]
    with pytest.raises(pynvml.NVMLError_NotFound):
        handle_by_uuid(_FakeNvmlByUuid({"GPU-0000"}), UUID)


def test_without_a_driver_nvml_is_absent_not_an_error():
    probes = Probes(cuda_index=None)
    assert probes.nvml.handle is None and probes.nvml.status.startswith(("absent", "ok"))
    assert probes.process_used() is None


@pytest.mark.cuda
def test_on_a_gpu_nvml_watches_the_device_torch_uses():
    import torch

    index = torch.cuda.current_device()
    torch.ones(1, device=f"cuda:{index}")  # a context, so NVML lists this process
    probes = Probes(index)
    assert probes.nvml.status == "ok"
    uuid = pynvml.nvmlDeviceGetUUID(probes.nvml.handle)
    assert uuid.endswith(str(torch.cuda.get_device_properties(index).uuid))
