"""A study from start to answer: check the dataset, open or create the study, probe the batch
bound, enqueue the baselines, run the trials with ``study.optimize`` (heartbeats only work
there; through :func:`loadersearch.search._budget.optimize_to_total`), confirm.

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
import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.errors import NothingFeasibleError, StudyError
from loadersearch.measure import INFEASIBLE_ADVICE, Prepared, prepare
from loadersearch.search._baselines import baselines as baseline_rules
from loadersearch.search._batchprobe import ProbeResult, bounded_space, ensure_probe, new_probe
from loadersearch.search._confirm import confirm_study, confirmation_is_current
from loadersearch.search._objective import (
    MeasuredHook,
    MeasureFn,
    Objective,
    TrialCrash,
    default_measure,
)
from loadersearch.search._opening import (
    create_or_resume_study,
    require_joinable,
    settings_from_study,
    study_name_of,
)
from loadersearch.search._progress import Progress
from loadersearch.search._run_notices import memory_bound, notices, run_cpu_budget
from loadersearch.search._settings import StudySettings
from loadersearch.search._settle import SETTLE_ATTR, settle_check
from loadersearch.search._space import SearchSpace

if TYPE_CHECKING:
    import optuna

    from loadersearch._hardware import Hardware
    from loadersearch.workload import PipelineTrust

CPU_BUDGET_ATTR = "cpu_budget"  # the creator's CpuBudget.to_dict()
_logger = logging.getLogger(__name__)

@dataclass
class RunOutcome:
    study: optuna.Study
    settings: StudySettings
    space: SearchSpace  # the space sampled (batch sizes bounded by the probe)
    probe: ProbeResult
    ran: int  # trials this call finished
    confirmation: dict[str, Any] | None
    resumed: bool


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
    advice = INFEASIBLE_ADVICE.get(reason)
    return (
        f"every configuration of study {study.study_name!r} was infeasible here ({count} of "
        f"{len(trials)} trials: {reason}), so there is no answer; e.g. trial {example.number} "
        f"({example.user_attrs.get('config', '')}): {message}"
        + (f". To find one, {advice.fix}" if advice else "")
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
    reconfirm: bool = False,
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
    with the settings :func:`join_study` read from it. ``reconfirm=True`` (``loadersearch
    confirm``) runs no trial and confirms the finalists again, current confirmation or not."""
    from loadersearch.measure import serving

    # One fork server for every measurement of the run (probe, trials, confirmation): each
    # trial forks a fresh measuring process instead of starting Python and torch again.
    with serving():
        return _run_study(
            settings,
            create=create,
            confirm=confirm,
            reconfirm=reconfirm,
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
    reconfirm: bool,
    measure_fn: MeasureFn | None,
    progress: Progress | None,
    hardware: Hardware | None,
    callbacks: Sequence[Callable[[optuna.Study, optuna.trial.FrozenTrial], None]],
    on_measured: MeasuredHook | None,
) -> RunOutcome:
    import optuna

    from loadersearch._hardware import fingerprint
    from loadersearch.search._budget import optimize_to_total

    hardware = hardware or fingerprint()
    # Every measurement of the run is of the workload prepare() readied: none checks its
    # cache again.
    measure_fn = measure_fn or functools.partial(default_measure(), prepared=True)
    progress = progress or Progress()
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    ready = _prepare(settings, hardware, progress)
    # The child measures on the device this study resolved to (never its own guess).
    measured = dataclasses.replace(settings, workload=ready.workload)
    study, resumed, before, probe, space = _set_up(
        settings, measured, ready, hardware, create=create, measure_fn=measure_fn,
        progress=progress,
    )  # fmt: skip
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

    if before < settings.trials and not reconfirm:
        # The budget is the study's total, shared exactly by every worker on every machine;
        # a cap, when the answer settles before it.
        optimize_to_total(
            study,
            objective,
            settings.trials,
            catch=(TrialCrash,),
            callbacks=[*callbacks, report_end],
            settle=settle_check(study, settings.trials, space, enabled=settings.settle),
        )
    ran = finished_trials(study) - before
    nothing = nothing_feasible(study, settings)
    if nothing:
        raise NothingFeasibleError(nothing)

    confirmation = study.user_attrs.get("confirmation")
    if (confirm or reconfirm) and settings.confirm_rounds > 0:
        if reconfirm or not confirmation_is_current(study, settings.confirm_rounds):
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


def _prepare(settings: StudySettings, hardware: Hardware, progress: Progress) -> Prepared:
    """The preparation every measurement of the run shares (:func:`prepare`), before a study
    or a trial exists for it: a bad dataset stops here, creating nothing. A memmap cache is
    built once, before any trial (never inside a trial's timeout), for every cache mode the
    space searches; its cost is stored with the study (the answer shows it)."""
    from loadersearch.measure import busy_share

    busy_share()  # a bad $LOADERSEARCH_BUSY_SHARE is refused before anything is created
    space = settings.space
    largest = LoaderConfig(
        num_workers=space.num_workers[1],
        batch_size=space.batch_size[1],
        prefetch_factor=space.prefetch_factor[1] if space.num_workers[1] else None,
    )
    ready = prepare(
        settings.workload,
        largest,
        hardware,
        largest=True,
        caches=space.cache or (settings.workload.cache,),
    )
    if ready.data.describe():
        progress.notice(ready.data.describe())
    for cache in ready.caches:
        progress.notice(cache.describe())
    return ready


def _set_up(
    settings: StudySettings,
    measured: StudySettings,
    ready: Prepared,
    hardware: Hardware,
    *,
    create: bool,
    measure_fn: MeasureFn,
    progress: Progress,
) -> tuple[optuna.Study, bool, int, ProbeResult, SearchSpace]:
    """Open (or create) the study and complete its set-up under its set-up lock: runs that
    start one study at once, the first sets it up, the others wait and join it. The study,
    whether it was resumed, its finished trials before this run, the probe, the space."""
    from loadersearch.storage import open_storage, resolve_storage_url, study_lock

    name = study_name_of(settings, hardware)
    storage = open_storage(resolve_storage_url(settings.storage))

    def waiting() -> None:
        progress.notice(f"Another process is setting up study {name!r}; waiting for it.")

    with study_lock(storage, name, waiting):
        probed = None
        if create and not _exists(storage, name):
            # A new study is created once its batch bound is known: a VRAM cap that not even
            # the smallest batch fits under then stops here with nothing stored, and the
            # corrected command creates the study (a study with the wrong cap would refuse
            # it as a different spec).
            probed = new_probe(measured, hardware, measure_fn=measure_fn, progress=progress)
        study, resumed = create_or_resume_study(settings, hardware, create=create, storage=storage)
        gpu = ready.device_type == "cuda"
        for line in notices(study, settings, hardware, ready):
            progress.notice(line)
        before = finished_trials(study)
        progress.study_ready(study, resumed=resumed, finished=before, target=settings.trials)
        if create:  # a worker adds nothing to the study
            _store_run_attrs(study, settings, ready)
            _store_cpu_budget(study, settings, hardware)
        probe = ensure_probe(
            study,
            measured,
            hardware,
            measure_fn=measure_fn,
            progress=progress,
            store=create,
            probed=probed,
        )
        space = bounded_space(settings.space, probe)
        from loadersearch.search._sampler import make_sampler  # imports optuna

        budget = memory_bound(study, settings, hardware, ready, space, progress, create=create)
        study.sampler = make_sampler(settings.sampler, space, seed=settings.seed,
                                     prefer_pin=gpu, inflight_images=budget)  # fmt: skip
        if create and study.user_attrs.get("sampler") != settings.sampler:
            study.set_user_attr("sampler", settings.sampler)  # the one workers use
        if create and study.user_attrs.get(SETTLE_ATTR, True) != settings.settle:
            study.set_user_attr(SETTLE_ATTR, settings.settle)  # workers follow the creator
        if settings.baselines:
            enqueue_baselines(study, space, hardware, gpu=gpu, ranks=settings.workload.gpus)
        elif create and "baselines" not in study.user_attrs:
            study.set_user_attr("baselines", [])  # the creator chose none: workers add none
    return study, resumed, before, probe, space


def _store_cpu_budget(study: optuna.Study, settings: StudySettings, hardware: Hardware) -> None:
    """The CPU budget of the run that created the study (``cpu_budget``:
    :meth:`CpuBudget.to_dict`, its line included), which its default ranges and baselines
    followed; the report shows it. Stored once, as the space and the baselines are."""
    if CPU_BUDGET_ATTR not in study.user_attrs:
        study.set_user_attr(CPU_BUDGET_ATTR, run_cpu_budget(settings, hardware).to_dict())


def _store_run_attrs(study: optuna.Study, settings: StudySettings, ready: Prepared) -> None:
    """What the creating run keeps in the study: the total workers aim at, what
    --skip-bad-samples left out, the caches' sizes and build costs."""
    if study.user_attrs.get("trials") != settings.trials:
        study.set_user_attr("trials", settings.trials)
    if settings.workload.skip_bad_samples:
        study.set_user_attr("skipped_samples", ready.data.to_dict())
    if ready.caches:
        stored = dict(study.user_attrs.get("caches") or {})
        records = {c.mode: _cache_record(c, stored.get(c.mode)) for c in ready.caches}
        if any(stored.get(mode) != record for mode, record in records.items()):
            study.set_user_attr("caches", {**stored, **records})


def _exists(storage: optuna.storages.BaseStorage, name: str) -> bool:
    try:
        storage.get_study_id_from_name(name)
    except KeyError:
        return False
    return True


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
    trust: PipelineTrust | None = None,
    show: Callable[[str], None] | None = None,
) -> tuple[StudySettings, list[str]]:
    """The settings stored in an existing study, for a worker joining it, and the storage
    warnings to show. Refuses, listing the studies there, when the study does not exist. A
    stored pipeline is imported only under ``trust`` (see :func:`settings_from_study`)."""
    import optuna

    from loadersearch._hardware import host_name
    from loadersearch.storage import (
        open_existing_storage,
        redact_url,
        resolve_storage_url,
        storage_warnings,
        studies_listed,
        study_hosts,
    )

    url = resolve_storage_url(storage)
    rdb = open_existing_storage(url)  # read-only: a wrong --storage creates nothing
    try:
        studies = {s.study_name: s._study_id for s in rdb.get_all_studies()}
        if study_name not in studies:
            raise StudyError(
                f"no study named {study_name!r} in {redact_url(url)} (studies there: "
                f"{studies_listed(list(studies))}). `worker` and `confirm` open a study that "
                f"exists: create it first with `loadersearch run --study {study_name} "
                "--storage URL --trials N`, or check --study and --storage."
            )
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name=study_name, storage=rdb)
        require_joinable(study)  # before asking for --trials: no number makes it joinable
        total = trials or study.user_attrs.get("trials")
        if not total:
            raise StudyError(
                f"study {study_name!r} does not record its total number of trials; pass "
                "--trials N (the total over every machine)."
            )
        # A worker adds nothing to the study: the creator enqueued the baselines (or chose
        # not to) and stored the batch-size probe.
        settings = settings_from_study(
            study,
            trials=int(total),
            storage=url,
            trust=trust,
            source=redact_url(url),
            show=show,
            allow_mixed_hardware=allow_mixed_hardware,
            baselines=False,
            probe=False,
        )
        hosts = [*study_hosts(rdb, studies[study_name]), host_name()]
        return settings, storage_warnings(url, hosts)
    finally:
        # Only the spec is read here; the run opens its own storage. Left open, this pool's
        # connections would stay idle on the server for the whole run: two of every
        # worker's four, which a Slurm array of 32 workers multiplies past PostgreSQL's
        # default max_connections (benchmarks/bench_shared_study.py).
        rdb.engine.dispose()
