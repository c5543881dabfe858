"""Study specs: what a study measures, read from a TOML file and command-line overrides.

A spec file (``studies/*.toml``) has up to five tables::

    [study]     name, trials, epochs_planned, confirm_rounds, pruner, seed, description
    [workload]  kind, data, format, img_size, classes, mosaic, device, vram_cap ("6GiB"),
                emulated_ms = [a, b], emulated_mib = [m0, m1], skip_bad_samples, seed
    [plan]      epochs, steps, windows_per_epoch, warmup_epochs, timeout_s
    [space]     num_workers = "0:16", batch_size = "8:64:8" | "pow2:8:128",
                prefetch_factor = "1:8", pin_memory = "both" | true | false, ...
    [space.fix] batch_size = 16, ...
    [pipeline]  dataset = "mypkg.data:make_dataset", model, loss, step, collate (your own
                pipeline instead of YOLOv4-tiny); [pipeline.dataset_kwargs] root = "data", ...

:func:`resolve_settings` turns the file, the command-line overrides and this machine into
:class:`StudySettings`; command-line values win over the file, the file over the defaults.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from loadersearch.config import PRUNERS, MeasurePlan, PipelineSpec, WorkloadSpec
from loadersearch.config import parse_size as config_parse_size
from loadersearch.errors import LoaderSearchError
from loadersearch.hardware import Hardware
from loadersearch.search.space import KNOBS, SearchSpace, SpaceError, default_worker_bound

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

_SECTIONS = {
    "study": {
        "name",
        "trials",
        "epochs_planned",
        "confirm_rounds",
        "pruner",
        "seed",
        "description",
    },
    "workload": {f.name for f in dataclasses.fields(WorkloadSpec)}
    | {"format", "split", "classes"},
    "plan": {f.name for f in dataclasses.fields(MeasurePlan)},
    "space": set(KNOBS) | {"fix"},
    "pipeline": {f.name for f in dataclasses.fields(PipelineSpec)},
}


class SpecError(LoaderSearchError):
    """A study spec (file or options) cannot be used; the message names the key and the fix."""


@dataclass(frozen=True)
class StudySettings:
    """Everything a study run needs; the spec part (workload, plan, space) is stored in the
    study so that a resume or another machine rebuilds the same objective."""

    workload: WorkloadSpec
    plan: MeasurePlan
    space: SearchSpace
    trials: int = 40  # finished trials the study should hold in total
    study_name: str | None = None  # None = derived from workload and hardware
    storage: str | None = None  # None = $LOADERSEARCH_STORAGE or the default SQLite file
    pruner: str = "wilcoxon"  # wilcoxon | median | none
    confirm_rounds: int = 3  # interleaved re-measurement rounds of the finalists
    epochs_planned: int = 300  # epochs of the user's real training, for "time saved"
    seed: int | None = None  # sampler seed
    baselines: bool = True  # enqueue the three baselines first
    probe: bool = True  # probe the largest batch that fits the VRAM cap
    classes: int | None = None  # informational: classes of the user's dataset
    description: str = ""
    source: str | None = None  # the spec file, if any
    allow_mixed_hardware: bool = False  # join a study created on another hardware class

    def spec_dict(self) -> dict[str, Any]:
        """The part that must not change inside one study."""
        return {
            "workload": self.workload.to_dict(),
            "plan": self.plan.to_dict(),
            "space": self.space.to_dict(),
        }


@dataclass
class Overrides:
    """Values given on the command line (None = not given)."""

    study: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    space_ranges: dict[str, str] = field(default_factory=dict)
    space_fixed: dict[str, str] = field(default_factory=dict)
    # PipelineSpec fields: references ("module:qualname") and *_kwargs; kwargs merge into the
    # file's key by key
    pipeline: dict[str, Any] = field(default_factory=dict)


def parse_size(text: str | int | float | None) -> int | None:
    """Bytes from ``"6GiB"``, ``"6 GB"``, ``"512MiB"``, ``6442450944`` (None stays None); see
    :func:`loadersearch.config.parse_size`."""
    if text is None or text == "":
        return None
    try:
        return config_parse_size(text)
    except ValueError as e:
        raise SpecError(f"cannot read the size {text!r}; write e.g. 6GiB, 512MiB or 4GB.") from e


def load_spec_file(path: str) -> dict[str, Any]:
    """Read and check a spec file's tables (unknown tables or keys are errors)."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError as e:
        raise SpecError(f"study spec {path} not found; see studies/*.toml for examples.") from e
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"study spec {path} is not valid TOML: {e}.") from e
    for section, table in data.items():
        if section not in _SECTIONS:
            raise SpecError(
                f"study spec {path}: unknown table [{section}]; use "
                f"{', '.join(f'[{s}]' for s in _SECTIONS)}."
            )
        if not isinstance(table, dict):
            raise SpecError(f"study spec {path}: {section} must be a table ([{section}]).")
        unknown = set(table) - _SECTIONS[section]
        if unknown:
            raise SpecError(
                f"study spec {path}: unknown key(s) {', '.join(sorted(unknown))} in "
                f"[{section}]; known keys: {', '.join(sorted(_SECTIONS[section]))}."
            )
    return data


def resolve_settings(
    spec_file: str | None,
    overrides: Overrides,
    *,
    hardware: Hardware,
    storage: str | None = None,
) -> StudySettings:
    """Merge defaults, the spec file and the command line into :class:`StudySettings`.

    Checks everything (ranges, sizes, the dataset directory) so that a bad input fails before
    any storage is opened or created."""
    data = load_spec_file(spec_file) if spec_file else {}
    base = os.path.dirname(os.path.abspath(spec_file)) if spec_file else os.getcwd()
    study = {**data.get("study", {}), **_given(overrides.study)}
    workload_in = {**data.get("workload", {}), **_given(overrides.workload)}
    plan_in = {**data.get("plan", {}), **_given(overrides.plan)}

    classes = workload_in.pop("classes", None)
    if "format" in workload_in:
        workload_in["data_format"] = workload_in.pop("format")
    if "split" in workload_in:
        workload_in["data_split"] = workload_in.pop("split")
    if "vram_cap" in workload_in:
        workload_in["vram_cap"] = parse_size(workload_in["vram_cap"])
    data_dir = workload_in.get("data")
    if data_dir:
        # Relative paths in a spec file are relative to the file; on the command line, to cwd.
        from_file = "data" not in _given(overrides.workload)
        path = os.path.join(base, data_dir) if from_file else data_dir
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.isdir(path):
            raise SpecError(
                f"dataset directory {path} does not exist; check --data (or [workload] data), "
                "or run `loadersearch make-dataset` to generate one."
            )
        workload_in["data"] = path
    pipeline = resolve_pipeline(data.get("pipeline", {}), overrides.pipeline)
    if pipeline is not None:
        workload_in["pipeline"] = pipeline
    try:
        workload = WorkloadSpec(**workload_in)
    except (TypeError, ValueError) as e:
        raise SpecError(f"workload: {e}") from e

    check_gpus(workload, hardware)
    small = cpu_bound(workload, hardware)
    try:
        plan = MeasurePlan(**{**default_plan(small=small).to_dict(), **plan_in})
    except (TypeError, ValueError) as e:
        raise SpecError(f"plan: {e}") from e

    space = default_space(hardware, small=small, ranks=workload.gpus)
    space_in = dict(data.get("space", {}))
    fixed_in = {k: v for k, v in dict(space_in.pop("fix", {})).items()}
    try:
        for knob, text in {**space_in, **overrides.space_ranges}.items():
            space = space.with_range(knob, _range_text(text))
        for knob, value in {**fixed_in, **overrides.space_fixed}.items():
            space = space.with_fixed(knob, value)
    except SpaceError as e:
        raise SpecError(str(e)) from e

    trials = int(study.get("trials", 40))
    if trials < 1:
        raise SpecError(f"trials must be at least 1 but got {trials}.")
    pruner = str(study.get("pruner", PRUNERS[0]))
    if pruner not in PRUNERS:
        raise SpecError(f"unknown pruner {pruner!r}; choose one of {', '.join(PRUNERS)}.")
    rounds = int(study.get("confirm_rounds", 3))
    if rounds < 0:
        raise SpecError(f"confirm_rounds cannot be negative but got {rounds}.")
    epochs_planned = int(study.get("epochs_planned", 300))
    if epochs_planned < 1:
        raise SpecError(f"epochs_planned must be at least 1 but got {epochs_planned}.")
    extra = {k: study[k] for k in ("baselines", "probe", "allow_mixed_hardware") if k in study}
    return StudySettings(
        workload=workload,
        plan=plan,
        space=space,
        trials=trials,
        study_name=study.get("name"),
        storage=storage,
        pruner=pruner,
        confirm_rounds=rounds,
        epochs_planned=epochs_planned,
        seed=study.get("seed"),
        classes=classes,
        description=str(study.get("description", "")),
        source=spec_file,
        **extra,
    )


def resolve_pipeline(from_file: dict[str, Any], given: dict[str, Any]) -> PipelineSpec | None:
    """The pipeline of the spec file's [pipeline] table and the command line (which wins; its
    keyword arguments are merged into the file's), its references imported here so that a
    wrong name fails before anything runs; None when neither names a pipeline."""
    given = {k: v for k, v in given.items() if v is not None and v != {}}
    merged = {**from_file, **given}
    for key, value in given.items():
        if key.endswith("_kwargs"):
            merged[key] = {**from_file.get(key, {}), **value}
    if not merged:
        return None
    if merged.get("dataset") is None:
        raise SpecError(
            f"a pipeline ({', '.join(sorted(merged))}) needs its dataset: give "
            "--dataset module:name (or dataset in [pipeline])."
        )
    try:
        pipeline = PipelineSpec(**merged)
    except (TypeError, ValueError) as e:
        raise SpecError(f"pipeline: {e}") from e
    from loadersearch.workload.refs import check_refs

    check_refs(pipeline)
    return pipeline


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


def cpu_bound(workload: WorkloadSpec, hardware: Hardware) -> bool:
    """Whether the CPU does the heavy work of this measurement: training on a CPU, or any
    workload on a host without a GPU (its loader decodes ~50-100 img/s at 416 px). Such
    measurements get short plans and small batches."""
    gpu = uses_cuda(workload, hardware)
    return not gpu and (workload.kind == "train" or hardware.gpu_count == 0)


def default_plan(*, small: bool) -> MeasurePlan:
    """Short measurements. Where the CPU does the heavy work (~70 img/s for training at 128 px
    on 2 cores, ~50-100 img/s for the loader at 416 px; less on a busy machine), 2 warm-up
    steps and two short epochs of 4 one-step windows keep a trial to a few seconds and still
    give the pruner 8 paired windows; elsewhere 3 short epochs of 8 steps (MeasurePlan's
    defaults) cut into 12 windows of 2 steps."""
    if small:
        return MeasurePlan(
            epochs=2, steps=4, windows_per_epoch=4, warmup_epochs=1, warmup_steps=2, timeout_s=120
        )
    return MeasurePlan(epochs=3, steps=8, windows_per_epoch=4, warmup_epochs=1, warmup_steps=4)


def check_gpus(workload: WorkloadSpec, hardware: Hardware) -> None:
    """Refuse more ranks than this machine has GPUs when the ranks would run on CUDA (every
    workload moves its batches to CUDA when there is one and the device is not ``cpu``)."""
    on_cuda = workload.device == "cuda" or (workload.device == "auto" and hardware.gpu_count)
    if workload.gpus > 1 and on_cuda and workload.gpus > hardware.gpu_count:
        raise SpecError(
            f"gpus={workload.gpus} needs {workload.gpus} GPUs, one per rank, but this machine "
            f"has {hardware.gpu_count}; use --gpus {hardware.gpu_count} or fewer (or "
            "--device cpu for CPU ranks with gloo, for testing)."
        )


def default_space(hardware: Hardware, *, small: bool, ranks: int = 1) -> SearchSpace:
    """The default ranges for this machine (batch sizes 8..32 where the CPU does the work);
    with several ranks, ``num_workers`` per rank within the cores they share."""
    workers = default_worker_bound(hardware.cpu_count, ranks)
    batch = (8, 32) if small else (8, 128)
    return SearchSpace(num_workers=(0, workers), batch_size=batch, batch_step=8)


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def _range_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ":".join(str(v) for v in value)
    return str(value)
