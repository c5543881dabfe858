"""Naming, opening and checking a study: its default name and description, the pruner and
sampler it is created with, its user attributes, and the checks a resume or a joining worker
passes (a study of loadersearch's, the same spec, the same hardware class). The run itself is
:mod:`loadersearch.search._study`.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from loadersearch.errors import StudyError
from loadersearch.measure import MeasurePlan
from loadersearch.search._objective import METRIC_NAME
from loadersearch.search._settings import (
    PRUNERS,
    SAMPLERS,
    StudySettings,
)
from loadersearch.search._space import SearchSpace
from loadersearch.search._study_identity import (
    NOT_IDENTITY,
    foreign_study_problems,
    require_loadersearch_study,
)
from loadersearch.workload import WorkloadSpec, uses_cuda

if TYPE_CHECKING:
    import optuna

    from loadersearch._hardware import Hardware
    from loadersearch.workload import PipelineTrust

_logger = logging.getLogger(__name__)

# Optuna's study_name column (MAX_INDEXED_STRING_LENGTH): a longer name fails in PostgreSQL
# and MySQL with the driver's error, and SQLite stores it where they could not open it.
MAX_STUDY_NAME = 512


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
    text = describe_spec(settings.workload, hardware, classes=settings.classes)
    if settings.space.cache:
        text += f"; cache searched: {', '.join(settings.space.cache)}"
    return text


def describe_spec(w: WorkloadSpec, hardware: Hardware, *, classes: int | None = None) -> str:
    """What ``w`` measures, in words: YOLOv4-tiny's workload or the pipeline's references
    with their arguments (never a stored description)."""
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
    if classes:
        text += f", {classes} classes"
    if w.cache != "none":
        text += f", {w.cache} cache"
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
    from loadersearch._cpu_budget import CpuBudget

    cpus = CpuBudget.of(hardware, n).cpus  # the CPUs this process may use
    if n * hi <= cpus:
        text += f" within the {cpus} CPUs they share"
    else:
        text += f" on {cpus} CPUs (more than the CPUs, as --space asked)"
    return text + "; --space num_workers=LOW:HIGH changes it."


def make_pruner(name: str, n_windows: int) -> optuna.pruners.BasePruner:
    """``wilcoxon`` (default): :class:`ClearlySlowerPruner`, a paired signed-rank test of this
    trial's windows against the best trial's windows at the same positions; it prunes only a
    trial more than 5% slower window after window (p < 0.1; the margin widens to 1.5x the best
    trial's window CV on a noisy machine), so one noisy window cannot prune it and near-ties
    survive to the confirmation. Tests start after 4 windows (the smallest
    sample whose one-sided exact p-value can fall under 0.1).
    ``median``: MedianPruner after 5 trials and half the windows. ``none``: no pruning."""
    import optuna

    from loadersearch.search._pruner import ClearlySlowerPruner

    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=n_windows // 2)
    if name == "wilcoxon":
        return ClearlySlowerPruner(p_threshold=0.1, margin=0.05, n_startup_steps=4)
    raise StudyError(f"unknown pruner {name!r}; choose one of {', '.join(PRUNERS)}.")


def create_or_resume_study(
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
        # What this process measures, from its settings: the study's stored description is
        # free text anyone who can write to the database may have changed.
        study.described = describe_workload(settings, hardware)  # type: ignore[attr-defined]
        if create and _empty_shell(study):  # its creator stopped before writing anything
            _initialise(study, settings, hardware)
            return study, False
        if create:
            _check_same_spec(study, settings, redact_url(url))
            if study.metric_names is None:  # its creator stopped before naming the metric
                _name_metric(study)
        _check_hardware(study, hardware, settings.allow_mixed_hardware)
        return study, True
    if not create:
        raise StudyError(
            f"no study named {name!r} in {redact_url(url)}; start it with `loadersearch run "
            f"--study {name} --storage URL` first."
        )
    if len(name) > MAX_STUDY_NAME:
        raise StudyError(
            f"the study name is {len(name)} characters long; Optuna's databases hold "
            f"{MAX_STUDY_NAME} at most: choose a shorter --study."
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
    study.described = describe_workload(settings, hardware)  # type: ignore[attr-defined]
    _initialise(study, settings, hardware)
    return study, False


def stored_spec(attrs: Mapping[str, Any], part: str) -> dict[str, Any]:
    """A copy of one part (``workload``, ``plan`` or ``space``) of the spec a study stores in
    its user attributes ``attrs`` (:func:`create_or_resume_study` writes it); empty when it
    has none."""
    return dict((attrs.get("spec") or {}).get(part) or {})


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
    stored = {part: stored_spec(study.user_attrs, part) for part in ("workload", "plan", "space")}
    wanted = settings.spec_dict()
    diffs = []
    changed = False
    for part in ("workload", "plan", "space"):
        for key in sorted(set(stored.get(part, {})) | set(wanted[part])):
            old, new = stored.get(part, {}).get(key), wanted[part].get(key)
            if _norm(old) == _norm(new):
                continue
            if key in NOT_IDENTITY.get(part, ()):
                stored[part][key] = new
                changed = True
            else:
                diffs.append(f"{part}.{key}: stored {old!r}, now {new!r}")
    if diffs:
        raise StudyError(
            f"study {study.study_name!r} already exists with a different spec ({'; '.join(diffs)}"
            "); results would be mixed. Use the same options to resume it, or name a new study "
            "with --study NAME."
        )
    if changed:  # workers joining later follow this run's choice
        study.set_user_attr("spec", stored)


def _norm(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_norm(v) for v in value]
    if isinstance(value, dict):
        return {k: _norm(v) for k, v in value.items()}
    return value


def _check_hardware(study: optuna.Study, hardware: Hardware, allow_mixed: bool) -> None:
    from loadersearch import _hardware as hw

    stored = study.user_attrs.get("hardware")
    if stored:
        hw.check_compatible(stored, hardware, allow_mixed=allow_mixed)


def require_joinable(study: optuna.Study) -> None:
    """Refuse (:class:`StudyError`) to join a study loadersearch did not create, naming what
    it lacks."""
    problems = foreign_study_problems(study)
    if problems:
        raise StudyError(
            f"study {study.study_name!r} was not created by loadersearch ({'; '.join(problems)})"
            "; a worker joins only a study `loadersearch run` created."
        )


STORED = ("pruner", "epochs_planned", "confirm_rounds")  # settings_from_study reads these


def settings_from_study(
    study: optuna.Study,
    *,
    trust: PipelineTrust | None = None,
    source: str = "the database",
    show: Callable[[str], None] | None = None,
    **changes: Any,
) -> StudySettings:
    """Rebuild the settings stored in a study (for a worker joining it). A stored pipeline is
    someone else's data until shown to be the user's code: it passes
    :func:`loadersearch.workload._stored_refs.admit_stored` under ``trust`` (default: modules
    under the working directory only), its references shown with ``show`` before any is
    imported. The stored cache directory is not used: this machine's own default is."""
    from loadersearch.workload import PipelineTrust, admit_stored

    require_joinable(study)
    workload = WorkloadSpec.from_dict(stored_spec(study.user_attrs, "workload"))
    if workload.pipeline is not None:
        admit_stored(workload.pipeline, trust or PipelineTrust(), source, show)
    # Where a memmap cache is written is this machine's choice ($LOADERSEARCH_CACHE_DIR, its
    # default), not the database's: a stored directory would let the database choose where a
    # worker writes the decoded pixels of the dataset it names.
    workload = dataclasses.replace(workload, cache_dir=None)
    base = StudySettings(
        workload=workload,
        plan=MeasurePlan.from_dict(stored_spec(study.user_attrs, "plan")),
        space=SearchSpace.from_dict(stored_spec(study.user_attrs, "space")),
        study_name=study.study_name,
        sampler=study.user_attrs.get("sampler", SAMPLERS[0]),
        # the study's own values; StudySettings' defaults for those it lacks
        **{k: study.user_attrs[k] for k in STORED if k in study.user_attrs},
    )
    return dataclasses.replace(base, **changes)
