"""A study from start to answer: check the dataset, open or create the study, probe the batch
bound, enqueue the baselines, run the trials with ``study.optimize`` (heartbeats only work
there; through :func:`loadersearch.search.budget.optimize_to_total`), confirm.

The set-up (create, attributes, probe, baselines) runs under the study's set-up lock
(:func:`loadersearch.storage.study_lock`), one process at a time, each step checking what is
already there: several runs may start one study at once, and a set-up cut short is completed
by the next run.

:func:`run_study` is the one entry point; ``loadersearch run`` calls it with ``create=True``,
a worker joining an existing study calls it with ``create=False`` and the settings
:func:`join_study` read from the study. ``--trials N`` is the study's total over every resume
and machine (COMPLETE and PRUNED trials in the storage).

Study user attributes (what a resume or a worker needs, and what the report shows):
``spec`` (workload, plan, space), ``trials`` (the total), ``workload_description``,
``hardware`` (creator's fingerprint), ``vram_cap``, ``pruner``, ``sampler``, ``probe``,
``baselines``, ``confirmation``, ``emulated``, ``skipped_samples`` (what
``--skip-bad-samples`` left out).
"""

from __future__ import annotations

import dataclasses
import logging
import re
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch.config import PRUNERS, MeasurePlan, WorkloadSpec
from loadersearch.errors import NothingFeasibleError, StudyError
from loadersearch.measure.result import (
    HOST_OOM,
    INVALID_CONFIG,
    KILLED,
    SHM_FULL,
    TIMEOUT,
    VRAM_CAP,
    WORKER_KILLED,
)
from loadersearch.search.baselines import baselines as baseline_rules
from loadersearch.search.batchprobe import ProbeResult, probe_max_batch
from loadersearch.search.confirm import confirm_study, confirmation_is_current
from loadersearch.search.objective import (
    METRIC_NAME,
    MeasuredHook,
    MeasureFn,
    Objective,
    TrialCrash,
    default_measure,
)
from loadersearch.search.progress import Progress
from loadersearch.search.settings import (
    NOT_IDENTITY,
    StudySettings,
    foreign_study_problems,
    require_loadersearch_study,
    resolved_workload,
    uses_cuda,
)
from loadersearch.search.space import SearchSpace, SpaceError

if TYPE_CHECKING:
    import optuna

    from loadersearch.hardware import Hardware

_logger = logging.getLogger(__name__)

CPU_NOTICE = (
    "No GPU here: measuring real YOLOv4-tiny training on the CPU, where the model, not the "
    "loader, is the bottleneck, so loader settings matter little. For a loader-bound answer "
    "try --workload emulated (a stand-in GPU) or run on the GPU machine."
)
PIPELINE_CPU_NOTICE = (
    "No GPU here: your training step runs on the CPU, beside the DataLoader workers; where the "
    "step is the bottleneck, loader settings matter little. For a loader-bound answer try "
    "--workload emulated (a stand-in GPU) or run on the GPU machine."
)


@dataclass
class RunOutcome:
    study: optuna.Study
    settings: StudySettings
    space: SearchSpace  # the space sampled (batch sizes bounded by the probe)
    probe: ProbeResult
    ran: int  # trials this call finished
    confirmation: dict[str, Any] | None
    resumed: bool


def default_study_name(workload: WorkloadSpec, hardware: Hardware) -> str:
    """e.g. ``yolov4-tiny-train-128-cpu2``, ``yolov4-tiny-emulated-416-voc-cpu16``, and for a
    user pipeline its dataset's module and name and its model's or step's name:
    ``classification-make-dataset-make-model-train-cpu2``."""
    gpu = uses_cuda(workload, hardware)
    if workload.pipeline is not None:
        p = workload.pipeline
        module, name = p.dataset.split(":")
        parts = [_slug(f"{module.split('.')[-1]}-{name}")]
        if p.model or p.step:
            parts.append(_slug((p.model or p.step or "").split(":")[-1]))
        parts.append(workload.kind)
    else:
        parts = ["yolov4-tiny", workload.kind, str(_img_size(workload, gpu))]
    if workload.data:
        parts.append(_slug(workload.data.rstrip("/").split("/")[-1]))
    if workload.vram_cap:
        parts.append(f"cap{workload.vram_cap / 2**30:g}g")
    if gpu and hardware.gpu_model:
        model = _slug(hardware.gpu_model.replace("NVIDIA", ""))
        parts.append(f"{model}x{hardware.gpu_count}")
    else:
        parts.append(f"cpu{hardware.cpu_count}")
    if workload.gpus > 1:
        parts.append(f"ddp{workload.gpus}")
    if workload.cache != "none":
        parts.append(workload.cache)
    return "-".join(p for p in parts if p)


def describe_workload(settings: StudySettings, hardware: Hardware) -> str:
    w = settings.workload
    if w.pipeline is not None:
        text = f"your pipeline ({w.kind} workload): {w.pipeline.describe()}"
    else:
        img = _img_size(w, uses_cuda(w, hardware))
        text = f"YOLOv4-tiny {w.kind} at {img} px on {w.data or 'the built-in generated dataset'}"
    if w.emulated:
        text += (
            f" (EMULATED accelerator: {w.emulated_ms[0]:g} + {w.emulated_ms[1]:g} ms x batch, "
            f"{w.emulated_mib[0]:g} + {w.emulated_mib[1]:g} MiB x batch)"
        )
    if w.storage_label():
        text += f" ({w.storage_label()})"
    if w.vram_cap:
        text += f", VRAM cap {w.vram_cap / 2**30:.3g} GiB"
        if w.gpus > 1:
            text += " per device"
    if w.gpus > 1:
        text += f"; DistributedDataParallel over {w.gpus} ranks, loader settings per rank"
    if settings.classes:
        text += f", {settings.classes} classes"
    if w.cache != "none":
        text += f", {w.cache} cache"
    if settings.space.cache:
        text += f"; cache searched: {', '.join(settings.space.cache)}"
    return text


def _img_size(workload: WorkloadSpec, gpu: bool) -> int:
    from loadersearch.workload import resolve_img_size

    return resolve_img_size(workload.kind, "cuda" if gpu else "cpu", workload.img_size)


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def ranks_notice(settings: StudySettings, hardware: Hardware) -> str:
    """What a trial of several ranks is, and the per-rank worker bound, in one line."""
    n = settings.workload.gpus
    lo, hi = settings.space.num_workers
    backend = "NCCL" if settings.workload.device != "cpu" and hardware.gpu_count else "gloo"
    text = (
        f"DistributedDataParallel: each trial runs {n} ranks ({backend}), one process per "
        f"device; num_workers and batch_size are per rank. num_workers {lo}..{hi} per rank: "
        f"{n} x {hi} = {n * hi} workers"
    )
    if n * hi <= hardware.cpu_count:
        text += f" within the {hardware.cpu_count} CPUs they share"
    else:
        text += f" on {hardware.cpu_count} CPUs (more than the cores, as --space asked)"
    return text + "; --space num_workers=LOW:HIGH changes it."


def shm_notices(settings: StudySettings, gpu: bool) -> list[str]:
    """/dev/shm's size and free space, what the space's largest configuration needs there, and
    a warning when that is more than the free space (those configurations will be infeasible,
    reason shm_full)."""
    from loadersearch.measure.shm import check_shm

    space = settings.space
    check = check_shm(
        settings.workload,
        "cuda" if gpu else "cpu",
        num_workers=space.num_workers[1],
        batch_size=space.batch_size[1],
        prefetch_factor=space.prefetch_factor[1],
        largest=True,
    )
    warning = check.warning()
    return [check.line(), *([warning] if warning else [])]


def make_pruner(name: str, n_windows: int) -> optuna.pruners.BasePruner:
    """``wilcoxon`` (default): :class:`ClearlySlowerPruner`, a paired signed-rank test of this
    trial's windows against the best trial's windows at the same positions; it prunes only a
    trial more than 5% slower window after window (p < 0.1; the margin widens to 1.5x the best
    trial's window CV on a noisy machine), so one noisy window cannot prune it and near-ties
    survive to the confirmation. Tests start after 4 windows (the smallest
    sample whose one-sided exact p-value can fall under 0.1).
    ``median``: MedianPruner after 5 trials and half the windows. ``none``: no pruning."""
    import optuna

    from loadersearch.search.pruner import ClearlySlowerPruner

    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=n_windows // 2)
    if name == "wilcoxon":
        return ClearlySlowerPruner(p_threshold=0.1, margin=0.05, n_startup_steps=4)
    raise StudyError(f"unknown pruner {name!r}; choose one of {', '.join(PRUNERS)}.")


def make_sampler(
    name: str, space: SearchSpace, seed: int | None, *, gpu: bool = False
) -> optuna.samplers.BaseSampler:
    """The study's sampler over the (probe-bounded) ``space``: strategy ``name`` (default
    ``structured``, the best of the tabular benchmark), never a configuration the study
    already holds while others remain, the baselines outside the start-up trials (see
    :mod:`loadersearch.search.sampler`). ``gpu``: start with pinned memory."""
    from loadersearch.search.sampler import make_sampler as build

    return build(name, space, seed=seed, prefer_pin=gpu)


def open_study(
    settings: StudySettings,
    hardware: Hardware,
    *,
    create: bool,
    storage: optuna.storages.BaseStorage | None = None,
) -> tuple[optuna.Study, bool]:
    """Create the study (or load it to resume); returns ``(study, resumed)``. A stored spec
    that differs from ``settings`` is refused: one study, one workload and space. Call it
    under :func:`loadersearch.storage.study_lock` when other processes may start the same
    study (:func:`run_study` does)."""
    import optuna

    from loadersearch.storage import open_storage, redact_url, resolve_storage_url

    url = resolve_storage_url(settings.storage)
    name = study_name_of(settings, hardware)
    storage = storage or open_storage(url)
    storage_notes = list(getattr(storage, "warnings", []) or [])
    pruner = make_pruner(settings.pruner, settings.plan.n_windows)
    # The sampler needs the space the batch-size probe bounds: run_study sets it after the
    # probe (nothing is sampled before).
    sampler = optuna.samplers.RandomSampler(seed=settings.seed)
    existing = {s.study_name for s in storage.get_all_studies()}
    if name in existing:
        study = optuna.load_study(study_name=name, storage=storage, sampler=sampler, pruner=pruner)
        study.storage_notes = storage_notes  # type: ignore[attr-defined]
        if create and _empty_shell(study):  # its creator stopped before writing anything
            _initialise(study, settings, hardware)
            return study, False
        if create:
            _check_same_spec(study, settings, redact_url(url))
            if study.metric_names is None:  # a study created before loadersearch named it
                _name_metric(study)
        _check_hardware(study, hardware, settings.allow_mixed_hardware)
        return study, True
    if not create:
        raise StudyError(
            f"no study named {name!r} in {redact_url(url)}; start it with `loadersearch run "
            f"--study {name} --storage URL` first."
        )
    study = optuna.create_study(
        study_name=name,
        storage=storage,
        sampler=sampler,
        pruner=pruner,
        direction="maximize",
        load_if_exists=True,
    )
    study.storage_notes = storage_notes  # type: ignore[attr-defined]
    _initialise(study, settings, hardware)
    return study, False


def study_name_of(settings: StudySettings, hardware: Hardware) -> str:
    if settings.study_name:
        return settings.study_name
    name = default_study_name(settings.workload, hardware)
    return f"{name}-cachesearch" if settings.space.cache else name


def _empty_shell(study: optuna.Study) -> bool:
    """A study with nothing in it (no attribute, no trial), created to maximise: what a run
    killed between creating its study and writing the spec leaves. Not another tool's data,
    so completing it touches nothing that is not ours."""
    import optuna

    return (
        not study.user_attrs
        and not study.get_trials(deepcopy=False)
        and list(study.directions) == [optuna.study.StudyDirection.MAXIMIZE]
    )


def _initialise(study: optuna.Study, settings: StudySettings, hardware: Hardware) -> None:
    """Write a new study's attributes, the spec first (it marks the study as ours), and name
    its metric."""
    attrs = {
        "spec": settings.spec_dict(),
        "workload_description": describe_workload(settings, hardware),
        "hardware": hardware.to_dict(),
        "vram_cap": settings.workload.vram_cap,
        "pruner": settings.pruner,
        "sampler": settings.sampler,
        "emulated": settings.workload.emulated,
        "emulated_io_ms": settings.workload.emulated_io_ms,  # EMULATED storage latency
        "emulated_io_cv": settings.workload.emulated_io_cv,  # its spread per file
        "epochs_planned": settings.epochs_planned,
        "confirm_rounds": settings.confirm_rounds,
        "source": settings.source,
        # the user's factories, at a glance in optuna-dashboard (also in "spec")
        "pipeline": settings.workload.pipeline.refs() if settings.workload.pipeline else None,
    }
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    _name_metric(study)


def _name_metric(study: optuna.Study) -> None:
    """Name the objective, for optuna-dashboard and Optuna's plots (instead of "Objective 0")."""
    import optuna

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([METRIC_NAME])


def _check_same_spec(study: optuna.Study, settings: StudySettings, url: str) -> None:
    """Refuse a study that is not ours, or ours with another spec (options that do not change
    what is measured, :data:`NOT_IDENTITY`, may differ: the run's values are stored)."""
    require_loadersearch_study(study, url)
    stored = study.user_attrs["spec"]
    wanted = settings.spec_dict()
    stored = _with_defaults(stored)
    diffs = []
    changed = False
    for part in ("workload", "plan", "space"):
        for key in sorted(set(stored.get(part, {})) | set(wanted[part])):
            old, new = stored.get(part, {}).get(key), wanted[part].get(key)
            if _norm(old) == _norm(new):
                continue
            if (part, key, old) == ("plan", "epoch_limit_s", None):  # see _with_defaults
                if not wanted["plan"].get("in_flight_rounds"):
                    stored[part][key] = new
                    changed = True
                    continue
            if key in NOT_IDENTITY.get(part, ()):
                stored[part][key] = new
                changed = True
            else:
                diffs.append(f"{part}.{key}: stored {old!r}, now {new!r}")
    if diffs:
        why = "results would be mixed"
        if any(d.startswith("plan.projection:") for d in diffs):
            why = (
                "its trials' full epochs were projected by an older loadersearch, which counted "
                "the loader's drain in the steady rate (up to 23% slower on uneven storage), so "
                "new trials would not compare with them. Its results stay readable (report, "
                "dashboard)"
            )
        raise StudyError(
            f"study {study.study_name!r} already exists with a different spec ({'; '.join(diffs)}"
            f"); {why}. Use the same options to resume it, or name a new study with --study "
            "NAME."
        )
    if changed:  # workers joining later follow this run's choice
        study.set_user_attr("spec", stored)


def _with_defaults(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored spec with the fields its loadersearch did not know yet filled in with their
    defaults (e.g. the space's start_method), so that a study stored before a field existed
    still resumes. Parts that no longer load are compared as stored."""
    from loadersearch.config import MeasurePlan, WorkloadSpec

    out = dict(stored)
    for part, cls in (("workload", WorkloadSpec), ("plan", MeasurePlan), ("space", SearchSpace)):
        try:
            filled = cls.from_dict(stored.get(part, {})).to_dict()
        except (TypeError, ValueError):
            continue
        out[part] = {**filled, **stored.get(part, {})}
    plan = stored.get("plan", {})
    if "plan" in out and "in_flight_rounds" not in plan:
        # Stored before measurements were sized to the configuration: every epoch had the
        # plan's steps (in_flight_rounds 0), and the epoch time limit did not apply.
        out["plan"] = {**out["plan"], "in_flight_rounds": 0, "epoch_limit_s": None}
    if "plan" in out and "projection" not in plan:
        out["plan"] = {**out["plan"], "projection": 1}  # stored before the method was stored
    return out


def _norm(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _check_hardware(study: optuna.Study, hardware: Hardware, allow_mixed: bool) -> None:
    from loadersearch import hardware as hw

    stored = study.user_attrs.get("hardware")
    if stored:
        hw.check_compatible(stored, hardware, allow_mixed=allow_mixed)


def settings_from_study(study: optuna.Study, **changes: Any) -> StudySettings:
    """Rebuild the settings stored in a study (for a worker joining it)."""
    problems = foreign_study_problems(study)
    if problems:
        raise StudyError(
            f"study {study.study_name!r} was not created by loadersearch ({'; '.join(problems)})"
            "; a worker joins only a study `loadersearch run` created."
        )
    spec = study.user_attrs["spec"]
    base = StudySettings(
        workload=WorkloadSpec.from_dict(spec["workload"]),
        plan=MeasurePlan.from_dict(spec["plan"]),
        space=SearchSpace.from_dict(spec["space"]),
        study_name=study.study_name,
        pruner=study.user_attrs.get("pruner", PRUNERS[0]),
        sampler=study.user_attrs.get("sampler", "tpe"),  # older studies used TPE
        epochs_planned=study.user_attrs.get("epochs_planned", 300),
        confirm_rounds=study.user_attrs.get("confirm_rounds", 3),
    )
    return dataclasses.replace(base, **changes)


def ensure_probe(
    study: optuna.Study,
    settings: StudySettings,
    hardware: Hardware,
    *,
    measure_fn: MeasureFn,
    progress: Progress,
    store: bool = True,
) -> ProbeResult:
    """The stored probe result, or a new probe (stored when ``store``: a worker changes
    nothing in the study) when the study has none."""
    stored = study.user_attrs.get("probe")
    if stored:
        return ProbeResult.from_dict(stored)
    w = settings.workload
    if not settings.probe:
        probe = ProbeResult(max_batch=None, skipped="disabled")
    elif "batch_size" in settings.space.fixed():
        probe = ProbeResult(max_batch=None, skipped="batch_size is fixed")
    elif uses_cuda(w, hardware) or (w.emulated and w.vram_cap):
        # On one device: the batch size is per rank and the cap per device.
        probe = probe_max_batch(
            dataclasses.replace(w, gpus=1),
            settings.space.batch_choices(),
            measure_fn=measure_fn,
            progress=progress,
        )
    elif w.emulated:
        probe = ProbeResult(max_batch=None, skipped="no VRAM cap set for the emulated device")
    else:
        probe = ProbeResult(max_batch=None, skipped="no VRAM cap applies on a CPU")
    if store:
        study.set_user_attr("probe", probe.to_dict())
    return probe


def bounded_space(space: SearchSpace, probe: ProbeResult) -> SearchSpace:
    if probe.max_batch is None:
        return space
    try:
        return space.with_batch_bound(probe.max_batch)
    except SpaceError as e:
        raise StudyError(str(e)) from e


def enqueue_baselines(
    study: optuna.Study, space: SearchSpace, hardware: Hardware, *, gpu: bool, ranks: int = 1
) -> list[dict[str, Any]]:
    """Enqueue the baselines once per study (resume-safe: the study remembers it did). Call
    it under the study's set-up lock: the check and the enqueueing are then one step."""
    stored = study.user_attrs.get("baselines")
    if stored is not None:
        return stored
    rules = baseline_rules(space, hardware, gpu=gpu, ranks=ranks)
    # A set-up cut short after some of them were queued: queue only the missing ones.
    queued = {t.user_attrs.get("baseline") for t in study.get_trials(deepcopy=False)}
    for b in rules:
        if b.name not in queued:
            study.enqueue_trial(space.params_of(b.config), user_attrs={"baseline": b.name})
    stored = [{"name": b.name, "rule": b.rule, "config": b.config.to_dict()} for b in rules]
    study.set_user_attr("baselines", stored)
    return stored


# What to do when every trial was infeasible for one reason.
_RAM_ADVICE = (
    "the host ran out of RAM: allow fewer workers (--space num_workers=0:N) or smaller "
    "batches, or free memory"
)
_INFEASIBLE_ADVICE = {
    VRAM_CAP: "raise --vram-cap, or allow smaller batches (--space batch_size=LOW:HIGH)",
    HOST_OOM: _RAM_ADVICE,
    KILLED: _RAM_ADVICE,
    WORKER_KILLED: "free host RAM or allow fewer workers and smaller batches",
    SHM_FULL: "enlarge /dev/shm (docker run --shm-size=8g or --ipc=host) or allow fewer "
    "workers and smaller batches (--space num_workers=0:N)",
    TIMEOUT: "raise --timeout, or look for a DataLoader worker that hangs (--debug)",
    INVALID_CONFIG: "check --fix and --space",
}


def nothing_feasible(study: optuna.Study, settings: StudySettings) -> str | None:
    """Why a study whose budget is spent has no answer, in one line (None when it has one):
    every trial was infeasible here. Names the commonest reason, an example and the fix."""
    from collections import Counter

    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED))
    if len(trials) < settings.trials or any(
        t.state == TrialState.PRUNED or t.user_attrs.get("feasible", True) for t in trials
    ):
        return None
    reasons = Counter(str(t.user_attrs.get("infeasible_reason")) for t in trials)
    reason, count = reasons.most_common(1)[0]
    example = next(t for t in trials if str(t.user_attrs.get("infeasible_reason")) == reason)
    message = str(example.user_attrs.get("message") or reason).rstrip(". ")
    advice = _INFEASIBLE_ADVICE.get(reason)
    return (
        f"every configuration of study {study.study_name!r} was infeasible here ({count} of "
        f"{len(trials)} trials: {reason}), so there is no answer; e.g. trial {example.number} "
        f"({example.user_attrs.get('config', '')}): {message}"
        + (f". To find one, {advice}" if advice else "")
        + ". The trials are in the study (loadersearch report)."
    )


def finished_trials(study: optuna.Study) -> int:
    from optuna.trial import TrialState

    return len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)))


def run_study(
    settings: StudySettings,
    *,
    create: bool = True,
    confirm: bool = True,
    measure_fn: MeasureFn | None = None,
    progress: Progress | None = None,
    hardware: Hardware | None = None,
    callbacks: Sequence[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]] = (),
    on_measured: MeasuredHook | None = None,
) -> RunOutcome:
    """Run (or resume) a study until it holds ``settings.trials`` finished trials, then
    confirm the finalists (when ``confirm``).

    ``callbacks`` run after each trial this process finishes (Optuna callbacks: the trial
    notes); ``on_measured`` while a measured trial still runs (its artifacts).

    ``create=True`` (``loadersearch run``) creates the study or resumes it after checking that
    its stored spec is ``settings``'; ``create=False`` (a worker) only joins an existing study,
    with the settings :func:`join_study` read from it."""
    from loadersearch.measure.forkserver import serving

    # One fork server for every measurement of the run (probe, trials, confirmation): each
    # trial forks a fresh measuring process instead of starting Python and torch again.
    with serving():
        return _run_study(
            settings,
            create=create,
            confirm=confirm,
            measure_fn=measure_fn,
            progress=progress,
            hardware=hardware,
            callbacks=callbacks,
            on_measured=on_measured,
        )


def _run_study(
    settings: StudySettings,
    *,
    create: bool,
    confirm: bool,
    measure_fn: MeasureFn | None,
    progress: Progress | None,
    hardware: Hardware | None,
    callbacks: Sequence[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]],
    on_measured: MeasuredHook | None,
) -> RunOutcome:
    import optuna

    from loadersearch.hardware import fingerprint
    from loadersearch.measure.hostload import busy_share
    from loadersearch.search.budget import optimize_to_total
    from loadersearch.storage import open_storage, resolve_storage_url, study_lock
    from loadersearch.workload import check_data, prepare_cache

    hardware = hardware or fingerprint()
    measure_fn = measure_fn or default_measure()
    progress = progress or Progress()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    busy_share()  # a bad $LOADERSEARCH_BUSY_SHARE is refused before anything is created
    # The whole dataset is checked before a study or a trial exists for it: a bad dataset
    # stops here, creating nothing.
    data = check_data(settings.workload)
    if data.describe():
        progress.notice(data.describe())
    # A memmap cache is built here, once, before any trial (never inside a trial's timeout);
    # every trial then reuses it. Its cost is stored with the study (the answer shows it).
    caches = []
    for mode in settings.space.cache or (settings.workload.cache,):
        resolved = resolved_workload(settings.workload, hardware)
        cache = prepare_cache(dataclasses.replace(resolved, cache=mode))
        if cache is not None:
            progress.notice(cache.describe())
            caches.append(cache)
    name = study_name_of(settings, hardware)
    storage = open_storage(resolve_storage_url(settings.storage))

    def waiting() -> None:
        progress.notice(f"Another process is setting up study {name!r}; waiting for it.")

    # Runs that start one study at once: the first sets it up, the others wait and join it.
    with study_lock(storage, name, waiting):
        study, resumed = open_study(settings, hardware, create=create, storage=storage)
        for note in getattr(study, "storage_notes", []):
            progress.notice(note)
        gpu = uses_cuda(settings.workload, hardware)
        if settings.workload.kind == "train" and not gpu:
            pipeline = settings.workload.pipeline is not None
            progress.notice(PIPELINE_CPU_NOTICE if pipeline else CPU_NOTICE)
        if settings.workload.emulated:
            progress.notice(
                "EMULATED accelerator: results describe a stand-in device, not a GPU."
            )
        if settings.workload.storage_label():
            progress.notice(
                f"{settings.workload.storage_label()}: every sample read waits that long (a "
                "sleep), as on network storage or a hard disk; results describe that storage."
            )
        if settings.workload.gpus > 1:
            progress.notice(ranks_notice(settings, hardware))
        for line in shm_notices(settings, gpu):
            progress.notice(line)
        before = finished_trials(study)
        progress.study_ready(study, resumed=resumed, finished=before, target=settings.trials)

        if create and study.user_attrs.get("trials") != settings.trials:
            study.set_user_attr("trials", settings.trials)  # the total workers aim at
        if create and settings.workload.skip_bad_samples:
            study.set_user_attr("skipped_samples", data.to_dict())
        if create and caches:  # a worker adds nothing to the study
            stored = dict(study.user_attrs.get("caches") or {})
            records = {c.mode: _cache_record(c, stored.get(c.mode)) for c in caches}
            if any(stored.get(mode) != record for mode, record in records.items()):
                study.set_user_attr("caches", {**stored, **records})
        # The child measures on the device this study resolved to (never its own guess).
        measured = dataclasses.replace(
            settings, workload=resolved_workload(settings.workload, hardware)
        )
        probe = ensure_probe(
            study, measured, hardware, measure_fn=measure_fn, progress=progress, store=create
        )
        space = bounded_space(settings.space, probe)
        study.sampler = make_sampler(settings.sampler, space, settings.seed, gpu=gpu)
        if create and study.user_attrs.get("sampler") != settings.sampler:
            study.set_user_attr("sampler", settings.sampler)  # the one workers use
        if settings.baselines:
            enqueue_baselines(study, space, hardware, gpu=gpu, ranks=settings.workload.gpus)
        elif create and "baselines" not in study.user_attrs:
            study.set_user_attr("baselines", [])  # the creator chose none: workers add none

    objective = Objective(
        space,
        measured.workload,
        settings.plan,
        measure_fn=measure_fn,
        progress=progress,
        on_measured=on_measured,
    )

    def report_end(study_: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
        progress.trial_end(trial, {"finished": finished_trials(study_)})

    if before < settings.trials:
        # The budget is the study's total, shared exactly by every worker on every machine.
        optimize_to_total(
            study,
            objective,
            settings.trials,
            catch=(TrialCrash,),
            callbacks=[*callbacks, report_end],
        )
    ran = finished_trials(study) - before
    nothing = nothing_feasible(study, settings)
    if nothing:
        raise NothingFeasibleError(nothing)

    confirmation = study.user_attrs.get("confirmation")
    if confirm and settings.confirm_rounds > 0:
        if not confirmation_is_current(study, settings.confirm_rounds):
            confirmation = confirm_study(
                study, objective, rounds=settings.confirm_rounds, progress=progress
            )
    return RunOutcome(
        study=study,
        settings=settings,
        space=space,
        probe=probe,
        ran=ran,
        confirmation=confirmation,
        resumed=resumed,
    )


def _cache_record(cache: Any, stored: dict[str, Any] | None) -> dict[str, Any]:
    """What the study keeps of a cache (study attribute ``caches``, by mode): its size and the
    one-time build cost, the first measured build kept when a later run reuses the file."""
    record = {k: v for k, v in cache.to_dict().items() if k not in ("built", "path")}
    if not cache.built and stored and stored.get("build_s") is not None:
        record["build_s"] = stored["build_s"]
    return record


def join_study(
    study_name: str,
    storage: str | None,
    *,
    trials: int | None,
    allow_mixed_hardware: bool,
) -> tuple[StudySettings, list[str]]:
    """The settings stored in an existing study, for a worker joining it, and the storage
    warnings to show. Refuses, listing the studies there, when the study does not exist."""
    import optuna

    from loadersearch.hardware import host_name
    from loadersearch.storage import (
        open_existing_storage,
        redact_url,
        resolve_storage_url,
        storage_warnings,
        study_hosts,
    )

    url = resolve_storage_url(storage)
    rdb = open_existing_storage(url)  # read-only: a wrong --storage creates nothing
    studies = {s.study_name: s._study_id for s in rdb.get_all_studies()}
    if study_name not in studies:
        names = sorted(studies)
        listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") or "none"
        raise StudyError(
            f"no study named {study_name!r} in {redact_url(url)} (studies there: {listed}). "
            "A worker only joins a study: create it first with `loadersearch run --study "
            f"{study_name} --storage URL --trials N`, or check --storage."
        )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=study_name, storage=rdb)
    total = trials or study.user_attrs.get("trials")
    if not total:
        raise StudyError(
            f"study {study_name!r} does not record its total number of trials; pass --trials N "
            "(the total over every machine)."
        )
    # A worker adds nothing to the study: the creator enqueued the baselines (or chose not
    # to) and stored the batch-size probe.
    settings = settings_from_study(
        study,
        trials=int(total),
        storage=url,
        allow_mixed_hardware=allow_mixed_hardware,
        baselines=False,
        probe=False,
    )
    hosts = [*study_hosts(rdb, studies[study_name]), host_name()]
    return settings, storage_warnings(url, hosts)
