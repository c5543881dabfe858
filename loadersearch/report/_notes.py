"""What optuna-dashboard shows beside the numbers: a note on the study (the confirmed answer
and its evidence), a note on each trial (baseline, finalist, repeat, infeasible with advice,
pruned: where and against what), the importance chart on distinct configurations, and each
trial's windows as a picture.

Written by the process that already holds the storage, never by ``loadersearch report``:
every process that runs trials notes its own trials as they end (:func:`note_trial`, an Optuna
callback) and attaches their window pictures while they run (:func:`window_artifact_hook`);
the run that confirms rewrites the study note and every trial note whose text changed
(:func:`publish`), so a resumed or re-confirmed study reads current.

Notes use optuna-dashboard's own ``save_note`` (Markdown, versioned in the study's system
attributes). loadersearch writes only between its two marker lines, so what a person writes
in the dashboard below them survives every update.
"""

from __future__ import annotations

import logging
import os
import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch.measure import INFEASIBLE_ADVICE
from loadersearch.report._answer import answer_python
from loadersearch.report._format import (
    baseline_cells,
    baseline_header,
    cache_line,
    cost,
    epoch_time,
    finalist_cells,
    finalist_header,
    machine,
    noise,
    probe,
    sentence,
    skipped_lines,
    winner_evidence,
    winner_title,
)
from loadersearch.report._importance import Importance, importances
from loadersearch.report._plots import importance_figure, importance_title, window_figure_png
from loadersearch.report._separation import (
    baselines_not_separated,
    best_trial_differs,
    finalists_not_separated,
    inconclusive_note,
)
from loadersearch.report._summary import (
    Finalist,
    Summary,
    Winner,
    summarize,
)
from loadersearch.report._trials import (
    COMPLETE,
    FAILED,
    INFEASIBLE,
    PRUNED,
    RUNNING,
    trial_kind,
)
from loadersearch.search import stored_spec

if TYPE_CHECKING:
    import optuna
    from optuna.artifacts._protocol import ArtifactStore

    from loadersearch.measure import MeasureResult

_logger = logging.getLogger(__name__)

# Markdown link definitions render as nothing: markers a reader never sees.
BEGIN = "[//]: # (loadersearch begin: rewritten by loadersearch; write your notes below the end)"
END = "[//]: # (loadersearch end)"
IMPORTANCE_PLOT_ID = "loadersearch-importance"  # the dashboard card's id: rewritten, not added
WINDOWS_PNG = "windows.png"

PRUNER_TEST = {
    "wilcoxon": "a paired Wilcoxon test at the same windows: more than 5% slower (wider on a "
    "noisy machine) with p < 0.1",
    "median": "Optuna's MedianPruner: below the median of earlier trials at the same window",
}


def merge_note(existing: str, block: str) -> str:
    """``existing`` with loadersearch's block replaced by ``block``; a person's own text
    (anything outside the markers) is kept below it."""
    # Blank lines around the block: a marker line right after text would continue its paragraph.
    ours = f"{BEGIN}\n\n{block.strip()}\n\n{END}"
    if BEGIN in existing and END in existing:
        before, _, rest = existing.partition(BEGIN)
        _, _, after = rest.partition(END)
        own = (before.strip() + "\n\n" + after.strip()).strip()
    else:
        own = existing.strip()
    return ours + ("\n\n" + own if own else "")


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def study_note(summary: Summary, importance: Importance) -> str:
    """The study's note: the answer and the evidence behind it, in Markdown."""
    w = summary.winner
    emulated = " (EMULATED accelerator)" if summary.emulated else ""
    if w is None:
        return f"## {summary.study}{emulated}\n\nNo feasible trial yet: nothing to answer."
    status = winner_title(w, "Best trial (not confirmed yet)")
    parts = [
        f"## {status}: {w.config.label()}{emulated}",
        f"**{winner_evidence(w)}**, trial {w.trial}. {summary.description}.",
        f"```python\n{answer_python(summary)}\n```",
    ]
    caveat = inconclusive_note(w)
    if caveat:
        parts.insert(2, f"**{caveat}**")
    epoch = epoch_time(summary)
    if epoch:
        parts.append(sentence(epoch))
    cached = cache_line(summary)
    if cached:
        parts.append(sentence(cached))
    skipped = skipped_lines(summary)
    if skipped:  # a Markdown list of the files
        parts.append("\n".join([skipped[0], ""] + [f"- `{n.strip()}`" for n in skipped[1:]]))
    if w.confirmed and not summary.confirmation_current:
        parts.append(
            f"The confirmation covered {summary.confirmed_after} finished trials; the study "
            f"now holds {summary.finished}. Run `loadersearch run` with the same options to "
            "confirm again."
        )
    if summary.baselines:
        parts.append("### Against the baselines")
        rows = [baseline_cells(b) for b in summary.baselines]
        parts.append(_table(baseline_header(summary.epochs_planned), rows))
        close = baselines_not_separated(summary)
        if close:
            parts.append(close)
    if summary.finalists:
        parts.append("### Confirmation: the finalists re-measured interleaved")
        parts.append(
            _table(finalist_header(w.rounds), [finalist_cells(f) for f in summary.finalists])
        )
        alike = finalists_not_separated(summary)
        if alike:
            parts.append(alike)
    differs = best_trial_differs(summary)
    if differs:
        parts.append('### Why the dashboard\'s "Best Trial" may differ')
        parts.append(differs)
    parts.append("### What it cost")
    found = probe(summary)
    parts.append(cost(summary) + (f" {sentence(found)}" if found else ""))
    parts.append("### Machine")
    budget = f" CPU budget: {summary.cpu_budget}." if summary.cpu_budget else ""
    memory = f" {summary.memory_bound}" if summary.memory_bound else ""
    parts.append(f"{machine(summary.hardware)}.{budget}{memory} Noise: {noise(summary)}.")
    parts.append("### Parameter importance")
    if importance.values:
        parts.append(
            f"{importance.verdict()} {importance.describe()} "
            f'The card "{importance_title(importance)}" shows it with 90% intervals; '
            "the dashboard's own importance chart counts every COMPLETE trial, repeats and "
            "infeasible ones included, and may rank the knobs differently."
        )
    else:
        parts.append(f"Not enough distinct configurations yet: {importance.describe()}")
    return "\n\n".join(parts)


@dataclass
class NoteContext:
    """What a trial's note needs to know about the rest of the study."""

    trials: dict[int, optuna.trial.FrozenTrial]  # by number
    baseline_rules: dict[str, str]  # baseline name -> its rule
    finalists: dict[int, Finalist]  # by trial number
    winner: Winner | None
    windows_per_epoch: int
    n_windows: int
    pruner: str

    @classmethod
    def of(cls, study: optuna.Study, summary: Summary | None = None) -> NoteContext:
        attrs = study.user_attrs
        plan = stored_spec(attrs, "plan")
        per_epoch = int(plan.get("windows_per_epoch") or 0)
        return cls(
            trials={t.number: t for t in study.get_trials(deepcopy=False)},
            baseline_rules={b["name"]: b["rule"] for b in attrs.get("baselines") or []},
            finalists={f.trial: f for f in summary.finalists} if summary else {},
            winner=summary.winner if summary else None,
            windows_per_epoch=per_epoch,
            n_windows=per_epoch * int(plan.get("epochs") or 0),
            pruner=str(attrs.get("pruner") or "wilcoxon"),
        )


def trial_note(trial: optuna.trial.FrozenTrial, ctx: NoteContext) -> str:
    """A trial's note: what it is to the study, then what it measured."""
    from loadersearch.search import baseline_names

    ua = trial.user_attrs
    kind = trial_kind(trial)
    parts = []
    w = ctx.winner
    if w is not None and w.confirmed and w.trial == trial.number:
        parts.append(f"**{winner_title(w)}** of the study: {winner_evidence(w)}.")
    elif trial.number in ctx.finalists:
        f = ctx.finalists[trial.number]
        text = (
            f"**Finalist**: re-measured interleaved with the winner: median {f.median:.1f} "
            f"img/s ({f.low:.1f}..{f.high:.1f})"
        )
        if w is not None and f.median > 0:
            text += f"; the winner, trial {w.trial}, is {w.rate / f.median:.2f}x as fast"
        parts.append(text + ".")
    for name in baseline_names(ua.get("baseline")):
        parts.append(f"**Baseline `{name}`**: {ctx.baseline_rules.get(name, 'a common rule')}.")
    if ua.get("online"):
        parts.append(
            "**Online**: AutoLoader's choice, measured in a real training loop (your step "
            "included): its value is that loop's images/s, not a projected full epoch."
        )
    if ua.get("repeat_of") is not None:
        parts.append(
            f"**Repeat of trial {ua['repeat_of']}**: the sampler proposed a configuration the "
            "study had already measured, so that measurement is recorded here again, not "
            "measured twice. The importance counts the configuration once."
        )
    if kind == INFEASIBLE:
        reason = ua.get("infeasible_reason") or ua.get("reason") or "unknown"
        message = f": {ua['message']}" if ua.get("message") else ""
        known = INFEASIBLE_ADVICE.get(reason)
        advice = known.note if known else "see the message above."
        parts.append(f"**Infeasible ({reason})**{message}.\n\n*What to do:* {advice}")
    elif kind == PRUNED:
        parts.append(_pruned(trial, ctx))
    elif kind == FAILED and ua.get("surplus"):
        parts.append(f"**Not measured**: {ua['surplus']}.")
    elif kind == FAILED:
        parts.append(f"**Failed**: {ua.get('message') or 'no result (see the run log)'}.")
    busy = _busy(ua) if kind in (COMPLETE, PRUNED) else None
    if busy:
        parts.append(busy)
    measured = _measured(trial)
    if measured:
        parts.append(measured)
    return "\n\n".join(parts)


def _busy(ua: dict[str, Any]) -> str | None:
    """What a busy machine did to a trial's measurement (measure.hostload), or None."""
    again = ua.get("remeasured")
    if not ua.get("busy_host") and not again:
        return None
    first = f"{(again or {}).get('first_outside_share') or 0:.0%}"
    if again and not ua.get("unreliable"):
        return (
            f"**Measured again**: the first measurement ran on a busy machine (other processes "
            f"used {first} of the CPUs, {again.get('first_objective')} img/s); the quieter "
            f"second one ({ua.get('outside_share', 0):.0%}) is the value."
        )
    share = f"{ua.get('outside_share') or 0:.0%}"
    tail = (
        f" It was measured twice (first {first} busy)." if again else ""
    ) + " Its value may be low because of the machine, not the configuration."
    label = "Unreliable" if ua.get("unreliable") else "Busy machine"
    return f"**{label}**: other processes used {share} of the CPUs while it measured.{tail}"


def _pruned(trial: optuna.trial.FrozenTrial, ctx: NoteContext) -> str:
    """Where a trial was pruned, and against which trial's windows."""
    done = len(trial.intermediate_values)
    where = f"after window {done} of {ctx.n_windows}" if ctx.n_windows else f"after {done} windows"
    if ctx.windows_per_epoch:
        where += f" (measured epoch {(done - 1) // ctx.windows_per_epoch + 1})"
    text = f"**Pruned {where}**"
    if ctx.pruner != "wilcoxon":
        return text + f": {PRUNER_TEST.get(ctx.pruner, ctx.pruner)}."
    best = _pruned_against(trial, ctx)
    if best is None:
        return text + "."
    shared = sorted(set(trial.intermediate_values) & set(best.intermediate_values))
    mine = statistics.fmean(trial.intermediate_values[s] for s in shared) if shared else 0.0
    theirs = statistics.fmean(best.intermediate_values[s] for s in shared) if shared else 0.0
    ratio = f" ({mine / theirs:.2f}x)" if theirs else ""
    return (
        text + f": clearly slower than trial {best.number}, the best trial then "
        f"({best.user_attrs.get('config', '')}): {mine:.1f} against {theirs:.1f} img/s on "
        f"average over the same {len(shared)} windows{ratio}; {PRUNER_TEST['wilcoxon']}."
    )


def _pruned_against(
    trial: optuna.trial.FrozenTrial, ctx: NoteContext
) -> optuna.trial.FrozenTrial | None:
    """The trial the pruner compared with: recorded at pruning time by the clearly-slower test,
    else (a pruner that compares with no single trial) the best feasible trial that had
    finished by then."""
    number = trial.user_attrs.get("pruned_against")
    if number is not None and number in ctx.trials:
        return ctx.trials[number]
    end = trial.datetime_complete
    earlier = [
        t
        for t in ctx.trials.values()
        if trial_kind(t) == COMPLETE
        and t.value is not None
        and t.datetime_complete is not None
        and (end is None or t.datetime_complete <= end)
    ]
    return max(earlier, key=lambda t: t.value, default=None)


def _measured(trial: optuna.trial.FrozenTrial) -> str:
    """The measurement in two lines: the figures, then each window's rate and data-wait."""
    ua = trial.user_attrs
    if not trial.intermediate_values:
        return ""
    figures = []
    if trial_kind(trial) == COMPLETE and trial.value is not None:
        figures.append(f"{trial.value:.1f} img/s projected for a full epoch")
    if ua.get("steady_rate") is not None and trial_kind(trial) != PRUNED:
        figures.append(f"steady {ua['steady_rate']:.1f} img/s")
    if ua.get("start_cost_s") and trial_kind(trial) != PRUNED:
        figures.append(f"epoch start {ua['start_cost_s']:.3f} s")
    if ua.get("wait_fraction") is not None and trial_kind(trial) != PRUNED:
        figures.append(f"data-wait {ua['wait_fraction']:.0%}")
    if ua.get("window_cv") is not None and trial_kind(trial) != PRUNED:
        figures.append(f"window CV {ua['window_cv']:.1%}")
    if ua.get("precision") is not None and trial_kind(trial) == COMPLETE:
        extra = ua.get("extra_epochs") or 0
        more = f", {extra} more epochs measured for it" if extra else ""
        figures.append(f"epoch time +/-{ua['precision']:.1%} (90% confidence{more})")
    if ua.get("wall_s"):
        figures.append(f"{ua['wall_s']:.1f} s on {ua.get('host') or 'this host'}")
    lines = [f"Measured ({ua.get('config', '')}): " + ", ".join(figures) + "."]
    values = trial.intermediate_values
    lines.append("Windows, img/s: " + " ".join(f"{values[s]:.0f}" for s in sorted(values)))
    if ua.get("window_wait"):
        lines.append("Data-wait per window: " + " ".join(f"{x:.0%}" for x in ua["window_wait"]))
    return "  \n".join(lines)


def _save_if_changed(study: optuna.Study, trial_id: int | None, block: str) -> bool:
    """Write ``block`` into the study's (``trial_id`` None) or a trial's note unless it is
    already there; returns whether it wrote."""
    import optuna
    from optuna_dashboard import get_note, save_note

    # save_note/get_note take an optuna.Trial; a finished trial is re-opened as one by id.
    target: Any = study if trial_id is None else optuna.Trial(study, trial_id)
    existing = get_note(target)
    merged = merge_note(existing, block)
    if merged == existing:
        return False
    save_note(target, merged)
    return True


def note_trial(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> None:
    """An Optuna callback: the note of a trial this process just finished."""
    _save_if_changed(study, trial._trial_id, trial_note(trial, NoteContext.of(study)))


def publish(study: optuna.Study) -> dict[str, int]:
    """The confirming run's update: the study's note, every finished trial's note whose text
    changed, and the importance card. Returns how many notes it wrote."""
    from optuna_dashboard import save_plotly_graph_object

    summary = summarize(study)
    importance = importances(study)
    wrote = {"study": int(_save_if_changed(study, None, study_note(summary, importance)))}
    ctx = NoteContext.of(study, summary)
    # A running trial is noted by the process that runs it, when it ends.
    finished = [t for t in ctx.trials.values() if trial_kind(t) != RUNNING]
    wrote["trials"] = sum(
        _save_if_changed(study, t._trial_id, trial_note(t, ctx)) for t in finished
    )
    if importance.values:
        save_plotly_graph_object(
            study, importance_figure(importance), graph_object_id=IMPORTANCE_PLOT_ID
        )
    return wrote


def window_artifact_hook(store: ArtifactStore) -> Callable[[optuna.Trial, MeasureResult], None]:
    """A hook for the objective: attach the trial's windows as a picture (images/s as the
    pruner saw them, and data-wait, per window) while the trial still runs: a finished trial
    takes no artifact."""

    def attach(trial: optuna.Trial, result: MeasureResult) -> None:
        from optuna.artifacts import upload_artifact

        from loadersearch.search import window_value, window_wait

        rates = [window_value(w) for w in result.windows]
        waits = [window_wait(w) for w in result.windows]
        try:
            with tempfile.TemporaryDirectory() as tmp:
                path = os.path.join(tmp, WINDOWS_PNG)
                if window_figure_png(result.config.label(), rates, waits, path):
                    upload_artifact(artifact_store=store, file_path=path, study_or_trial=trial)
        except OSError as e:
            # A picture is not worth the measurement: the trial goes on without it.
            from loadersearch._limits import environment_error

            said = environment_error(e)
            _logger.warning("Trial %d's window picture was not stored: %s", trial.number,
                            said if said is not None else e)  # fmt: skip

    return attach


def trial_hooks(storage: str | None) -> dict[str, Any]:
    """``run_study``'s keyword arguments for a process that runs trials: each trial's note
    when it ends, and its window picture while it runs (when the storage has an artifact
    folder, see :func:`loadersearch.storage.artifact_dir`)."""
    from loadersearch.storage import open_artifact_store, resolve_storage_url

    store = open_artifact_store(resolve_storage_url(storage))
    return {
        "callbacks": [note_trial],
        "on_measured": window_artifact_hook(store) if store is not None else None,
    }
