"""Study specs: what a study measures, read from a TOML file and command-line overrides.

A spec file (``studies/*.toml``) has up to five tables::

    [study]     StudySettings' options: name, trials, pruner, sampler, settle = false, ...
    [workload]  WorkloadSpec's: kind, data, format, img_size, vram_cap = "6GiB",
                emulated_ms = [a, b], cache = "none" | "ram" | "memmap", ...; and classes
    [plan]      MeasurePlan's: epochs, steps, windows_per_epoch, timeout_s, precision, ...
    [space]     num_workers = "0:16" | [0, 16], batch_size = "8:64:8" | "pow2:8:128",
                prefetch_factor = "1:8", pin_memory = "both" | true | false, ...
    [space.fix] batch_size = 16, ...
    [pipeline]  dataset = "mypkg.data:make_dataset", model, loss, step, collate (your own
                pipeline instead of YOLOv4-tiny); [pipeline.dataset_kwargs] root = "data", ...

The keys of [study], [workload] and [plan] are the options declared on those classes
(:mod:`loadersearch._options`), with their types; any other key is refused by name.
:func:`resolve_settings` turns the file, the command-line overrides and this machine into
:class:`StudySettings`; command-line values win over the file, the file over the defaults.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any

from loadersearch._hardware import Hardware
from loadersearch._options import (
    OFF,
    ON,
    SIZE,
    WHOLE,
    Option,
    check_fields,
    conforms,
    declared,
    describe,
    opt,
)
from loadersearch._options import parse_size as config_parse_size
from loadersearch.errors import SpecError
from loadersearch.measure import MeasurePlan
from loadersearch.search._defaults import cpu_bound, default_space, study_plan_with
from loadersearch.search._space import SearchSpace
from loadersearch.search._space_text import KNOBS, SpaceError
from loadersearch.workload import PipelineSpec, WorkloadSpec, check_gpus

PRUNERS = ("wilcoxon", "median", "none")
SAMPLERS = ("structured", "tpe", "gp", "random")  # the first is the default (landscape zoo)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclass(frozen=True)
class StudySettings:
    """Everything a study run needs; the spec part (workload, plan, space) is stored in the
    study so that a resume or another machine rebuilds the same objective."""

    workload: WorkloadSpec
    plan: MeasurePlan
    space: SearchSpace
    trials: int = opt(  # finished trials the study should hold in total
        40, kind=WHOLE, low=1,
        help="The most finished trials the study may hold in total (default {default}): it "
        "stops earlier once its answer is settled (see --no-settle); a resumed study runs only "
        "the difference, and a larger --trials goes on past a settled answer.",
    )  # fmt: skip
    study_name: str | None = opt(  # None = derived from workload and hardware
        None, flags=("--study",), key="name", api="study",
        help="Study name (default: from workload and hardware).",
    )  # fmt: skip
    storage: str | None = opt(  # None = $LOADERSEARCH_STORAGE or the default SQLite file
        None, spec=False,
        help="Optuna storage URL (default $LOADERSEARCH_STORAGE or "
        "sqlite:///studies/loadersearch.db); postgresql+psycopg://USER@HOST/DB or "
        "mysql+pymysql://... for a study shared by several machines.",
    )  # fmt: skip
    pruner: str = opt(
        PRUNERS[0], choices=PRUNERS, noun="pruner",
        help="wilcoxon (default): prune a trial only when it is clearly (>5%, p<0.1) slower "
        "than the best, window by window; median: Optuna's MedianPruner; none: no pruning.",
    )  # fmt: skip
    sampler: str = opt(  # search.sampler
        SAMPLERS[0], choices=SAMPLERS, noun="sampler",
        help="structured (default): a search that knows the problem's shape (workers on a "
        "ladder from the best baseline's count, the middle batch first, then the smaller "
        "knobs); tpe, gp: Optuna's TPE and Gaussian-process samplers; random. None measures a "
        "configuration twice.",
    )  # fmt: skip
    confirm_rounds: int = opt(  # interleaved re-measurement rounds of the finalists
        3, kind=WHOLE, low=0,
        help="Interleaved re-measurements of the finalists (default {default}; 0 = none).",
    )  # fmt: skip
    epochs_planned: int = opt(  # epochs of the user's real training, for "time saved"
        300, kind=WHOLE, low=1,
        help="Epochs of your real training, for the time saved (default {default}).",
    )  # fmt: skip
    seed: int | None = opt(None, kind=WHOLE, help="Sampler seed.")
    baselines: bool = opt(  # enqueue the three baselines first
        True, kind=OFF, flags=("--no-baselines",), help="Do not enqueue the baselines first."
    )
    probe: bool = opt(  # probe the largest batch that fits the VRAM cap
        True, kind=OFF, flags=("--no-probe",),
        help="Do not probe the largest batch under the VRAM cap (over-cap trials become "
        "infeasible).",
    )  # fmt: skip
    settle: bool = opt(  # stop before `trials` once the answer is settled (search.settle)
        True, kind=OFF, flags=("--no-settle",),
        help="Spend the whole --trials budget, even once the answer is settled (by default the "
        "study stops when none of the last 16 trials measured above the best, after at least "
        "14 trials that cover the space). Same as settle = false in a spec's [study].",
    )  # fmt: skip
    # informational: classes of the user's dataset, in the spec file's [workload]
    classes: int | None = opt(None, kind=WHOLE, section="workload", flags=(), api=None)
    description: str = opt("", flags=(), api=None)  # a spec file's words about the study
    source: str | None = None  # the spec file, if any
    # Join a study created on another hardware class: a choice of this run, not of the study.
    allow_mixed_hardware: bool = opt(
        False, kind=ON, spec=False,
        help="Join a study created on another hardware class (GPU model, GPU or CPU count) "
        "anyway; each trial records its host and the differences.",
    )  # fmt: skip

    def __post_init__(self) -> None:
        try:
            check_fields(self)
        except ValueError as e:
            raise SpecError(str(e)) from e

    def spec_dict(self) -> dict[str, Any]:
        """The part that must not change inside one study."""
        return {
            "workload": self.workload.to_dict(),
            "plan": self.plan.to_dict(),
            "space": self.space.to_dict(),
        }


# The spec file's tables and keys: each declared option's key (and other keys) in its
# table, a [workload] key of StudySettings too (classes); {table: {key: (class, field, option)}}.
# The command line's and the API's values (Overrides) are keyed the same way.
_OWNERS = {"study": StudySettings, "workload": WorkloadSpec, "plan": MeasurePlan}
_KEYS: dict[str, dict[str, tuple[type, str, Option]]] = {section: {} for section in _OWNERS}
for _section, _owner in _OWNERS.items():
    for _name, _option in declared(_owner).items():
        for _key in (_option.key or _name, *_option.keys):
            _KEYS[_option.section or _section][_key] = (_owner, _name, _option)
SPEC_SECTIONS = {
    **{section: {k for k, v in keys.items() if v[2].spec} for section, keys in _KEYS.items()},
    "space": set(KNOBS) | {"fix"},
    "pipeline": set(declared(PipelineSpec)),  # checked by PipelineSpec itself
}
_RANGE = "a range"


def _check_types(section: str, table: dict[str, Any], where: str) -> None:
    """Refuse a value of the wrong type, naming the key, what it must be and what it is. TOML
    has types of its own, so `trials = "abc"` or `steps = "many"` must be refused by name here
    rather than fail later inside int() or a comparison."""
    for key, value in table.items():
        known = _KEYS.get(section, {}).get(key)
        if known is not None and value is not None and not conforms(value, known[2].kind):
            kind = describe(known[2].kind)
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


def _fields(section: str, table: dict[str, Any]) -> dict[type, dict[str, Any]]:
    """A table's values (checked by :func:`_check_types`) by the class and field they set:
    ``format`` sets WorkloadSpec's data_format, [workload] classes StudySettings' classes."""
    out: dict[type, dict[str, Any]] = {}
    for key, value in table.items():
        owner, name, option = _KEYS[section][key]
        if option.kind == WHOLE and value is not None:
            value = int(value)  # TOML's 40.0
        out.setdefault(owner, {})[name] = value
    return out


@dataclass
class Overrides:
    """Values given on the command line (None = not given); a size (``vram_cap``) in bytes,
    read by :func:`parse_size` where it was given."""

    study: dict[str, Any] = field(default_factory=dict)
    workload: dict[str, Any] = field(default_factory=dict)
    plan: dict[str, Any] = field(default_factory=dict)
    space_ranges: dict[str, Any] = field(default_factory=dict)  # text, or lists
    space_fixed: dict[str, str] = field(default_factory=dict)
    # PipelineSpec fields: references ("module:qualname") and *_kwargs; kwargs merge into the
    # file's key by key
    pipeline: dict[str, Any] = field(default_factory=dict)


def parse_size(text: str | int | float | None) -> int | None:
    """Bytes from ``"6GiB"``, ``"6 GB"``, ``"512MiB"``, ``6442450944`` (None stays None); see
    :func:`loadersearch._options.parse_size`."""
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
    except UnicodeDecodeError as e:
        raise SpecError(
            f"study spec {path} is not UTF-8 text (byte {e.start}: {e.reason}); save it as "
            "UTF-8, as TOML requires."
        ) from e
    for section, table in data.items():
        if section not in SPEC_SECTIONS:
            raise SpecError(
                f"study spec {path}: unknown table [{section}]; use "
                f"{', '.join(f'[{s}]' for s in SPEC_SECTIONS)}."
            )
        if not isinstance(table, dict):
            raise SpecError(f"study spec {path}: {section} must be a table ([{section}]).")
        unknown = set(table) - SPEC_SECTIONS[section]
        if unknown:
            raise SpecError(
                f"study spec {path}: unknown key(s) {', '.join(sorted(unknown))} in "
                f"[{section}]; known keys: {', '.join(sorted(SPEC_SECTIONS[section]))}."
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
    values = _merged_values(data, overrides, spec_file)
    study_in = values.get(StudySettings, {})
    workload_in = values.get(WorkloadSpec, {})
    plan_in = values.get(MeasurePlan, {})
    data_dir = workload_in.get("data")
    if data_dir:
        workload_in["data"] = _dataset_dir(data_dir, overrides, base)
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
        plan = study_plan_with(plan_in, small=small)
    except (TypeError, ValueError) as e:
        raise SpecError(f"plan: {e}") from e

    space = _space(default_space(hardware, small=small, ranks=workload.gpus), data, overrides)
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

    return StudySettings(
        workload=workload,
        plan=plan,
        space=space,
        storage=storage,
        source=spec_file,
        **study_in,  # checked by StudySettings itself (trials, pruner, sampler, ...)
    )


def _merged_values(
    data: dict[str, Any], overrides: Overrides, spec_file: str | None
) -> dict[type, dict[str, Any]]:
    """The [study], [workload] and [plan] values of the spec file ``data`` with the command
    line's over them, checked, by the class and field they set."""
    values: dict[type, dict[str, Any]] = {}
    for section in _OWNERS:
        table = dict(data.get(section, {}))
        for key, value in table.items():
            if _KEYS[section][key][2].kind == SIZE:  # the file's is text; the command line's bytes
                try:
                    table[key] = parse_size(value)
                except SpecError as e:  # name the file and the key, as the other spec errors do
                    raise SpecError(f"study spec {spec_file}: [{section}] {key}: {e}") from e
        table = {**table, **_given(getattr(overrides, section))}
        _check_types(section, table, "")
        for owner, fields in _fields(section, table).items():
            values.setdefault(owner, {}).update(fields)
    return values


def _dataset_dir(data_dir: str, overrides: Overrides, base: str) -> str:
    """The dataset directory, absolute, refused when it does not exist."""
    # Relative paths in a spec file are relative to the file; on the command line, to cwd.
    from_file = "data" not in _given(overrides.workload)
    path = os.path.join(base, data_dir) if from_file else data_dir
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(path):
        raise SpecError(
            f"dataset directory {path} does not exist; check --data (or [workload] data), "
            "or run `loadersearch make-dataset` to generate one."
        )
    return path


def _space(space: SearchSpace, data: dict[str, Any], overrides: Overrides) -> SearchSpace:
    """``space`` (this machine's default) with the spec file's [space] ranges and fixed knobs,
    then the command line's, applied."""
    space_in = dict(data.get("space", {}))
    fixed_in = {k: v for k, v in dict(space_in.pop("fix", {})).items()}
    cli_ranged, cli_fixed = overrides.space_ranges, overrides.space_fixed
    # The command line's range or value of a knob replaces the file's, either kind
    ranged = {**{k: v for k, v in space_in.items() if k not in cli_fixed}, **cli_ranged}
    fixed = {**{k: v for k, v in fixed_in.items() if k not in cli_ranged}, **cli_fixed}
    both = sorted(set(ranged) & set(fixed))
    if both:  # given both ways in one place: which did the user mean?
        knob = both[0]
        raise SpecError(
            f"{knob} is both searched ({knob}={ranged[knob]}) and fixed ({knob}="
            f"{fixed[knob]}); give it a range (--space) or one value (--fix), not both."
        )
    try:
        for knob, text in ranged.items():
            space = space.with_range(knob, text)  # text, or a TOML list
        for knob, value in fixed.items():
            space = space.with_fixed(knob, value)
    except SpaceError as e:
        raise SpecError(str(e)) from e
    given = [k for k in WORKER_ONLY if k in ranged or k in fixed]
    if space.num_workers[1] == 0 and given:
        raise SpecError(
            f"{given[0]} applies only with num_workers > 0, but num_workers is 0 in this "
            f"space; drop {given[0]}, or search num_workers (e.g. --space num_workers=0:8)."
        )
    return space


# The loader knobs that mean nothing without worker processes (bench refuses them too).
WORKER_ONLY = ("prefetch_factor", "persistent_workers", "start_method")


def check_emulated_cap(workload: WorkloadSpec, space: SearchSpace) -> None:
    """Refuse a VRAM cap the emulated device cannot fit its smallest batch under. Its memory
    is a formula (``m0 + m1 x batch`` MiB), so this is known before anything is measured or
    created: a study made with such a cap could only fail, and would then refuse the
    corrected cap as a different spec."""
    if not (workload.emulated and workload.vram_cap):
        return
    from loadersearch._units import fmt_bytes
    from loadersearch.workload import EmulatedAccelerator

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
    from loadersearch.workload import check_refs

    check_refs(pipeline)
    return pipeline


def _given(values: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
