"""Study specs: what a study measures, read from a TOML file and command-line overrides.

A spec file (``studies/*.toml``) has up to five tables::

    [study]     name, trials, epochs_planned, confirm_rounds, pruner, sampler, seed, description
    [workload]  kind, data, format, img_size, classes, mosaic, device, vram_cap ("6GiB"),
                emulated_ms = [a, b], emulated_mib = [m0, m1], emulated_io_ms,
                skip_bad_samples, seed, cache = "none" | "ram" | "memmap", cache_dir
    [plan]      epochs, steps, windows_per_epoch, warmup_epochs, timeout_s, in_flight_rounds,
                epoch_limit_s, precision, extend_limit_s
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

from loadersearch.config import PRUNERS, SAMPLERS, MeasurePlan, PipelineSpec, WorkloadSpec
from loadersearch.config import parse_size as config_parse_size
from loadersearch.errors import SpecError
from loadersearch.hardware import Hardware
from loadersearch.search.space import KNOBS, SearchSpace, SpaceError, default_worker_bound
from loadersearch.workload.device import check_gpus, uses_cuda

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
        "sampler",
        "seed",
        "description",
    },
    "workload": {f.name for f in dataclasses.fields(WorkloadSpec)}
    | {"format", "split", "classes"},
    "plan": {f.name for f in dataclasses.fields(MeasurePlan)},
    "space": set(KNOBS) | {"fix"},
    "pipeline": {f.name for f in dataclasses.fields(PipelineSpec)},
}


# What each value must be. TOML has types of its own, so `trials = "abc"` or `steps = "many"`
# must be refused by name here rather than fail later inside int() or a comparison.
_WHOLE, _NUMBER, _TEXT, _FLAG = "a whole number", "a number", "a string", "true or false"
_PAIR, _SIZE, _RANGE = "two numbers, e.g. [4, 7]", 'a size, e.g. "6GiB"', "a range"
_TYPES = {
    "study": {
        "name": _TEXT,
        "trials": _WHOLE,
        "epochs_planned": _WHOLE,
        "confirm_rounds": _WHOLE,
        "pruner": _TEXT,
        "seed": _WHOLE,
        "description": _TEXT,
        "settle": _FLAG,
    },
    "workload": {
        "kind": _TEXT,
        "data": _TEXT,
        "data_format": _TEXT,
        "format": _TEXT,
        "data_split": _TEXT,
        "split": _TEXT,
        "img_size": _WHOLE,
        "classes": _WHOLE,
        "mosaic": _FLAG,
        "skip_bad_samples": _FLAG,
        "device": _TEXT,
        "vram_cap": _SIZE,
        "emulated_ms": _PAIR,
        "emulated_mib": _PAIR,
        "emulated_io_ms": _NUMBER,
        "emulated_io_cv": _NUMBER,
        "seed": _WHOLE,
        "optimizer": _TEXT,
        "cache": _TEXT,
        "cache_dir": _TEXT,
    },
    "plan": {
        "epochs": _WHOLE,
        "steps": _WHOLE,
        "windows_per_epoch": _WHOLE,
        "warmup_epochs": _WHOLE,
        "warmup_steps": _WHOLE,
        "timeout_s": _NUMBER,
        "stall_s": _NUMBER,
        "in_flight_rounds": _WHOLE,
        "epoch_limit_s": _NUMBER,
        "precision": _NUMBER,
        "extend_limit_s": _NUMBER,
    },
}


def _is(value: Any, kind: str) -> bool:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == _WHOLE:
        return number and float(value).is_integer()
    if kind == _NUMBER:
        return number
    if kind == _TEXT:
        return isinstance(value, str)
    if kind == _FLAG:
        return isinstance(value, bool)
    if kind == _PAIR:
        return isinstance(value, (list, tuple)) and all(_is(v, _NUMBER) for v in value)
    if kind == _SIZE:
        return isinstance(value, str) or number
    return True


def _check_types(section: str, table: dict[str, Any], where: str) -> None:
    """Refuse a value of the wrong type, naming the key, what it must be and what it is."""
    for key, value in table.items():
        kind = _TYPES.get(section, {}).get(key)
        if kind is not None and value is not None and not _is(value, kind):
            raise SpecError(f"{where}[{section}] {key} must be {kind} but got {value!r}.")
    if section == "space":
        for key, value in table.items():
            if key == "fix":
                if not isinstance(value, dict):
                    raise SpecError(
                        f"{where}[space] fix must be a table of fixed knobs, e.g. "
                        f"[space.fix] batch_size = 16, but got {value!r}."
                    )
            elif not isinstance(value, (str, list, bool, int)):
                raise SpecError(
                    f'{where}[space] {key} must be {_RANGE} (e.g. "2:12") but got {value!r}.'
                )


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
    sampler: str = SAMPLERS[0]  # structured | tpe | gp | random (search.sampler)
    confirm_rounds: int = 3  # interleaved re-measurement rounds of the finalists
    epochs_planned: int = 300  # epochs of the user's real training, for "time saved"
    seed: int | None = None  # sampler seed
    baselines: bool = True  # enqueue the three baselines first
    probe: bool = True  # probe the largest batch that fits the VRAM cap
    settle: bool = True  # stop before `trials` once the answer is settled (search.settle)
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
    """Values given on the command line (None = not given); a size (``vram_cap``) in bytes,
    read by :func:`parse_size` where it was given."""

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
        raise SpecError(str(e)) from e


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
        _check_types(section, table, f"study spec {path}: ")
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
    file_workload = dict(data.get("workload", {}))
    if "vram_cap" in file_workload:  # the file's is text; the command line's is bytes
        try:
            file_workload["vram_cap"] = parse_size(file_workload["vram_cap"])
        except SpecError as e:  # name the file and the key, as the other spec errors do
            raise SpecError(f"study spec {spec_file}: [workload] vram_cap: {e}") from e
    workload_in = {**file_workload, **_given(overrides.workload)}
    plan_in = {**data.get("plan", {}), **_given(overrides.plan)}
    for section, table in (("study", study), ("workload", workload_in), ("plan", plan_in)):
        _check_types(section, table, "")

    classes = workload_in.pop("classes", None)
    if "format" in workload_in:
        workload_in["data_format"] = workload_in.pop("format")
    if "split" in workload_in:
        workload_in["data_split"] = workload_in.pop("split")
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
    if space.cache and workload.pipeline is not None:
        raise SpecError(
            "the cache search (--search-cache, space cache) applies to the built-in dataset, "
            "not to your pipeline: your dataset factory reads its own data; drop it."
        )
    if space.cache and workload.cache != "none":
        raise SpecError(
            f"--cache {workload.cache} fixes the cache and --search-cache (space cache) "
            "searches it: give one of them (--fix cache=memmap also fixes it)."
        )
    check_emulated_cap(workload, space)

    trials = int(study.get("trials", 40))
    if trials < 1:
        raise SpecError(f"trials must be at least 1 but got {trials}.")
    pruner = str(study.get("pruner", PRUNERS[0]))
    if pruner not in PRUNERS:
        raise SpecError(f"unknown pruner {pruner!r}; choose one of {', '.join(PRUNERS)}.")
    sampler = str(study.get("sampler", SAMPLERS[0]))
    if sampler not in SAMPLERS:
        raise SpecError(f"unknown sampler {sampler!r}; choose one of {', '.join(SAMPLERS)}.")
    rounds = int(study.get("confirm_rounds", 3))
    if rounds < 0:
        raise SpecError(f"confirm_rounds cannot be negative but got {rounds}.")
    epochs_planned = int(study.get("epochs_planned", 300))
    if epochs_planned < 1:
        raise SpecError(f"epochs_planned must be at least 1 but got {epochs_planned}.")
    extra = {
        k: study[k]
        for k in ("baselines", "probe", "allow_mixed_hardware", "settle")
        if k in study
    }
    return StudySettings(
        workload=workload,
        plan=plan,
        space=space,
        trials=trials,
        study_name=study.get("name"),
        storage=storage,
        pruner=pruner,
        sampler=sampler,
        confirm_rounds=rounds,
        epochs_planned=epochs_planned,
        seed=study.get("seed"),
        classes=classes,
        description=str(study.get("description", "")),
        source=spec_file,
        **extra,
    )


def check_emulated_cap(workload: WorkloadSpec, space: SearchSpace) -> None:
    """Refuse a VRAM cap the emulated device cannot fit its smallest batch under. Its memory
    is a formula (``m0 + m1 x batch`` MiB), so this is known before anything is measured or
    created: a study made with such a cap could only fail, and would then refuse the
    corrected cap as a different spec."""
    if not (workload.emulated and workload.vram_cap):
        return
    from loadersearch.measure.shm import fmt_bytes
    from loadersearch.workload.emulated import EmulatedAccelerator

    smallest = space.batch_choices()[0]
    m0, m1 = workload.emulated_mib
    need = EmulatedAccelerator(workload.emulated_ms, workload.emulated_mib, None).memory_bytes(
        smallest
    )
    if need > workload.vram_cap:
        raise SpecError(
            f"not even batch_size={smallest} fits under a VRAM cap of "
            f"{fmt_bytes(workload.vram_cap)}: the emulated device takes {m0:g} + {m1:g} MiB x "
            f"batch = {fmt_bytes(need)} at batch {smallest}. Raise --vram-cap (vram_cap) or "
            "lower --emulated-mib (emulated_mib)."
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


# Workload fields that do not change what a trial measures: a resume may change them without
# splitting the study (e.g. --skip-bad-samples after a run stopped on a bad label).
# Options that do not change what a trial measures, only how: a study resumed with other values
# takes the run's. The precision and its time limit only decide how long a measurement goes on
# to pin the same figure down.
NOT_IDENTITY = {
    "workload": frozenset({"skip_bad_samples", "cache_dir"}),
    "plan": frozenset({"precision", "extend_limit_s"}),
}


def foreign_study_problems(study: Any) -> list[str]:
    """What an Optuna study lacks to be one loadersearch created (empty when it is one): its
    spec (workload, plan, space), a maximised objective, parameters among the five knobs."""
    import optuna

    problems = []
    spec = study.user_attrs.get("spec")
    if not isinstance(spec, dict):
        problems.append("no loadersearch spec (user attribute 'spec': workload, plan, space)")
    else:
        absent = [part for part in ("workload", "plan", "space") if part not in spec]
        if absent:
            problems.append(f"an incomplete spec (no {', '.join(absent)})")
    if list(study.directions) != [optuna.study.StudyDirection.MAXIMIZE]:
        directions = ", ".join(d.name.lower() for d in study.directions)
        problems.append(f"it {directions}s its objective (loadersearch maximises images/s)")
    params = set().union(*(t.params for t in study.get_trials(deepcopy=False)))
    other = sorted(params - set(KNOBS))
    if other:
        problems.append(f"parameters that are not DataLoader knobs ({', '.join(other[:5])})")
    return problems


def require_loadersearch_study(study: Any, url: str) -> None:
    """Refuse (:class:`SpecError`) a study loadersearch did not create, naming what it lacks:
    an answer read from another tool's study would be invented."""
    problems = foreign_study_problems(study)
    if problems:
        raise SpecError(
            f"study {study.study_name!r} in {url} was not created by loadersearch: "
            f"{'; '.join(problems)}. loadersearch reads only its own studies; name one with "
            "--study (optuna-dashboard shows any study)."
        )


def cpu_bound(workload: WorkloadSpec, hardware: Hardware) -> bool:
    """Whether the CPU does the heavy work of this measurement: training on a CPU, or any
    workload on a host without a GPU (its loader decodes ~50-100 img/s at 416 px). Such
    measurements get short plans and small batches."""
    gpu = uses_cuda(workload, hardware)
    return not gpu and (workload.kind == "train" or hardware.gpu_count == 0)


DEFAULT_PRECISION = 0.05  # a study's measurements: the epoch time to +/-5% (90% confidence)


def default_plan(*, small: bool) -> MeasurePlan:
    """Short measurements. Where the CPU does the heavy work (~70 img/s for training at 128 px
    on 2 cores, ~50-100 img/s for the loader at 416 px; less on a busy machine), 2 warm-up
    steps and two short epochs of 4 one-step windows keep a trial to a few seconds and still
    give the pruner 8 paired windows; elsewhere 3 short epochs of 8 steps (MeasurePlan's
    defaults) cut into 12 windows of 2 steps. Either way a configuration with many batches in
    flight measures longer epochs (MeasurePlan.sized_steps), within 8 s each on the CPU (20 s
    elsewhere) at its warm-up's rate, and a measurement whose epochs disagree goes on with more
    epochs until the projected epoch time is known to +/-5% (90% confidence), for at most 8 s
    more on the CPU (20 s elsewhere)."""
    shared = {"windows_per_epoch": 4, "warmup_epochs": 1, "precision": DEFAULT_PRECISION}
    if small:
        return MeasurePlan(
            epochs=2, steps=4, warmup_steps=2, timeout_s=120, epoch_limit_s=8.0,
            extend_limit_s=8.0, **shared,
        )  # fmt: skip
    return MeasurePlan(epochs=3, steps=8, warmup_steps=4, **shared)


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
