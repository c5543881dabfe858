"""What a result says about how well its epochs were measured: epochs cut short by the epoch
time limit, a projected epoch time known less well than the plan asks, epochs too short to
separate the steady rate. The measuring process says them of its own epochs; the launcher of a
multi-rank job says the precision's note again of the job's merged epochs."""

from __future__ import annotations

from typing import Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.measure._plan import MeasurePlan
from loadersearch.measure._projection import steady_span

PRECISION_NOTE = "the projected epoch time is known to"  # how precision_note begins

# The raise that gets a closer figure, for each limit that can stop the added epochs.
_RAISE = {
    "extend_limit_s": "raise extend_limit_s",
    "the measurement's time limit": "raise the time limit (timeout_s)",
}


def precision_note(
    precision: float | None, epochs: int, plan: MeasurePlan, bound: str = "", budget_s: float = 0.0
) -> str:
    """What a result must say when its projected epoch time is known less well than the plan
    asks (``precision`` of ``epochs`` measured epochs; ``bound`` and ``budget_s``: the limit
    that set the added epochs' seconds, as the loop's LoopRecord says it), or "" when it is
    known well enough."""
    from loadersearch.measure._loop import MIN_EPOCHS_FOR_PRECISION  # the loop imports torch

    if not plan.precision or precision is None or precision <= plan.precision:
        return ""
    bound = bound or "extend_limit_s"
    budget = budget_s or plan.extend_limit_s
    fix = _RAISE.get(bound, "measure longer epochs (steps) or more of them (epochs)")
    if epochs < MIN_EPOCHS_FOR_PRECISION:
        why = (
            f"only {epochs} measured epochs fitted in the {budget:.1f} s allowed for more "
            f"({bound}), too few to judge their spread"
        )
    else:
        why = (
            f"the {budget:.1f} s allowed for more epochs ({bound}) ran out first: its "
            "batches' fetch times vary a lot (slow or uneven storage, a busy machine)"
        )
    return (
        f"{PRECISION_NOTE} +/-{precision:.1%} (90% confidence, {epochs} measured epochs), "
        f"not the +/-{plan.precision:.1%} asked for: {why}; {fix} for a closer figure"
    )


def sizing_notes(record: Any, plan: MeasurePlan, config: LoaderConfig) -> list[str]:
    """What the result must say about its measured epochs' length (``record``: the loop's
    :class:`~loadersearch.measure._loop.LoopRecord`)."""
    notes = []
    if record.steps < record.target_steps:
        notes.append(
            f"measured epochs of {record.steps} steps, cut from {record.target_steps} by the "
            f"epoch time limit ({plan.epoch_limit_s:g} s at the warm-up's rate): the steady "
            "part may still include the prefetch ramp (raise epoch_limit_s)"
        )
    note = precision_note(
        record.precision, len(record.epochs), plan, record.extend_bound, record.extend_budget_s
    )
    if note:
        notes.append(note)
    if record.steps > 1 and steady_span(record.steps, config.num_workers) == 0:
        notes.append(
            f"{record.steps} steps per epoch are too few to separate the steady rate with "
            f"{config.num_workers} workers: the rate includes the epoch start (use more steps)"
        )
    return notes
