"""Study specs: TOML files, command-line overrides, sizes."""

from __future__ import annotations

import glob
import os

import pytest

from loadersearch import Hardware
from loadersearch.search._settings import Overrides, SpecError, parse_size, resolve_settings

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHIPPED_SPECS = sorted(glob.glob(os.path.join(ROOT, "studies", "*.toml")))
HOST = Hardware(cpu_count=2, physical_cores=2, gpu_count=0)


def test_an_unreadable_size_in_a_spec_is_a_spec_error() -> None:
    assert parse_size("6GiB") == 6 * 2**30  # loadersearch._options.parse_size underneath
    with pytest.raises(SpecError, match="cannot read the size"):
        parse_size("six gigs")


def test_the_shipped_specs_are_found() -> None:
    assert len(SHIPPED_SPECS) >= 2, SHIPPED_SPECS


@pytest.mark.parametrize("path", SHIPPED_SPECS)
def test_shipped_study_specs_load(path: str) -> None:
    settings = resolve_settings(path, Overrides(), hardware=HOST)
    assert settings.trials >= 1
    assert settings.space.num_workers[1] >= 1


def test_the_voc_spec_describes_416_px_training_under_a_cap() -> None:
    path = os.path.join(ROOT, "studies", "yolov4-tiny-voc.toml")
    settings = resolve_settings(path, Overrides(), hardware=HOST)
    assert settings.workload.kind == "train" and settings.workload.img_size == 416
    assert settings.workload.vram_cap == 6 * 2**30
    assert settings.classes == 20


def test_command_line_values_override_the_spec_file(tmp_path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(
        '[study]\ntrials = 10\n[workload]\nkind = "emulated"\nimg_size = 320\n'
        '[space]\nnum_workers = "0:3"\n[space.fix]\nbatch_size = 16\n'
    )
    overrides = Overrides(study={"trials": 5}, workload={"img_size": 256})
    overrides.space_ranges["num_workers"] = "1:2"
    settings = resolve_settings(str(spec), overrides, hardware=HOST)
    assert settings.trials == 5
    assert settings.workload.img_size == 256 and settings.workload.kind == "emulated"
    assert settings.space.num_workers == (1, 2)
    assert settings.space.fixed()["batch_size"] == 16


def test_a_spec_file_that_is_not_utf8_is_named(tmp_path) -> None:
    spec = tmp_path / "latin.toml"
    spec.write_bytes(b"\xff\xfe garbage")
    with pytest.raises(SpecError, match="latin.toml is not UTF-8 text .* save it as UTF-8"):
        resolve_settings(str(spec), Overrides(), hardware=HOST)


def test_a_knob_searched_and_fixed_in_one_place_is_refused(tmp_path) -> None:
    both = Overrides()
    both.space_ranges["batch_size"] = "8:32"
    both.space_fixed["batch_size"] = "64"
    with pytest.raises(SpecError, match=r"batch_size is both searched \(batch_size=8:32\) and "
                       r"fixed \(batch_size=64\)"):  # fmt: skip
        resolve_settings(None, both, hardware=HOST)
    spec = tmp_path / "s.toml"
    spec.write_text('[space]\nbatch_size = "8:32"\n[space.fix]\nbatch_size = 64\n')
    with pytest.raises(SpecError, match="both searched"):
        resolve_settings(str(spec), Overrides(), hardware=HOST)
    # the command line's value replaces the file's range (and its range the file's value)
    spec.write_text('[space]\nbatch_size = "8:32"\n')
    fix = Overrides()
    fix.space_fixed["batch_size"] = "16"
    assert resolve_settings(str(spec), fix, hardware=HOST).space.fixed()["batch_size"] == 16


@pytest.mark.parametrize("knob,how", [("prefetch_factor", "fix"), ("prefetch_factor", "space"),
                                      ("persistent_workers", "fix")])  # fmt: skip
def test_a_worker_knob_without_workers_is_refused(knob, how) -> None:
    overrides = Overrides()
    overrides.space_fixed["num_workers"] = "0"
    value = {"prefetch_factor": "2" if how == "fix" else "2:4", "persistent_workers": "true"}
    (overrides.space_fixed if how == "fix" else overrides.space_ranges)[knob] = value[knob]
    with pytest.raises(SpecError, match=f"{knob} applies only with num_workers > 0"):
        resolve_settings(None, overrides, hardware=HOST)


def test_unknown_keys_in_a_spec_file_are_named(tmp_path) -> None:
    spec = tmp_path / "bad.toml"
    spec.write_text("[workload]\nimage_size = 416\n")
    with pytest.raises(SpecError, match="unknown key\\(s\\) image_size in \\[workload\\]"):
        resolve_settings(str(spec), Overrides(), hardware=HOST)


def test_a_cpu_without_gpu_gets_the_short_cpu_plan_and_small_batches() -> None:
    settings = resolve_settings(None, Overrides(), hardware=HOST)
    assert settings.workload.kind == "train"
    assert settings.plan.steps * settings.plan.epochs <= 8
    assert settings.space.batch_size == (8, 32)
    assert settings.space.num_workers == (0, 4)  # 2 x 2 logical CPUs


def test_a_spec_split_reaches_the_workload_and_the_measured_dataset(
    tmp_path, tiny_dataset
) -> None:
    import shutil

    from loadersearch.workload import open_dataset

    root = tmp_path / "splits"
    for split in ("train", "val"):
        shutil.copytree(f"{tiny_dataset}/images", root / "images" / split)
        shutil.copytree(f"{tiny_dataset}/labels", root / "labels" / split)
    (root / "images" / "val" / sorted(os.listdir(root / "images" / "val"))[0]).unlink()
    spec = tmp_path / "s.toml"
    spec.write_text(f'[workload]\nkind = "loader"\ndata = "{root}"\nsplit = "val"\n')
    settings = resolve_settings(str(spec), Overrides(), hardware=HOST)
    assert settings.workload.data_split == "val"
    w = settings.workload
    ds = open_dataset(w.data, w.data_format, img_size=64, split=w.data_split)
    assert len(ds) == len(os.listdir(f"{tiny_dataset}/images")) - 1


@pytest.mark.parametrize(("cpus", "gpus", "bound"), [(2, 2, 1), (16, 4, 4), (64, 8, 8), (6, 8, 1)])
def test_the_per_rank_worker_bound_keeps_every_ranks_workers_within_the_cores(
    cpus: int, gpus: int, bound: int
) -> None:
    host = Hardware(cpu_count=cpus, physical_cores=cpus, gpu_count=gpus)
    settings = resolve_settings(None, Overrides(workload={"gpus": gpus}), hardware=host)
    assert settings.workload.gpus == gpus
    assert settings.space.num_workers == (0, bound)
    assert gpus * bound <= cpus or bound == 1  # at least one worker per rank to try


@pytest.mark.parametrize(("usable", "gpus", "bound"), [(4, 1, 8), (12, 4, 3), (3, 4, 1)])
def test_the_default_worker_range_follows_the_cpu_budget_not_the_machine(
    usable: int, gpus: int, bound: int
) -> None:
    # 64 CPUs on the machine, ``usable`` of them allowed (a quota or an affinity)
    host = Hardware(cpu_count=64, physical_cores=32, usable_cpus=usable, gpu_count=gpus)
    overrides = Overrides(workload={"gpus": gpus, "device": "cpu"})
    settings = resolve_settings(None, overrides, hardware=host)
    assert settings.space.num_workers == (0, bound)  # one rank 2 x usable, ranks usable // n


def test_space_widens_the_per_rank_worker_bound() -> None:
    overrides = Overrides(workload={"gpus": 2, "device": "cpu"})
    overrides.space_ranges["num_workers"] = "0:3"
    settings = resolve_settings(None, overrides, hardware=HOST)
    assert settings.space.num_workers == (0, 3)


def test_gpus_in_a_spec_file_is_read(tmp_path) -> None:
    spec = tmp_path / "ddp.toml"
    spec.write_text('[workload]\nkind = "emulated"\ngpus = 2\n')
    settings = resolve_settings(str(spec), Overrides(), hardware=HOST)
    assert settings.workload.gpus == 2 and settings.space.num_workers == (0, 1)


def test_more_ranks_than_gpus_is_refused_naming_the_fix() -> None:
    host = Hardware(cpu_count=32, physical_cores=16, gpu_count=2, gpu_model="NVIDIA H100")
    with pytest.raises(SpecError, match="gpus=4 needs 4 GPUs, one per rank, but this machine"):
        resolve_settings(None, Overrides(workload={"gpus": 4}), hardware=host)
    cpu_ranks = Overrides(workload={"gpus": 4, "device": "cpu"})  # gloo ranks, for testing
    assert resolve_settings(None, cpu_ranks, hardware=host).workload.gpus == 4
    with pytest.raises(SpecError, match="gpus must be a whole number of at least 1"):
        resolve_settings(None, Overrides(workload={"gpus": 0}), hardware=HOST)
    # without a GPU the advice is a value --gpus takes (it refuses 0)
    none = Hardware(cpu_count=8, physical_cores=4, gpu_count=0)
    with pytest.raises(SpecError, match=r"has 0; use --gpus 1 \(one process; --device cpu"):
        resolve_settings(None, Overrides(workload={"gpus": 2, "device": "cuda"}), hardware=none)


def test_auto_resolves_to_the_device_the_study_is_named_and_sized_for() -> None:
    from loadersearch.workload import WorkloadSpec, resolved_workload

    gpu = Hardware(cpu_count=16, physical_cores=8, gpu_model="NVIDIA H200", gpu_count=1)
    assert resolved_workload(WorkloadSpec(kind="train"), gpu).device == "cuda"
    assert resolved_workload(WorkloadSpec(kind="loader"), HOST).device == "cpu"
    assert resolved_workload(WorkloadSpec(kind="train", device="cpu"), gpu).device == "cpu"
    assert resolved_workload(WorkloadSpec(kind="emulated"), gpu).device == "auto"


def test_a_spec_file_fixes_or_searches_the_start_method(tmp_path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[space]\nstart_method = ["fork", "spawn"]\n')
    settings = resolve_settings(str(spec), Overrides(), hardware=HOST)
    assert settings.space.start_method == ("fork", "spawn")
    fixed = resolve_settings(
        str(spec), Overrides(space_fixed={"start_method": "forkserver"}), hardware=HOST
    )
    assert fixed.space.start_method == ("forkserver",)
PIPELINE_TOML = """
[study]
trials = 5

[pipeline]
dataset = "helpers.pipelines:make_dataset"
model = "helpers.pipelines:make_model"
loss = "torch.nn:CrossEntropyLoss"

[pipeline.dataset_kwargs]
n = 32
size = 8
"""


def test_a_pipeline_table_and_the_command_line_name_the_users_pipeline(tmp_path) -> None:
    path = tmp_path / "mine.toml"
    path.write_text(PIPELINE_TOML)
    overrides = Overrides(
        pipeline={"dataset_kwargs": {"size": 16}, "model_kwargs": {"classes": 4}}
    )
    settings = resolve_settings(str(path), overrides, hardware=HOST)
    p = settings.workload.pipeline
    assert p is not None and settings.workload.kind == "train"
    assert (p.dataset, p.model, p.loss) == (
        "helpers.pipelines:make_dataset",
        "helpers.pipelines:make_model",
        "torch.nn:CrossEntropyLoss",
    )
    assert p.dataset_kwargs == {"n": 32, "size": 16}  # merged key by key, the option wins
    assert p.model_kwargs == {"classes": 4}
    # stored in the study as plain data, rebuilt equal by a worker
    again = type(settings.workload).from_dict(settings.spec_dict()["workload"])
    assert again == settings.workload


@pytest.mark.parametrize(
    ("pipeline", "workload", "match"),
    [
        ({"model": "helpers.pipelines:make_model"}, {}, "needs its dataset"),
        ({"dataset": "helpers.pipelines:make_dataset"}, {}, "train workload needs your training"),
        (
            {"dataset": "helpers.pipelines:make_dataset"},
            {"kind": "loader", "img_size": 64},
            "img_size applies to the built-in YOLOv4-tiny workload",
        ),  # fmt: skip
        (
            {"dataset": "helpers.pipelines:make_dataset", "model": "helpers.pipelines:make_model"},
            {"kind": "emulated"},
            "the emulated workload runs no model or step",
        ),  # fmt: skip
        (
            {
                "dataset": "helpers.pipelines:make_dataset",
                "step": "helpers.pipelines:make_step",
                "loss": "torch.nn:L1Loss",
                "model": "helpers.pipelines:make_model",
            },
            {},
            "not both",
        ),  # fmt: skip
        ({"dataset": "helpers/pipelines.py"}, {"kind": "loader"}, "must read 'module:name'"),
        ({"dataset": "helpers.pipelines:make_data"}, {"kind": "loader"}, "has no 'make_data'"),
    ],
)
def test_an_unusable_pipeline_is_refused_before_anything_runs(pipeline, workload, match) -> None:
    from loadersearch.errors import LoaderSearchError

    overrides = Overrides(pipeline=pipeline, workload=workload)
    with pytest.raises(LoaderSearchError, match=match):
        resolve_settings(None, overrides, hardware=HOST)


def test_unknown_keys_in_a_pipeline_table_are_named(tmp_path) -> None:
    path = tmp_path / "typo.toml"
    path.write_text('[pipeline]\ndataset = "helpers.pipelines:make_dataset"\nmodle = "x:y"\n')
    with pytest.raises(SpecError, match=r"unknown key\(s\) modle in \[pipeline\]"):
        resolve_settings(str(path), Overrides(), hardware=HOST)


def test_a_storage_latency_in_a_spec_file_is_read_and_described(tmp_path) -> None:
    from loadersearch.search._opening import describe_workload

    spec = tmp_path / "hdd.toml"
    spec.write_text('[workload]\nkind = "loader"\nemulated_io_ms = 20\n')
    settings = resolve_settings(str(spec), Overrides(), hardware=HOST)
    assert settings.workload.emulated_io_ms == 20.0
    assert "(EMULATED storage latency 20 ms/sample)" in describe_workload(settings, HOST)
    spec.write_text('[workload]\nemulated_io_ms = "slow"\n')
    with pytest.raises(SpecError, match="emulated_io_ms must be a number"):
        resolve_settings(str(spec), Overrides(), hardware=HOST)
