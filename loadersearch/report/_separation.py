"""What the confirmation's rounds settle and what they leave open, in the words every view
of a study uses (terminal, index.html, the dashboard's notes): the finalists and baselines the
rounds do not separate from the winner, an inconclusive confirmation, and how
optuna-dashboard's "Best Trial" relates to the winner."""

from __future__ import annotations

from typing import Any

from loadersearch.report._summary import Finalist, Summary, Winner


def not_separated(summary: Summary) -> list[Finalist]:
    """The finalists (baselines among them) that the confirmation's rounds did not separate
    from the winner: measured in every round it was (the race did not drop them) and their
    highest rate at or above the winner's lowest; empty when nothing was confirmed or a
    measurement of the winner failed. With one round the rates are single points, and only a
    tie overlaps."""
    w = summary.winner
    if w is None or not w.confirmed or w.low is None or w.low <= 0:
        return []  # a failed measurement (0) of the winner bounds nothing
    winner = w.config.label()
    return [
        f
        for f in summary.finalists
        if not f.out_after and f.label != winner and f.high >= w.low
    ]


def baselines_not_separated(summary: Summary) -> str | None:
    """The baselines among :func:`not_separated`: their speedup is within the noise, not a
    settled gain; None when every baseline is clear of the winner (or nothing was
    confirmed)."""
    from loadersearch.search import baseline_names

    w = summary.winner
    close = [f for f in not_separated(summary) if f.baseline]
    if w is None or not close:
        return None
    speedups = {b.name: b.speedup for b in summary.baselines}
    parts = []
    for f in close:
        names = baseline_names(f.baseline)
        speedup = next((speedups[n] for n in names if speedups.get(n)), None)
        parts.append(
            f"{' and '.join(names)} ({f.label}: {f.low:.1f}..{f.high:.1f}"
            + (f", {speedup:.2f}x" if speedup else "")
            + ")"
        )
    return (
        f"Within the noise: the rounds do not separate the winner ({w.low:.1f}..{w.high:.1f} "
        f"img/s) from {', '.join(parts)}; a speedup whose measurements overlap the winner's is "
        "not a settled gain on this machine."
    )


_WITH_WORKERS = ("prefetch_factor", "persistent_workers", "start_method")  # none without


def _knob_value(config: Any, knob: str) -> str:
    value = getattr(config, knob)
    if isinstance(value, bool):
        return "on" if value else "off"
    return "none" if value is None else str(value)


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _differences(config: Any, winner: Any) -> list[str]:
    """``prefetch_factor 6 against the winner's 5``, for each knob ``config`` differs in (the
    knobs that exist only with workers left out where either side has none: the worker count
    says it)."""
    from loadersearch.search import KNOBS

    no_workers = config.num_workers == 0 or winner.num_workers == 0
    out = []
    for knob in KNOBS:
        if no_workers and knob in _WITH_WORKERS:
            continue
        theirs, ours = _knob_value(config, knob), _knob_value(winner, knob)
        if theirs != ours:
            out.append(f"{knob} {theirs} against the winner's {ours}")
    return out


def finalists_not_separated(summary: Summary) -> str | None:
    """The search's own finalists among :func:`not_separated`, each with the knobs it differs
    from the winner in: between those values the measurements cannot choose, so the winner's
    values of them are one choice among equals. None when every finalist is clear of the
    winner (or nothing was confirmed)."""
    from loadersearch._loader_config import LoaderConfig

    w = summary.winner
    close = [f for f in not_separated(summary) if not f.baseline and f.config]
    if w is None:
        return None
    parts = []
    for f in close:
        differs = _differences(LoaderConfig.from_dict(f.config), w.config)
        if differs:
            parts.append(f"{f.label} ({f.low:.1f}..{f.high:.1f}; {_and(differs)})")
    if not parts:
        return None
    return (
        f"Finalists within the noise: the rounds do not separate the winner ({w.low:.1f}.."
        f"{w.high:.1f} img/s) from {_and(parts)}: on this machine the measurements cannot "
        "choose between those values; any of these configurations will do."
    )


def inconclusive_note(w: Winner) -> str | None:
    """Why a confirmed answer is not settled, and what settles it; None when it is."""
    if not w.inconclusive:
        return None
    return (
        f"Inconclusive: {w.busy_rounds} of {w.rounds_done or w.rounds} confirmation rounds were "
        "measured while other processes kept the machine busy (waited "
        f"{w.waited_quiet_s:.0f} s for a quiet moment). This is the best-supported "
        "configuration, not a settled answer: run the same command again at a quiet moment "
        "and the finalists are confirmed again."
    )


def best_trial_differs(summary: Summary) -> str | None:
    """How optuna-dashboard's "Best Trial" (the highest single measurement) relates to the
    winner; None when the winner is an unconfirmed best trial (nothing to explain)."""
    w = summary.winner
    best = next((r for r in summary.rows if r["state"] == "complete"), None)
    if w is None or best is None:
        return None
    if w.confirmed:
        reason = (
            "The best of many noisy single measurements is biased upward (the winner's "
            "curse), so loadersearch re-measured the finalists interleaved and names the one "
            "with the highest median."
        )
    else:
        reason = "The study has no confirmation yet: its winner is simply the best trial."
    if best["trial"] == w.trial:
        if not w.confirmed:
            return None
        return (
            f'optuna-dashboard\'s "Best Trial" (trial {best["trial"]}, {best["value"]:.1f} '
            "img/s, one measurement) is the confirmed winner too; its confirmed rate is the "
            f"median of the re-measurements, {w.rate:.1f} img/s. " + reason
        )
    return (
        f'optuna-dashboard\'s "Best Trial" is trial {best["trial"]} ({best["config"]}, '
        f"{best['value']:.1f} img/s in one measurement), not the winner, trial {w.trial} "
        f"({w.config.label()}). " + reason
    )
