"""``loadersearch run --ultralytics DATA.yaml``: the run command's options turned into
:func:`loadersearch.integrations.ultralytics.tune`'s arguments, the studies' progress shown
as ``run`` shows it, the answer printed in Ultralytics' terms."""

from __future__ import annotations

from typing import Any

import click

from loadersearch import MeasurePlan, WorkloadSpec
from loadersearch._options import OFF, ON, declared, default_of
from loadersearch.search import StudySettings
from loadersearch.workload import PIPELINE_PARTS


def api_options(opts: dict[str, Any], owner: type) -> dict[str, Any]:
    """The options of ``owner`` that were given, removed from ``opts``, keyed as
    :func:`loadersearch.tune` takes them (a switch given is its non-default value)."""
    out: dict[str, Any] = {}
    for name, o in declared(owner).items():
        dest = o.dest or name
        if not o.cli_flags(name) or dest not in opts:
            continue
        value = opts.pop(dest)
        if value is None or (o.kind in (OFF, ON) and not value):
            continue
        if o.kind in (OFF, ON):
            value = o.kind == ON
        out[o.api_name(name) or name] = value
    return out


def run_ultralytics(
    data: str,
    opts: dict[str, Any],
    *,
    imgsz: int | None,
    cache: str | None,
    spec_file: str | None,
    quiet: bool,
    no_wait: bool,
) -> None:
    """``run``'s remaining ``opts`` (click's parameter names) for the Ultralytics studies."""
    from loadersearch import measurement_lock
    from loadersearch.integrations import ultralytics as ul

    if opts.pop("search_cache", False):
        raise click.UsageError(
            "--search-cache searches the built-in dataset's cache; with --ultralytics their "
            "cache is --ultralytics-cache false,ram,disk."
        )
    if opts.get("img_size") is not None:
        raise click.UsageError(
            "--img-size is the built-in workload's; with --ultralytics: --imgsz."
        )
    model = _model(opts)
    hyp = _hyp(opts)
    space, fix = _space_and_fix(opts)
    options = {
        **api_options(opts, StudySettings),
        **api_options(opts, WorkloadSpec),
        "space": space,
        "fix": fix,
    }
    plan = api_options(opts, MeasurePlan)
    if plan:
        options["plan"] = plan
    if spec_file:
        options["spec_file"] = spec_file
    unknown = sorted(k for k, v in opts.items() if v not in (None, False, ()))
    if unknown:  # an option of run this path does not read: refused, not ignored
        raise click.UsageError(f"{', '.join(unknown)}: not an option of --ultralytics.")
    if no_wait:
        with measurement_lock(wait=False):
            pass
    arguments: dict[str, Any] = {"model": model, "hyp": hyp}
    if imgsz is not None:
        arguments["imgsz"] = imgsz
    if cache is not None:
        arguments["cache"] = cache
    result = ul.tune(
        data,
        **arguments,
        progress=lambda choice, trials: ul.study_progress(choice, trials, quiet=quiet, err=False),
        **options,
    )
    click.echo(result.report())


def _model(opts: dict[str, Any]) -> str:
    """``--model`` (taken out of ``opts``; their spec's default without it), the one pipeline
    part given with --ultralytics: the others are refused."""
    from loadersearch.integrations import ultralytics as ul

    parts = {p: opts.pop(f"pipeline_{p}", None) for p in PIPELINE_PARTS}
    model = parts.pop("model") or default_of(ul.UltralyticsSpec, "model")
    given = [f"--{p}" for p, v in parts.items() if v is not None]
    if given:
        raise click.UsageError(
            f"{', '.join(given)}: --ultralytics builds the pipeline itself (their dataset, "
            "collate, model and loss); drop it, or drop --ultralytics to tune your own."
        )
    return model


def _hyp(opts: dict[str, Any]) -> dict[str, Any]:
    """Their training hyperparameters, from ``--arg dataset.KEY=VALUE`` (taken out of
    ``opts``); another part's ``--arg`` is refused."""
    from loadersearch.cli._options import parse_arg

    hyp: dict[str, Any] = {}
    for text in opts.pop("pipeline_args", ()) or ():
        part, key, value = parse_arg(text)
        if part != "dataset":
            raise click.BadParameter(
                f"{text!r}: with --ultralytics, --arg dataset.KEY=VALUE sets one of their "
                "training hyperparameters (dataset.mosaic=0.5).",
                param_hint="--arg",
            )
        hyp[key] = value
    return hyp


def _space_and_fix(opts: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``--space`` and ``--fix`` (taken out of ``opts``), each a knob and its values."""
    from loadersearch.search import SpaceError, parse_assignment

    space: dict[str, Any] = {}
    fix: dict[str, Any] = {}
    try:
        for text in opts.pop("fixes", ()):
            knob, value = parse_assignment(text)
            fix[knob] = value
        for text in opts.pop("ranges", ()):
            knob, value = parse_assignment(text)
            space[knob] = value
    except SpaceError as e:
        raise click.BadParameter(str(e), param_hint="--fix/--space") from e
    return space, fix
