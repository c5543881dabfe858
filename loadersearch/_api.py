"""The Python API: tune the DataLoader of your own pipeline from a script.

::

    import torch
    import loadersearch
    from mypkg.data import make_dataset      # returns a map-style Dataset
    from mypkg.model import make_model       # returns an nn.Module

    if __name__ == "__main__":
        result = loadersearch.tune(
            dataset=make_dataset, model=make_model, loss=torch.nn.CrossEntropyLoss, trials=40
        )
        print(result.report())               # the winner, speedups, the line to paste

:func:`tune` runs the study ``loadersearch run`` runs (it builds the same
:class:`~loadersearch.search._settings.StudySettings` and calls the same
:func:`~loadersearch.search._study.run_study`): a fresh process per measurement, pruning, the
VRAM cap and the batch-size probe, the baselines, the confirmation of the finalists, storage
and resume, the attributes optuna-dashboard shows. :func:`bench` measures one configuration,
as ``loadersearch bench``. Later, a training script reads the winner back with
:func:`loadersearch.load_best`.

The parts of a pipeline (what each must be: :mod:`loadersearch.workload._pipeline`) are
rebuilt in the measuring process, a new Python process, so each is given as something it
can import: a ``"module:name"`` string, a function or class defined at the top level of a
module (or of the script that calls ``tune``, under ``if __name__ == "__main__":``, since the
measuring process imports the script as a module), or a ``functools.partial`` of one with
keyword arguments. Lambdas, functions defined inside functions, methods bound to objects,
objects, and anything defined in a notebook are refused, with the reason and what to pass.
Their references and keyword arguments (JSON values) are stored in the study, so that a
resume, a ``loadersearch worker`` on another machine or ``loadersearch run --dataset ...``
rebuilds the same pipeline. The measuring process runs in this process's working directory,
which is on its PYTHONPATH.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig
from loadersearch._tune_result import TuneResult
from loadersearch.errors import PipelineError
from loadersearch.measure import MeasurePlan
from loadersearch.workload import WorkloadSpec

if TYPE_CHECKING:
    from loadersearch.measure import MeasureResult, Window
    from loadersearch.report import Summary
    from loadersearch.search import Progress

_logger = logging.getLogger(__name__)

#: A pipeline part: ``"module:name"``, a top-level function or class, or a
#: ``functools.partial`` of one with keyword arguments.
Part = str | Callable[..., Any]


# Over 80 lines by its signature and docstring only (the body is ~40): every option a user may
# pass is a named keyword argument, typed and documented where an editor shows it, and the body
# reads them all at once with locals(); tests/test_options.py checks they are the declared ones.
def tune(
    dataset: Part | None = None,
    *,
    model: Part | None = None,
    loss: Part | None = None,
    step: Part | None = None,
    collate_fn: Part | None = None,
    dataset_kwargs: Mapping[str, Any] | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    workload: str | None = None,
    data: str | None = None,
    data_format: str | None = None,
    data_split: str | None = None,
    img_size: int | None = None,
    mosaic: bool | None = None,
    skip_bad_samples: bool | None = None,
    device: str | None = None,
    vram_cap: int | str | None = None,
    emulated_ms: tuple[float, float] | None = None,
    emulated_mib: tuple[float, float] | None = None,
    emulated_io_ms: float | None = None,
    emulated_io_cv: float | None = None,
    optimizer: str | None = None,
    gpus: int | None = None,
    cache: str | None = None,
    cache_dir: str | None = None,
    trials: int | None = None,
    study: str | None = None,
    storage: str | None = None,
    space: Mapping[str, Any] | None = None,
    fix: Mapping[str, Any] | None = None,
    plan: MeasurePlan | Mapping[str, Any] | None = None,
    pruner: str | None = None,
    sampler: str | None = None,
    confirm_rounds: int | None = None,
    epochs_planned: int | None = None,
    seed: int | None = None,
    baselines: bool = True,
    probe: bool = True,
    settle: bool = True,
    allow_mixed_hardware: bool = False,
    spec_file: str | None = None,
    progress: Progress | None = None,
    verbose: bool = True,
) -> TuneResult:
    """Search the DataLoader settings that train your pipeline fastest on this machine.

    Pipeline (see the module docstring for how parts are given):

    - ``dataset``: builds a map-style Dataset. Without it, the built-in YOLOv4-tiny workload
      (or the spec file's) is tuned, as ``loadersearch run`` does.
    - ``model`` and ``loss``: the default step (forward, backward, optimizer step; float16 AMP
      on CUDA) on ``(inputs, targets)`` batches; ``optimizer``: ``"sgd"`` or ``"adamw"``.
    - ``step``: your step builder instead, ``make_step(model, device) -> step(batch)``.
    - ``collate_fn``: the DataLoader's collate function (default: ``default_collate``).
    - ``dataset_kwargs``, ``model_kwargs``: keyword arguments of those factories.

    Measurement: ``workload`` is ``"train"`` (default), ``"loader"`` (the data pipeline
    alone) or ``"emulated"`` (your data, a stand-in device taking ``emulated_ms = (a, b)``:
    a + b*batch ms per batch, and ``emulated_mib`` of memory); ``emulated_io_ms``: each sample
    read first waits that many ms (EMULATED slow storage, a sleep), ``emulated_io_cv`` its
    spread; ``device`` ``"auto"``, ``"cuda"`` or ``"cpu"``; ``vram_cap`` a size with its unit
    (``"6GiB"``) or an int of bytes; ``gpus`` DDP ranks. Without your ``dataset``, ``data``,
    ``data_format``, ``data_split``, ``img_size``, ``mosaic``, ``skip_bad_samples``,
    ``cache`` and ``cache_dir`` describe the built-in dataset. Each is the ``run`` option of
    that name (``workload`` is ``--workload``). ``plan`` a :class:`MeasurePlan` or some of its
    fields (default: short measurements sized for this machine).

    Study: ``trials`` is the study's total (default 40; a resume runs the difference), a
    cap when ``settle`` (the default) stops it once its answer is settled;
    ``study`` and ``storage`` name it (default: from the pipeline and hardware, in
    ``$LOADERSEARCH_STORAGE`` or ``sqlite:///studies/loadersearch.db``); ``space`` narrows
    knobs (``{"num_workers": "0:8", "batch_size": "pow2:8:64"}``) and ``fix`` fixes them
    (``{"batch_size": 32}``); ``pruner``, ``sampler``, ``confirm_rounds``, ``epochs_planned``,
    ``seed``, ``baselines``, ``probe`` and ``allow_mixed_hardware`` as the ``run`` options of
    those names; ``spec_file`` a study TOML whose values these arguments override. ``None`` means
    "not given": the spec file or the default applies.

    Progress: by default a line per trial and the answer at the end are shown on stderr (a
    live display on a terminal, plain lines otherwise), as ``loadersearch run`` shows them;
    ``verbose=False`` shows nothing (the events are then logged instead: logger
    ``loadersearch._api``, level INFO). ``progress`` receives the events instead
    (:class:`loadersearch.search._progress.Progress`): a display of your own.

    Bad input raises a :class:`loadersearch.errors.LoaderSearchError` before anything is
    measured; a dataset or pipeline that fails in the measuring process stops the study with
    one too (its results so far are kept).
    """
    from loadersearch._hardware import fingerprint
    from loadersearch.report import summarize
    from loadersearch.search import Overrides, StudySettings, resolve_settings, run_study
    from loadersearch.storage import resolve_storage_url

    given = dict(locals())  # the arguments, before anything else is named here
    _refuse_inside_measurement("tune")
    overrides = Overrides(
        study=_given(StudySettings, given, exclude=("storage",)),
        workload=_given(WorkloadSpec, given),
        plan=_plan_options(plan),
        space_ranges=dict(space or {}),  # text or lists, as a spec file writes them
        space_fixed=dict(fix or {}),
        pipeline=_pipeline_options(
            dataset, model, loss, step, collate_fn, dataset_kwargs, model_kwargs
        ),
    )
    hardware = fingerprint()
    url = resolve_storage_url(storage)
    settings = resolve_settings(spec_file, overrides, hardware=hardware, storage=url)
    started = time.monotonic()
    reporter = progress or (_show_progress if verbose else _log_progress)(settings.trials)
    try:
        outcome = run_study(settings, progress=reporter, hardware=hardware)
        summary = summarize(outcome.study)
        reporter.answer(_answer(summary))
    finally:
        reporter.close()
    winner = summary.winner
    return TuneResult(
        best=winner.config if winner else None,
        images_per_s=winner.rate if winner else None,
        confirmed=bool(winner and winner.confirmed),
        emulated=summary.emulated,
        study_name=outcome.study.study_name,
        storage=url,
        summary=summary,
        probe=outcome.probe.describe(),
        ran=outcome.ran,
        elapsed_s=time.monotonic() - started,
        study=outcome.study,
    )


def bench(
    dataset: Part | None = None,
    *,
    model: Part | None = None,
    loss: Part | None = None,
    step: Part | None = None,
    collate_fn: Part | None = None,
    dataset_kwargs: Mapping[str, Any] | None = None,
    model_kwargs: Mapping[str, Any] | None = None,
    config: LoaderConfig | Mapping[str, Any] | None = None,
    workload: str | None = None,
    data: str | None = None,
    data_format: str | None = None,
    data_split: str | None = None,
    img_size: int | None = None,
    mosaic: bool | None = None,
    skip_bad_samples: bool | None = None,
    device: str | None = None,
    vram_cap: int | str | None = None,
    emulated_ms: tuple[float, float] | None = None,
    emulated_mib: tuple[float, float] | None = None,
    emulated_io_ms: float | None = None,
    emulated_io_cv: float | None = None,
    optimizer: str | None = None,
    gpus: int | None = None,
    cache: str | None = None,
    cache_dir: str | None = None,
    plan: MeasurePlan | Mapping[str, Any] | None = None,
    on_window: Callable[[Window], bool] | None = None,
) -> MeasureResult:
    """Measure one DataLoader configuration of your pipeline in a fresh process, as
    ``loadersearch bench`` does; no study, nothing stored.

    ``config`` is a :class:`LoaderConfig` (e.g. ``tune(...).best``) or its fields
    (``{"num_workers": 4, "batch_size": 32}``; default: PyTorch's defaults at batch 16);
    ``plan`` some of :class:`MeasurePlan`'s fields over the plan a study's trial has on this
    machine (:func:`loadersearch.search.default_plan`, shorter where the CPU does the heavy
    work), as ``bench``: measured until the epoch time is known to +/-5%; or a whole
    :class:`MeasurePlan`, used as it is (its own defaults for what it does not set).
    The pipeline and measurement arguments are :func:`tune`'s. ``on_window(window)`` is
    called for every measurement window; returning False stops the measurement (PRUNED).

    A configuration or dataset that fails comes back as the result's ``status``, ``reason``
    and ``message`` (``result.ok`` is False), not as an exception; bad arguments raise a
    :class:`loadersearch.errors.LoaderSearchError`.
    """
    from loadersearch._hardware import fingerprint
    from loadersearch.errors import SpecError
    from loadersearch.measure import measure, prepare
    from loadersearch.search import cpu_bound, resolve_pipeline, study_plan_with

    given = dict(locals())  # the arguments, before anything else is named here
    _refuse_inside_measurement("bench")
    pipeline = resolve_pipeline(
        {},
        _pipeline_options(dataset, model, loss, step, collate_fn, dataset_kwargs, model_kwargs),
    )
    try:
        spec = WorkloadSpec(**_given(WorkloadSpec, given), pipeline=pipeline)
        if not isinstance(config, LoaderConfig):
            config = LoaderConfig(**dict(config or {}))
        hardware = fingerprint()
        if not isinstance(plan, MeasurePlan):
            plan = study_plan_with(_plan_options(plan), small=cpu_bound(spec, hardware))
    except (TypeError, ValueError) as e:
        raise SpecError(f"invalid configuration: {e}") from e
    # As ``loadersearch bench``: the device decided here (never guessed by the child), the
    # dataset, /dev/shm and the cache checked and readied, what they say logged.
    ready = prepare(spec, config, hardware)
    for line in [ready.data.describe(), *(c.describe() for c in ready.caches)]:
        if line:
            _logger.info("%s", line)
    if ready.shm is not None and ready.shm.warning():
        _logger.warning("%s", ready.shm.warning())
    return measure(ready.workload, config, plan, on_window=on_window, prepared=True)


def _refuse_inside_measurement(name: str) -> None:
    from loadersearch.workload import MEASURING_ENV

    if os.environ.get(MEASURING_ENV):
        raise PipelineError(
            f"loadersearch.{name}() was called inside the measuring process: it imported your "
            f"script as a module to rebuild the pipeline, and the call to {name}() ran at its "
            f'top level. Put the call under `if __name__ == "__main__":`.'
        )


def _pipeline_options(
    dataset: Part | None,
    model: Part | None,
    loss: Part | None,
    step: Part | None,
    collate_fn: Part | None,
    dataset_kwargs: Mapping[str, Any] | None,
    model_kwargs: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """PipelineSpec fields from the API's arguments (references and keyword arguments)."""
    from loadersearch.workload import ref_of

    parts = {
        "dataset": dataset,
        "model": model,
        "loss": loss,
        "step": step,
        "collate": collate_fn,
    }
    extra = {"dataset": dict(dataset_kwargs or {}), "model": dict(model_kwargs or {})}
    if dataset is None:
        given = [p for p, v in parts.items() if v is not None]
        given += [f"{p}_kwargs" for p, v in extra.items() if v]
        if given:
            raise PipelineError(
                f"{', '.join(given)} given without a dataset: your pipeline starts with "
                "dataset= (a callable returning a map-style Dataset)."
            )
        return {}
    out: dict[str, Any] = {}
    for part, obj in parts.items():
        if obj is None:
            if extra.get(part):
                raise PipelineError(f"{part}_kwargs given without {part}=.")
            continue
        ref, kwargs = ref_of(obj, part)
        out[part] = ref
        kwargs = {**kwargs, **extra.get(part, {})}
        if kwargs:
            out[f"{part}_kwargs"] = kwargs
    return out


def _given(
    owner: type, arguments: Mapping[str, Any], exclude: tuple[str, ...] = ()
) -> dict[str, Any]:
    """The arguments of ``owner``'s declared options that were given, keyed as a spec file
    keys them (:class:`~loadersearch.search._settings.Overrides`): None is "not given", a
    switch (``probe=False``) is given when it is not its default, and a size is bytes (an int
    from Python is a count of bytes, ``8 * 2**30``; text needs its unit)."""
    from loadersearch._options import OFF, ON, SIZE, declared
    from loadersearch.search import parse_size

    out: dict[str, Any] = {}
    for name, o in declared(owner).items():
        api = o.api_name(name)
        if api is None or api in exclude or arguments.get(api) is None:
            continue
        value = arguments[api]
        if o.kind in (OFF, ON):
            if bool(value) == (o.kind == OFF):  # the default: not given
                continue
            value = bool(value)
        elif o.kind == SIZE:
            is_bytes = isinstance(value, int) and not isinstance(value, bool)
            value = parse_size(f"{value}B" if is_bytes else value)
        out[o.key or name] = value
    return out


def _plan_options(plan: MeasurePlan | Mapping[str, Any] | None) -> dict[str, Any]:
    """The fields a ``plan`` argument sets: a :class:`MeasurePlan`'s declared ones, or a
    mapping's, which must be among them (the internal ones are not the caller's)."""
    from loadersearch._options import declared
    from loadersearch.errors import SpecError

    known = declared(MeasurePlan)
    if plan is None:
        return {}
    if isinstance(plan, MeasurePlan):
        return {name: getattr(plan, name) for name in known}
    unknown = set(plan) - set(known)
    if unknown:
        raise SpecError(
            f"plan: unknown key(s) {', '.join(sorted(unknown))}; known keys: "
            f"{', '.join(sorted(known))}."
        )
    return dict(plan)


def _show_progress(target: int) -> Progress:
    """What ``loadersearch run`` shows, on stderr: a user's script keeps stdout."""
    from loadersearch.report import make_progress

    return make_progress(quiet=False, target=target, err=True)


def _answer(summary: Summary) -> list[str]:
    """The answer :func:`tune` shows at its end: the winner, its rate and the line to paste."""
    from loadersearch.report import answer_lines, winner_evidence

    w = summary.winner
    if w is None:
        return [f"study {summary.study}: no feasible trial yet."]
    emulated = " (EMULATED device)" if summary.emulated else ""
    return [
        f"Winner (trial {w.trial}): {w.config.label()}: {winner_evidence(w)}{emulated}",
        *answer_lines(summary),
    ]


def _log_progress(target: int) -> Progress:
    """The study's events as log records: the lines ``loadersearch run`` prints when its
    output is not a terminal, at INFO on logger ``loadersearch._api``."""
    from loadersearch.report import PlainProgress

    class LogProgress(PlainProgress):
        def _echo(self, text: str) -> None:
            _logger.info("%s", text)

    return LogProgress(target)
