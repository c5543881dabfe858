"""What each trial of a study came to (:func:`trial_kind`: complete, pruned, infeasible, ...),
its row in the trial table (:func:`trial_rows`), and what the trials cost: the seconds spent
measuring and those pruning saved, the seconds by phase, the confirmation's seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loadersearch.search import stored_spec

if TYPE_CHECKING:
    import optuna

# What a trial came to, in the order the trial table lists them.
COMPLETE, PRUNED, INFEASIBLE, FAILED, RUNNING, QUEUED = (
    "complete",
    "pruned",
    "infeasible",
    "failed",
    "running",
    "queued",  # WAITING: enqueued (a baseline, or a retry of an interrupted trial), not started
)
KINDS = (COMPLETE, PRUNED, INFEASIBLE, FAILED, RUNNING, QUEUED)


def trial_kind(trial: optuna.trial.FrozenTrial) -> str:
    """complete, pruned, infeasible (COMPLETE with value 0 and a reason), failed, running or
    queued (WAITING: enqueued, not started)."""
    from optuna.trial import TrialState

    if trial.state == TrialState.COMPLETE:
        return COMPLETE if trial.user_attrs.get("feasible", True) else INFEASIBLE
    if trial.state == TrialState.PRUNED:
        return PRUNED
    if trial.state == TrialState.FAIL:
        return FAILED
    if trial.state == TrialState.WAITING:
        return QUEUED
    return RUNNING


def trial_rows(
    trials: list[optuna.trial.FrozenTrial], fixed: dict[str, Any]
) -> list[dict[str, Any]]:
    """Every trial as a table row, complete ones best first, then pruned, infeasible, ..."""
    from loadersearch.search import config_from_params

    rows = []
    for t in trials:
        ua = t.user_attrs
        kind = trial_kind(t)
        # An enqueued trial has no params yet: its configuration is what was enqueued.
        params = t.params or t.system_attrs.get("fixed_params") or {}
        config = config_from_params(params, fixed) if params or fixed else None
        rows.append(
            {
                "trial": t.number,
                "state": kind,
                "value": t.value if kind == COMPLETE else None,
                "config": config.label() if config else "",
                "baseline": ua.get("baseline"),
                "reason": ua.get("infeasible_reason") or ua.get("reason"),
                "steady_rate": ua.get("steady_rate"),
                # A pruned measurement stops before its figures are computed.
                "wait_fraction": ua.get("wait_fraction") if kind != PRUNED else None,
                "window_cv": ua.get("window_cv") if kind != PRUNED else None,
                "peak_vram_bytes": ua.get("peak_vram_bytes"),
                "host": ua.get("host"),
                "repeat_of": ua.get("repeat_of"),
                "retry_of": ua.get("retry_of"),
                "windows_done": ua.get("windows_done"),
                "online": bool(ua.get("online")),  # measured by AutoLoader in a real loop
                # the machine while it measured (measure.hostload); None where not measured
                "outside_share": ua.get("outside_share"),
                "busy_host": bool(ua.get("busy_host")),
                "remeasured": ua.get("remeasured") is not None,
                "unreliable": bool(ua.get("unreliable")),
            }
        )
    rows.sort(key=lambda r: (KINDS.index(r["state"]), -(r["value"] or 0.0), r["trial"]))
    return rows


def n_windows(attrs: dict[str, Any]) -> int:
    """Windows of a whole trial under the study's plan."""
    plan = stored_spec(attrs, "plan")
    return int(plan.get("epochs", 0)) * int(plan.get("windows_per_epoch", 0))


def pruning_savings(trials: list[optuna.trial.FrozenTrial], n_windows: int) -> dict[str, float]:
    """Seconds spent measuring, and the seconds pruning saved: each pruned trial's remaining
    windows at its own measured pace."""
    saved = spent = 0.0
    for t in trials:
        ua = t.user_attrs
        spent += float(ua.get("wall_s") or 0.0)
        done = int(ua.get("windows_done") or 0)
        if trial_kind(t) == PRUNED and done and n_windows > done:
            saved += (n_windows - done) * float(ua.get("measured_s") or 0.0) / done
    return {
        "saved_s": round(saved, 1),
        "spent_s": round(spent, 1),
        "fraction": round(saved / (saved + spent), 3) if saved + spent > 0 else 0.0,
    }


def phase_seconds(trials: list[optuna.trial.FrozenTrial]) -> dict[str, float]:
    """The study's seconds by phase, summed over the trials that recorded them; "busy" is the
    measurements of busy trials measured again and not kept, "storage" each trial's time from
    its start to its end less its measurements' (Optuna's own writes and ours, notes
    included)."""
    from loadersearch.measure import PHASES

    totals = dict.fromkeys((*PHASES, "busy", "storage"), 0.0)
    seen = False
    for t in trials:
        phases = t.user_attrs.get("phases")
        if not phases:
            continue
        seen = True
        for name in PHASES:
            totals[name] += float(phases.get(name) or 0.0)
        dropped = float((t.user_attrs.get("remeasured") or {}).get("dropped_wall_s") or 0.0)
        totals["busy"] += dropped
        if t.datetime_start and t.datetime_complete:
            span = (t.datetime_complete - t.datetime_start).total_seconds()
            measured = float(t.user_attrs.get("wall_s") or 0.0) + dropped
            totals["storage"] += max(0.0, span - measured)
    return {k: round(v, 1) for k, v in totals.items()} if seen else {}


def confirm_seconds(confirmation: dict[str, Any] | None) -> float:
    if not confirmation:
        return 0.0
    return round(sum(float(m.get("wall_s") or 0.0) for m in confirmation["measurements"]), 1)
