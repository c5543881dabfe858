"""Each option is declared once (loadersearch/_options.py): walk the declarations and check that
every user-facing option reaches the command line, the spec file and the Python API, with one
default and one help text."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
from click.testing import CliRunner

from loadersearch import _api as api
from loadersearch._hardware import Hardware
from loadersearch._loader_config import LoaderConfig
from loadersearch._options import (
    FLAG,
    OFF,
    ON,
    PAIR,
    REF,
    SIZE,
    WHOLE,
    declared,
    default_of,
    help_of,
)
from loadersearch.cli import DeclaredOption, cli
from loadersearch.errors import SpecError
from loadersearch.measure import MeasurePlan
from loadersearch.search import (
    KNOBS,
    SPEC_SECTIONS,
    Overrides,
    StudySettings,
    load_spec_file,
    resolve_settings,
)
from loadersearch.workload import PipelineSpec, WorkloadSpec

OWNERS = (LoaderConfig, WorkloadSpec, PipelineSpec, MeasurePlan, StudySettings)
SECTION = {
    WorkloadSpec: "workload",
    PipelineSpec: "pipeline",
    MeasurePlan: "plan",
    StudySettings: "study",
}
# Fields that are not options: set by loadersearch itself, or through a table of their own.
INTERNAL = {
    (WorkloadSpec, "pipeline"),  # PipelineSpec's options: [pipeline], --dataset, tune(dataset=)
    (MeasurePlan, "projection"),
    (MeasurePlan, "extra"),
    (StudySettings, "workload"),
    (StudySettings, "plan"),
    (StudySettings, "space"),
    (StudySettings, "source"),
}
# Options deliberately not on every surface, each with its reason: a new one is a decision.
NO_FLAG = {
    (WorkloadSpec, "seed"),  # --seed is the sampler's; the dataset's seed is a spec's
    (MeasurePlan, "stall_s"),  # the hang detector's limit: a spec file's or plan={...}
    (StudySettings, "classes"),  # informational, in a spec file's [workload]
    (StudySettings, "description"),  # a spec file's words about the study
    (LoaderConfig, "cache"),  # bench's and run's --cache is the workload's
    # a pipeline part's keyword arguments: --arg PART.KEY=VALUE
    *((PipelineSpec, f"{p}_kwargs") for p in ("dataset", "collate", "model", "loss", "step")),
}
NOT_IN_SPEC = {
    (StudySettings, "storage"),  # where the study is, not what it is
    (StudySettings, "allow_mixed_hardware"),  # a choice of one run, not of the study
}
NOT_IN_API = {
    (WorkloadSpec, "seed"),
    (StudySettings, "classes"),
    (StudySettings, "description"),
    # partial(loss, ...) or partial(step, ...) binds them (tune's collate_fn too)
    (PipelineSpec, "collate_kwargs"),
    (PipelineSpec, "loss_kwargs"),
    (PipelineSpec, "step_kwargs"),
}
COMMANDS = ("run", "bench", "diagnose", "worker", "confirm", "report", "best", "dashboard")


def options() -> list[tuple[type, str]]:
    return [(owner, name) for owner in OWNERS for name in declared(owner)]


def derived_params() -> dict[str, list[DeclaredOption]]:
    """Each command's options derived from a declaration."""
    return {
        name: [p for p in cli.commands[name].params if isinstance(p, DeclaredOption)]
        for name in COMMANDS
        if name in cli.commands
    }


def sample(owner: type, name: str):
    """A value a spec file may give option ``name``: its default, or one of its kind."""
    o = declared(owner)[name]
    value = default_of(owner, name)
    if o.kind == REF:
        return "mypkg.data:make_dataset"
    if o.kind == SIZE:
        return "6GiB"
    if o.kind == PAIR:
        return list(value)
    if value is None:
        return o.choices[0] if o.choices else {WHOLE: 64}.get(o.kind, "x")
    return value


def test_every_field_is_an_option_or_internal() -> None:
    for owner in OWNERS:
        for f in dataclasses.fields(owner):
            assert (f.name in declared(owner)) != ((owner, f.name) in INTERNAL), (owner, f.name)


@pytest.mark.parametrize(("owner", "name"), options(), ids=lambda x: getattr(x, "__name__", x))
def test_an_option_reaches_the_command_line_with_its_declared_help_and_no_default(owner, name):
    o = declared(owner)[name]
    flags = o.cli_flags(name)
    assert bool(flags) != ((owner, name) in NO_FLAG)
    if not flags:
        return
    found = {
        command: p
        for command, params in derived_params().items()
        for p in params
        if p.declaration[:2] == (owner, name)
    }
    assert found, f"no command takes {flags[0]}"
    for command, param in found.items():
        assert param.opts[0] == flags[0].split("/")[0]
        text = CliRunner().invoke(cli, [command, "--help"], terminal_width=200).output
        assert flags[0].split("/")[0] in text, command
        if param.declaration[2]:  # the declared help, word for word
            assert param.help == help_of(owner, name), command
        # One default: a command's own is "not given" (or the field's, shown, in bench)
        switch = o.kind in (FLAG, OFF, ON) and "/" not in flags[0]
        assert param.default in (None, default_of(owner, name)) or switch, command


@pytest.mark.parametrize(("owner", "name"), options(), ids=lambda x: getattr(x, "__name__", x))
def test_an_option_reaches_the_spec_file(owner, name, tmp_path) -> None:
    o = declared(owner)[name]
    assert o.spec != ((owner, name) in NOT_IN_SPEC)
    if owner is LoaderConfig:  # the knobs: [space] and [space.fix]
        assert name in KNOBS
        return
    section = o.section or SECTION[owner]
    key = o.key or name
    assert (key in SPEC_SECTIONS[section]) == o.spec
    if not o.spec:
        return
    value = sample(owner, name)
    text = value if not isinstance(value, str) else f'"{value}"'
    text = str(text).lower() if isinstance(value, bool) else text
    spec = tmp_path / "spec.toml"
    spec.write_text(f"[{section}]\n{key} = {text}\n")
    assert load_spec_file(str(spec)) == {section: {key: value}}


@pytest.mark.parametrize(("owner", "name"), options(), ids=lambda x: getattr(x, "__name__", x))
def test_an_option_reaches_the_api_with_the_same_default(owner, name) -> None:
    o = declared(owner)[name]
    assert (o.api_name(name) is None) == ((owner, name) in NOT_IN_API)
    if o.api_name(name) is None:
        return
    if owner is LoaderConfig:  # bench(config={...}), tune(space=..., fix=...)
        assert name in KNOBS and LoaderConfig(**{name: default_of(owner, name)})
        return
    if owner is MeasurePlan:  # plan={...}
        assert api._plan_options({name: default_of(owner, name)}) == {
            name: default_of(owner, name)
        }
        return
    functions = (api.tune, api.bench) if owner in (WorkloadSpec, PipelineSpec) else (api.tune,)
    for function in functions:
        parameter = inspect.signature(function).parameters[o.api_name(name)]
        assert parameter.kind is inspect.Parameter.KEYWORD_ONLY or name == "dataset"
        # None is "not given": the spec file's or the field's default applies
        expected = default_of(owner, name) if o.kind in (OFF, ON) else None
        assert parameter.default == expected, function.__name__


def test_the_api_takes_no_workload_or_study_argument_that_is_not_declared() -> None:
    declared_names = {
        o.api_name(n) for owner in OWNERS for n, o in declared(owner).items() if o.api_name(n)
    }
    others = {"space", "fix", "plan", "config", "spec_file", "progress", "verbose", "on_window"}
    for function in (api.tune, api.bench):
        names = set(inspect.signature(function).parameters)
        assert names - declared_names - others == set(), function.__name__


def test_a_help_text_is_the_same_in_every_command_that_derives_it() -> None:
    helps: dict[tuple[type, str], set[str]] = {}
    for params in derived_params().values():
        for p in params:
            if p.declaration[2]:
                helps.setdefault(p.declaration[:2], set()).add(p.help)
    assert helps and all(len(texts) == 1 for texts in helps.values())


def test_the_help_states_the_one_default() -> None:
    assert "(default 40)" in help_of(StudySettings, "trials")
    assert "(default 3;" in help_of(StudySettings, "confirm_rounds")
    assert "(default 300)" in help_of(StudySettings, "epochs_planned")
    assert "[default: 4,7]" in help_of(WorkloadSpec, "emulated_ms")
    assert "[default: 300;" in help_of(MeasurePlan, "timeout_s")
    text = CliRunner().invoke(cli, ["bench", "--help"], terminal_width=200).output
    assert "[default: 16; x>=1]" in text  # --batch-size, LoaderConfig's default


@pytest.mark.parametrize(
    ("table", "key"), [("plan", "projection"), ("plan", "extra"), ("workload", "pipeline")]
)
def test_an_internal_field_in_a_spec_file_is_an_unknown_key(tmp_path, table, key) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(f"[{table}]\n{key} = 1\n")
    with pytest.raises(SpecError, match=rf"unknown key\(s\) {key} in \[{table}\]; known keys"):
        load_spec_file(str(spec))


def test_a_toml_list_is_taken_as_a_list_and_the_study_switches_are_read(tmp_path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text(
        "[study]\nsettle = false\nprobe = false\n"
        '[space]\nnum_workers = [0, 3]\nbatch_size = ["pow2", 8, 32]\npin_memory = [false, true]\n'
        'start_method = ["fork", "spawn"]\n'
    )
    hardware = Hardware(cpu_count=4, physical_cores=2, ram_bytes=8 * 2**30, gpu_count=0)
    settings = resolve_settings(str(spec), Overrides(), hardware=hardware)
    assert settings.space.num_workers == (0, 3)
    assert settings.space.batch_choices() == [8, 16, 32]
    assert settings.space.pin_memory == (False, True)
    assert settings.space.start_method == ("fork", "spawn")
    assert settings.settle is False and settings.probe is False and settings.baselines is True


def test_the_study_settings_are_checked_with_the_field_s_name() -> None:
    hardware = Hardware(cpu_count=4, physical_cores=2, ram_bytes=8 * 2**30, gpu_count=0)
    for study, match in (
        ({"trials": 0}, "trials must be at least 1 but got 0"),
        ({"confirm_rounds": -1}, "confirm_rounds cannot be negative"),
        ({"sampler": "grid"}, "Unknown sampler 'grid'; choose one of structured"),
    ):
        with pytest.raises(SpecError, match=match):
            resolve_settings(None, Overrides(study=study), hardware=hardware)
