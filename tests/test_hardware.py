from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from loadersearch._cpu_budget import CpuBudget, cpu_budget, cpu_quota
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


# -- the CPU budget ---------------------------------------------------------------------------


def _fake_proc(tmp_path, cgroup: str = "0::/\n", mountinfo: str = "") -> str:
    """A /proc with what cpu_budget reads: self/cgroup, self/mountinfo, cpuinfo (16 CPUs, two
    to a physical core)."""
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "self" / "mountinfo").write_text(mountinfo)
    cpuinfo = "".join(
        f"processor\t: {i}\nphysical id\t: 0\ncore id\t\t: {i // 2}\n\n" for i in range(16)
    )
    (proc / "cpuinfo").write_text(cpuinfo)
    return str(proc)


def _cgroup(tmp_path, files: dict[str, str]) -> str:
    """A cgroup v2 tree: ``{"a/b/cpu.max": "max 100000", ...}`` under tmp_path/cg."""
    root = tmp_path / "cg"
    root.mkdir(exist_ok=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text + "\n")
    return str(root)


def test_a_cgroup_v2_quota_of_200000_per_100000_allows_2_cpus(tmp_path):
    root = _cgroup(tmp_path, {"cpu.max": "200000 100000"})
    b = cpu_budget(cgroup_root=root, proc=_fake_proc(tmp_path), affinity=range(8), environ={})
    assert (b.cpus, b.ranks, b.cpus_per_rank, b.workers_per_rank, b.worker_bound) == (
        2, 1, 2, 1, 4,
    )  # fmt: skip
    assert b.cores == 2  # 4 physical cores among CPUs 0-7, capped at the 2 CPUs
    assert b.describe() == (
        f"2 CPUs allowed by the cgroup CPU quota ({root}/cpu.max 200000 100000 = 2 CPUs), "
        "1 process: workers searched up to 4 (above the CPUs, for loads that wait on storage); "
        "1 worker leaves one CPU for the training process"
    )


def test_max_in_cpu_max_is_no_quota(tmp_path):
    root = _cgroup(tmp_path, {"cpu.max": "max 100000"})
    proc = _fake_proc(tmp_path)
    assert cpu_quota(cgroup_root=root, proc=proc) is None
    b = cpu_budget(cgroup_root=root, proc=proc, affinity=range(8), environ={})
    assert (b.cpus, b.limit, b.worker_bound) == (8, None, 16)
    assert b.describe().startswith("8 CPUs (all of this machine's), 1 process: workers searched")
    assert "up to 16 (above the CPUs" in b.describe() and "; 7 workers leave one" in b.describe()


def test_the_tightest_quota_on_the_path_up_from_the_process_s_cgroup_counts(tmp_path):
    root = _cgroup(
        tmp_path,
        {"cpu.max": "800000 100000", "job/cpu.max": "150000 100000", "job/step/cpu.max": "max"},
    )
    proc = _fake_proc(tmp_path, cgroup="0::/job/step\n")
    assert cpu_quota(cgroup_root=root, proc=proc) == (1.5, f"{root}/job/cpu.max 150000 100000")
    b = cpu_budget(cgroup_root=root, proc=proc, affinity=range(4), environ={})
    assert b.cpus == 1  # 1.5 CPUs rounded down: over the quota the whole cgroup is throttled
    assert "= 1.5 CPUs, rounded down" in b.describe()
    assert b.describe().endswith("up to 2; 1 worker shares the CPU with the training process")


def test_the_unified_mount_and_a_v1_cpu_controller_are_found_in_mountinfo(tmp_path):
    # This build machine's layout: cgroup v1 controllers, cgroup2 mounted at .../unified.
    unified = tmp_path / "fs" / "unified"
    v1 = tmp_path / "fs" / "cpu,cpuacct"
    (unified / "user.slice").mkdir(parents=True)
    (unified / "user.slice" / "cpu.max").write_text("300000 100000\n")
    (v1 / "docker" / "abc").mkdir(parents=True)
    (v1 / "docker" / "abc" / "cpu.cfs_quota_us").write_text("250000\n")
    (v1 / "docker" / "abc" / "cpu.cfs_period_us").write_text("100000\n")
    mountinfo = (
        f"31 23 0:28 / {tmp_path}/fs rw - tmpfs tmpfs rw\n"
        f"32 31 0:29 / {v1} rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
        f"41 31 0:38 / {unified} rw,relatime - cgroup2 cgroup2 rw\n"
    )
    cgroup = "2:cpu,cpuacct:/docker/abc\n1:memory:/docker/abc\n0::/user.slice\n"
    proc = _fake_proc(tmp_path, cgroup=cgroup, mountinfo=mountinfo)
    quota, where = cpu_quota(proc=proc)
    assert quota == 2.5 and where.startswith(f"{v1}/docker/abc/cpu.cfs_quota_us 250000")
    assert cpu_budget(proc=proc, affinity=range(16), environ={}).cpus == 2


def test_a_cgroup_path_outside_the_mounted_part_reads_the_mount_itself(tmp_path):
    # A container without a cgroup namespace sees its host's path, /sys/fs/cgroup is its own.
    root = _cgroup(tmp_path, {"cpu.max": "400000 100000"})
    proc = _fake_proc(tmp_path, cgroup="0::/kubepods/pod1/c2\n")
    assert cpu_quota(cgroup_root=root, proc=proc) == (4.0, f"{root}/cpu.max 400000 100000")


def test_local_world_size_4_shares_12_cpus_3_each_2_workers_beside_each_rank(tmp_path):
    root = _cgroup(tmp_path, {"cpu.max": "1200000 100000"})
    proc = _fake_proc(tmp_path)
    b = cpu_budget(cgroup_root=root, proc=proc, affinity=range(16),
                   environ={"LOCAL_WORLD_SIZE": "4"})  # fmt: skip
    assert (b.cpus, b.ranks, b.cpus_per_rank, b.workers_per_rank, b.worker_bound) == (
        12, 4, 3, 2, 3,
    )  # fmt: skip
    assert b.describe() == (
        f"12 CPUs allowed by the cgroup CPU quota ({root}/cpu.max 1200000 100000 = 12 CPUs), "
        "4 ranks (LOCAL_WORLD_SIZE): 3 CPUs each, workers searched up to 3 each; 2 workers each "
        "leave one CPU for each training process"
    )
    # the caller's count of ranks wins over the environment's
    two = cpu_budget(2, ranks_source="--gpus", cgroup_root=root, proc=proc, affinity=range(16),
                     environ={"LOCAL_WORLD_SIZE": "4"})  # fmt: skip
    assert (two.ranks, two.workers_per_rank) == (2, 5) and "2 ranks (--gpus)" in two.describe()
    stored = b.to_dict()
    assert stored["workers_per_rank"] == 2 and stored["line"] == b.describe()


def test_more_ranks_than_cpus_and_a_bad_local_world_size(tmp_path, caplog):
    root, proc = _cgroup(tmp_path, {}), _fake_proc(tmp_path)
    b = cpu_budget(cgroup_root=root, proc=proc, affinity=[0, 1],
                   environ={"LOCAL_WORLD_SIZE": "4"})  # fmt: skip
    assert (b.cpus_per_rank, b.workers_per_rank, b.worker_bound) == (1, 1, 1)
    assert "4 ranks (LOCAL_WORLD_SIZE): fewer CPUs than ranks, 1 worker each" in b.describe()
    with caplog.at_level("WARNING"):
        bad = cpu_budget(cgroup_root=root, proc=proc, affinity=[0, 1],
                         environ={"LOCAL_WORLD_SIZE": "four"})  # fmt: skip
    assert bad.ranks == 1 and "LOCAL_WORLD_SIZE='four'" in caplog.text
    with pytest.raises(ValueError, match="ranks must be at least 1"):
        cpu_budget(0, cgroup_root=root, proc=proc)


@pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")
@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs 2 CPUs to leave one out")
def test_under_taskset_c_0_the_budget_and_the_default_range_have_one_cpu():
    code = (
        "import json; from loadersearch._cpu_budget import cpu_budget; "
        "from loadersearch._hardware import fingerprint; "
        "from loadersearch.search._settings import default_space; "
        "b = cpu_budget(); hw = fingerprint(); "
        "print(json.dumps({**b.to_dict(), 'usable': hw.usable_cpus, "
        "'range': default_space(hw, small=True).num_workers}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "LOCAL_WORLD_SIZE"}
    out = subprocess.run(["taskset", "-c", "0", sys.executable, "-c", code], env=env,
                         capture_output=True, text=True, check=True)  # fmt: skip
    got = json.loads(out.stdout)
    assert (got["cpus"], got["usable"], got["workers_per_rank"], got["range"]) == (1, 1, 1, [0, 2])
    assert got["line"].startswith(
        f"1 CPU allowed by this process's CPU affinity (1 of the machine's {os.cpu_count()})"
    )


def test_a_fingerprint_records_the_budget_and_a_smaller_one_is_refused():
    fp = fingerprint()
    assert fp.usable_cpus == cpu_budget().cpus and fp.usable_cores >= 1
    assert CpuBudget.of(fp).cpus == fp.usable_cpus
    # one built by hand (or stored before budgets) counts every CPU
    assert CpuBudget.of(Hardware(cpu_count=8, physical_cores=4), 2).cpus == 8
    stored = _other(fp, usable_cpus=fp.usable_cpus + 4)
    with pytest.raises(StudyError, match="usable_cpus"):
        check_compatible(stored, fp, allow_mixed=False)
    older = {k: v for k, v in fp.to_dict().items() if k != "usable_cpus"}
    assert check_compatible(older, fp, allow_mixed=False) == []


def test_the_tightest_cgroup_memory_limit_counts_and_max_is_none(tmp_path):
    """A container's memory limit (cgroup v2 memory.max), which the RAM's size does not show:
    the tightest on the path up from the process's cgroup; "max" everywhere is no limit. The
    search's queue bound takes it where it is below the RAM."""
    from loadersearch._cpu_budget import memory_limit
    from loadersearch.measure import host_inflight_budget
    from loadersearch.workload import WorkloadSpec

    GiB = 2**30
    root = _cgroup(tmp_path, {"memory.max": "max", "job/memory.max": str(8 * GiB),
                              "job/step/memory.max": "max"})  # fmt: skip
    proc = _fake_proc(tmp_path, cgroup="0::/job/step\n")
    assert memory_limit(cgroup_root=root, proc=proc) == 8 * GiB
    (tmp_path / "free").mkdir()
    free = _cgroup(tmp_path / "free", {"memory.max": "max"})
    assert memory_limit(cgroup_root=free, proc=proc) is None
    spec = WorkloadSpec(kind="loader")
    pod = Hardware(ram_bytes=256 * GiB, memory_limit_bytes=8 * GiB, shm_bytes=128 * GiB)
    node = Hardware(ram_bytes=256 * GiB, shm_bytes=128 * GiB)
    image = 3 * 416 * 416 + 512
    assert host_inflight_budget(pod, spec, "cuda") == pytest.approx(0.1 * 8 * GiB / image)
    assert host_inflight_budget(node, spec, "cuda") == pytest.approx(0.1 * 256 * GiB / image)
