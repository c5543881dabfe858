"""The commands' options. Those of a dataclass field (the loader knobs, the workload, the plan,
the study) are derived from its declaration (:mod:`loadersearch._options`): flags, type, help
and bounds are written there once; :func:`option` makes the click option, :func:`given_values`
reads what was given back as the spec file keys it. The rest belong to one command or to its
way of running (--no-wait, the pipeline's references and trust)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import click

from loadersearch._loader_config import LoaderConfig
from loadersearch._options import (
    DIR,
    FLAG,
    NUMBER,
    OFF,
    ON,
    PAIR,
    PATH,
    SIZE,
    WHOLE,
    Option,
    declared,
    default_of,
    help_of,
    parse_size,
)
from loadersearch.errors import LoaderSearchError
from loadersearch.measure import MeasurePlan
from loadersearch.search import StudySettings
from loadersearch.workload import PIPELINE_PARTS, PipelineSpec, WorkloadSpec

no_wait_option = click.option(
    "--no-wait",
    is_flag=True,
    help="Exit at once if another loadersearch measurement is running on this host, "
    "instead of waiting for it.",
)


def pipeline_trust(opts: dict[str, Any]) -> Any:
    """The :class:`~loadersearch.workload._stored_refs.PipelineTrust` of ``--pipeline-path`` and
    ``--trust-pipeline``, removed from ``opts``."""
    from loadersearch.workload import PipelineTrust

    return PipelineTrust(
        paths=tuple(opts.pop("pipeline_paths", ()) or ()),
        everything=bool(opts.pop("trust_pipeline", False)),
    )


class SizeType(click.ParamType):
    """A size such as 6GiB, 6G or 6000MiB (see :func:`loadersearch._options.parse_size`)."""

    name = "SIZE"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201 - click's signature
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except ValueError as e:
            self.fail(str(e), param, ctx)


class PairType(click.ParamType):
    """Two numbers separated by a comma, e.g. ``20,2``."""

    name = "A,B"

    def convert(self, value, param, ctx):  # noqa: ANN001, ANN201
        if isinstance(value, tuple):
            return value
        try:
            a, b = (float(x) for x in str(value).split(","))
        except ValueError:
            self.fail(f"{value!r} is not two numbers separated by a comma, e.g. 20,2", param, ctx)
        if not (math.isfinite(a) and math.isfinite(b)) or min(a, b) < 0:
            # float() reads "nan" and "inf"; a step time or a size must be a real amount.
            self.fail(
                f"{value!r}: both numbers must be finite and not negative, e.g. 20,2", param, ctx
            )
        return (a, b)


def _apply(options: list[Callable]) -> Callable:
    def decorate(f: Callable) -> Callable:
        for option in reversed(options):
            f = option(f)
        return f

    return decorate


pipeline_trust_options = _apply(
    [
        click.option(
            "--pipeline-path",
            "pipeline_paths",
            multiple=True,
            type=click.Path(exists=True, file_okay=False),
            metavar="DIR",
            help="A directory whose modules a study's stored pipeline may import, besides the "
            "working directory (a database holds data, not code: its references are imported "
            "only from your own code). Repeatable.",
        ),
        click.option(
            "--trust-pipeline",
            is_flag=True,
            help="Import the study's stored pipeline from wherever it resolves, installed "
            "packages too (never the standard library): only for a database you trust, since "
            "whoever writes to it chooses what runs. Prints what it trusts.",
        ),
    ]
)

class DeclaredOption(click.Option):
    """A command-line option derived from a field's :class:`~loadersearch._options.Option`;
    ``declaration`` is (the dataclass, the field's name, whether the help is the field's)."""

    def __init__(self, *args: Any, declaration: tuple[type, str, bool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.declaration = declaration


def _click_type(o: Option) -> Any:
    if o.choices:
        return click.Choice(o.choices)
    if o.kind == WHOLE:
        return int if o.low is None and o.high is None else click.IntRange(o.low, o.high)
    if o.kind == NUMBER:
        if o.low is None and o.high is None:
            return float
        return click.FloatRange(o.low, o.high, min_open=o.low_open, max_open=o.high_open)
    paths = {PATH: click.Path(), DIR: click.Path(file_okay=False)}
    return {SIZE: SizeType(), PAIR: PairType(), **paths}.get(o.kind)


def option(
    owner: type, name: str, *, help: str | None = None, default: Any = None, **kw: Any
) -> Callable:
    """The click option of field ``name`` of dataclass ``owner``, as its declaration says:
    its flags, type and help (``help`` instead, for a command that says it otherwise); its
    default ``default`` (None: "not given", the spec file's or the field's default applies)."""
    o = declared(owner)[name]
    flags = o.cli_flags(name)
    if o.kind in (FLAG, OFF, ON):
        if "/" not in flags[0]:  # else --x/--no-x: True, False or not given
            kw.setdefault("is_flag", True)
        if o.kind in (OFF, ON):
            default = False  # given or not
    elif _click_type(o) is not None:
        kw["type"] = _click_type(o)
    if o.metavar:
        kw["metavar"] = o.metavar
    return click.option(
        *flags,
        o.dest or name,
        cls=DeclaredOption,
        declaration=(owner, name, help is None),
        default=default,
        help=help_of(owner, name) if help is None else help,
        **kw,
    )


def options_of(owner: type, *, exclude: tuple[str, ...] = ()) -> list[Callable]:
    """The click options of every declared field of ``owner`` that has a flag."""
    return [
        option(owner, name)
        for name, o in declared(owner).items()
        if o.cli_flags(name) and name not in exclude
    ]


def keys_of(owner: type) -> tuple[str, ...]:
    """The command's parameter names of ``owner``'s options (see :func:`given`)."""
    return tuple(o.dest or name for name, o in declared(owner).items() if o.cli_flags(name))


storage_option = option(StudySettings, "storage")
allow_mixed_hardware_option = option(StudySettings, "allow_mixed_hardware")


def study_option(help: str = "Study name (default: the only one in the storage).", **kw: Any):
    """``--study``, with the help of the command that takes it."""
    return option(StudySettings, "study_name", help=help, **kw)


def given_values(opts: dict[str, Any], owner: type) -> dict[str, Any]:
    """The options of ``owner`` that were given, removed from ``opts``, keyed as a spec file
    keys them (:class:`~loadersearch.search._settings.Overrides`): a switch given (--no-probe,
    --allow-mixed-hardware) is its value, one not given is not."""
    out: dict[str, Any] = {}
    for name, o in declared(owner).items():
        dest = o.dest or name
        if not o.cli_flags(name) or dest not in opts:
            continue
        value = opts.pop(dest)
        if o.kind in (OFF, ON):
            value = (o.kind == ON) if value else None
        if value is not None:
            out[o.key or name] = value
    return out


def loader_options(
    *, defaults: bool, exclude: tuple[str, ...] = (), help: dict[str, str] | None = None
) -> Callable:
    """The loader knobs (LoaderConfig) of bench (``defaults``: the field's, shown) and
    diagnose (None: not given); ``help`` for a command that says one otherwise."""
    names = [n for n, o in declared(LoaderConfig).items() if o.cli_flags(n) and n not in exclude]
    return _apply(
        [
            option(
                LoaderConfig,
                name,
                help=(help or {}).get(name),
                default=default_of(LoaderConfig, name) if defaults else None,
                show_default=defaults,
            )
            for name in names
        ]
    )


# What a measurement trains on (WorkloadSpec), shared by run, bench and diagnose. Every default
# is None ("not given"): a study spec file or WorkloadSpec's own default applies.
workload_options = _apply(
    [
        *options_of(WorkloadSpec),
        # Your own pipeline (PipelineSpec): references the measuring process imports.
        *options_of(PipelineSpec),
        click.option(
            "--arg",
            "pipeline_args",
            multiple=True,
            metavar="PART.KEY=VALUE",
            help="A keyword argument of a pipeline part, e.g. dataset.root=data/pets or "
            "model.num_classes=37 (VALUE is read as JSON when it parses, else as text). "
            "Repeatable.",
        ),
    ]
)
WORKLOAD_KEYS = keys_of(WorkloadSpec)


def pipeline_given(opts: dict[str, Any]) -> dict[str, Any]:
    """The pipeline options that were given, as PipelineSpec fields, removed from ``opts``."""
    found = {part: opts.pop(f"pipeline_{part}", None) for part in PIPELINE_PARTS}
    out: dict[str, Any] = {k: v for k, v in found.items() if v is not None}
    for text in opts.pop("pipeline_args", ()) or ():
        part, key, value = parse_arg(text)
        out.setdefault(f"{part}_kwargs", {})[key] = value
    return out


def parse_arg(text: str) -> tuple[str, str, Any]:
    """``"dataset.root=data"`` -> ``("dataset", "root", "data")``; the value as JSON when it
    parses (``10``, ``true``, ``[1, 2]``), else as text."""
    name, sep, raw = text.partition("=")
    part, dot, key = name.strip().partition(".")
    if not sep or not dot or part not in PIPELINE_PARTS or not key.isidentifier():
        raise click.BadParameter(
            f"{text!r} is not PART.KEY=VALUE with PART one of {', '.join(PIPELINE_PARTS)}, "
            "e.g. dataset.root=data/pets or model.num_classes=37.",
            param_hint="--arg",
        )
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return part, key, value


# How long a measurement runs (MeasurePlan), shared by run, bench and diagnose; None = not given.
plan_options = _apply(options_of(MeasurePlan))
PLAN_KEYS = keys_of(MeasurePlan)


def given(opts: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    """The options among ``keys`` that were given (not None), removed from ``opts``."""
    found = {k: opts.pop(k) for k in keys if k in opts}
    return {k: v for k, v in found.items() if v is not None}


def study_plan(spec: WorkloadSpec, hardware: Any, plan_in: dict[str, Any]) -> MeasurePlan:
    """A study's default plan for this machine and workload (search.default_plan), with the
    options given: what `run`, `diagnose` and `bench` measure with."""
    from loadersearch.search import cpu_bound, study_plan_with

    try:
        return study_plan_with(plan_in, small=cpu_bound(spec, hardware))
    except ValueError as e:
        raise LoaderSearchError(f"invalid plan: {e}") from e
