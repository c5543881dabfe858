"""Sentences and numbers as every view of a study writes them (terminal, index.html, the
dashboard's notes), so that the three tell the same story in the same words."""

from __future__ import annotations

from typing import Any

from loadersearch.report._summary import BaselineResult, Finalist, Summary, Winner


def sentence(text: str) -> str:
    """``projected epoch ...`` -> ``Projected epoch ....``"""
    return text[:1].upper() + text[1:] + "."


def duration(seconds: float) -> str:
    """``42.0 s``, ``3.5 min``, ``2.1 h``."""
    if abs(seconds) >= 3600:
        return f"{seconds / 3600:.1f} h"
    if abs(seconds) >= 60:
        return f"{seconds / 60:.1f} min"
    return f"{seconds:.1f} s"


def winner_evidence(w: Winner) -> str:
    """``80.8 img/s (median of 3 interleaved re-measurements, 78.1..81.0, spread 3.6%)``."""
    if not w.confirmed:
        return f"{w.rate:.1f} img/s (best trial, not confirmed)"
    spread = f", spread {w.spread:.1%}" if w.spread is not None else ""
    caveat = f"; INCONCLUSIVE: {w.busy_rounds} busy round(s)" if w.inconclusive else ""
    what = "re-measurement" if w.rounds == 1 else "re-measurements"
    return (
        f"{w.rate:.1f} img/s (median of {w.rounds} interleaved {what}, "
        f"{w.low:.1f}..{w.high:.1f}{spread}{caveat})"
    )


def winner_title(w: Winner, unconfirmed: str = "Best trial (not confirmed)") -> str:
    """The answer's heading word: a winner measured on a machine that never quieted is the
    best-supported configuration, not a confirmed one."""
    if not w.confirmed:
        return unconfirmed
    return "Inconclusive winner (busy machine)" if w.inconclusive else "Confirmed winner"


def baselines_source(summary: Summary) -> str:
    """Where the baseline table's rates come from: all re-measured beside the winner, or
    (before a confirmation) partly their trials' values."""
    measured = [b for b in summary.baselines if b.rate]
    if all(b.source == "confirmation" for b in measured):
        every = "Every baseline" if len(measured) == len(summary.baselines) else (
            "Every baseline measured")  # fmt: skip
        return f"{every} was re-measured in the same interleaved rounds as the winner."
    return (
        "The baselines among the finalists were re-measured with the winner; the others' rates "
        "are their trial values (no confirmation yet)."
    )


def machine(hardware: dict[str, Any]) -> str:
    """``AMD EPYC, 2 CPUs (2 physical cores), 23.5 GiB RAM, no GPU; torch 2.14.1 ...``."""
    if not hardware:
        return "not recorded"
    parts = [
        f"{hardware.get('cpu_model') or 'unknown CPU'}, {hardware.get('cpu_count')} CPUs "
        f"({hardware.get('physical_cores')} physical cores)"
    ]
    if hardware.get("ram_bytes"):
        parts.append(f"{hardware['ram_bytes'] / 2**30:.1f} GiB RAM")
    if hardware.get("shm_bytes"):
        parts.append(f"{hardware['shm_bytes'] / 2**30:.1f} GiB /dev/shm")
    if hardware.get("gpu_model"):
        gpu = f"{hardware.get('gpu_count', 1)} x {hardware['gpu_model']}"
        if hardware.get("gpu_memory_bytes"):
            gpu += f" ({hardware['gpu_memory_bytes'] / 2**30:.0f} GiB)"
        if hardware.get("nvidia_driver"):
            gpu += f", driver {hardware['nvidia_driver']}"
        parts.append(gpu)
    else:
        parts.append("no GPU")
    soft = [
        f"{name} {hardware[key]}"
        for name, key in (("torch", "torch"), ("CUDA", "torch_cuda"), ("Python", "python"))
        if hardware.get(key)
    ]
    host = f"host {hardware['host']}: " if hardware.get("host") else ""
    return host + ", ".join(parts) + ("; " + ", ".join(soft) if soft else "")


def noise(summary: Summary) -> str:
    """How quiet the machine was, from what the study measured: the spread of each trial's
    windows, and of the winner's re-measurements."""
    cvs = sorted(r["window_cv"] for r in summary.rows if r["window_cv"] is not None)
    parts = []
    if cvs:
        parts.append(
            f"windows within a trial varied by {cvs[len(cvs) // 2]:.1%} (median CV over "
            f"{len(cvs)} trials, worst {cvs[-1]:.1%})"
        )
    w = summary.winner
    if w is not None and w.confirmed and w.spread is not None:
        parts.append(f"the winner's {w.rounds} re-measurements spread {w.spread:.1%}")
    load = machine_load(summary)
    if load:
        parts.append(load)
    return "; ".join(parts) if parts else "not measured yet"


def machine_load(summary: Summary) -> str | None:
    """How quiet the machine was while the trials measured: the share of the CPUs other
    processes used (median and worst), the trials measured on a busy machine and measured
    again, and those still busy then (unreliable). None for a study that did not record it."""
    rows = [r for r in summary.rows if r.get("outside_share") is not None]
    if not rows:
        return None
    shares = sorted(r["outside_share"] for r in rows)
    worst = max(rows, key=lambda r: r["outside_share"])
    text = (
        f"other processes used {shares[len(shares) // 2]:.0%} of the CPUs while trials measured "
        f"(median over {len(rows)} trials; worst {worst['outside_share']:.0%}, trial "
        f"{worst['trial']})"
    )
    again = [r for r in rows if r.get("remeasured")]
    unreliable = sorted(r["trial"] for r in rows if r.get("unreliable"))
    # a pruned trial lost on speed, which a busy machine lowers; an infeasible one did not
    others = [r for r in rows if r.get("busy_host") and r["state"] == "pruned"]
    if again:
        text += f"; {len(again)} measured on a busy machine were measured again"
    if unreliable:
        text += "; measured on a busy machine, so unreliable: trial " + ", ".join(
            str(n) for n in unreliable
        )
    if others:
        text += f"; {len(others)} pruned on a busy machine"
    if not again and not unreliable and not others:
        text += ": quiet enough, no trial flagged"
    return text


PHASE_NAMES = {
    "start": "process start",
    "build": "dataset, loader and model build",
    "warmup": "warm-up (not measured)",
    "planned": "planned measured epochs",
    "extra": "epochs added for the precision",
    "teardown": "teardown",
    "busy": "measured again, not kept (busy machine)",
    "storage": "storage and notes",
}


def phase_rows(summary: Summary) -> list[list[str]]:
    """Where the trials' time went: phase, seconds, share of the whole."""
    total = sum(summary.phases.values())
    if total <= 0:
        return []
    return [
        [PHASE_NAMES.get(name, name), duration(seconds), f"{seconds / total:.0%}"]
        for name, seconds in summary.phases.items()
        if seconds > 0 or name != "busy"  # a quiet study had no such phase
    ]


def phase_line(summary: Summary) -> str | None:
    """``trials took 2.1x the time of the epochs they measured``; None without phases."""
    p = summary.phases
    measured = p.get("planned", 0.0) + p.get("extra", 0.0)
    total = sum(p.values())
    if measured <= 0:
        return None
    return (
        f"the trials took {total / measured:.1f}x the time of the epochs they measured "
        f"({duration(total)} for {duration(measured)} of measured epochs)"
    )


def settled_line(summary: Summary) -> str | None:
    """``settled after 17 trials: 23 not needed (~12.0 min saved)``; None when the study did
    not stop before its cap."""
    from loadersearch.search import QUIET_FOR

    s = summary.settled
    if not s:
        return None
    left = int(s["total"]) - int(s["after"])
    return (
        f"settled after {s['after']} trials: {left} not needed (~{duration(s['saved_s'])} saved; "
        f"none of the last {QUIET_FOR} measured above trial {s['best']})"
    )


def cost(summary: Summary) -> str:
    """What the answer cost: trials, measuring time, the confirmation, what pruning saved."""
    c = summary.counts
    text = (
        f"{summary.finished} trials ({c['complete']} complete, {c['pruned']} pruned, "
        f"{c['infeasible']} infeasible"
        + (f", {c['failed']} failed" if c["failed"] else "")
        + f") measured for {duration(summary.pruning['spent_s'])}"
    )
    if summary.confirm_s:
        text += f", the confirmation for {duration(summary.confirm_s)}"
    if summary.confirm_skipped:
        text += (
            f" ({summary.confirm_measured} confirmation measurements; "
            f"{summary.confirm_skipped} of its rounds not needed: they could not change the "
            "winner)"
        )
    text += f": {duration(summary.tuning_s)} in all."
    if summary.drift_said and summary.trial_drift:
        from loadersearch.search import drift_sentence

        text += f" In the confirmation, {drift_sentence(summary.trial_drift)}."
    settled = settled_line(summary)
    if settled:
        text += f" The study {settled}."
    phases = phase_line(summary)
    if phases:
        text += f" In all, {phases}."
    if summary.pruning["saved_s"]:
        text += (
            f" Pruning saved about {duration(summary.pruning['saved_s'])} "
            f"({summary.pruning['fraction']:.0%} of the trials' time)."
        )
    return text


def baseline_header(epochs: int) -> list[str]:
    return ["baseline", "config", "img/s", "from", "speedup", f"saved over {epochs} epochs"]


def baseline_cells(b: BaselineResult) -> list[str]:
    """One row of the baselines table, as every view shows it."""
    return [
        b.name,
        b.label,
        f"{b.rate:.1f}" if b.rate else "-",
        b.source,
        f"{b.speedup:.2f}x" if b.speedup else "-",
        duration(b.saved_s) if b.saved_s is not None else "-",
    ]


def finalist_header(rounds: int) -> list[str]:
    return ["trial", "config", "trial img/s", f"median of {rounds}", "min..max", "spread"]


def finalist_cells(f: Finalist) -> list[str]:
    """One row of the confirmation table."""
    return [
        str(f.trial),
        f.label + (f" (baseline {f.baseline})" if f.baseline else ""),
        f"{f.trial_value:.1f}" if f.trial_value is not None else "-",
        f"{f.median:.1f}" + (f" (of {f.n}: out)" if f.out_after else ""),
        f"{f.low:.1f}..{f.high:.1f}",
        f"{f.spread:.1%}" if f.spread is not None else "-",
    ]


def epoch_time(summary: Summary) -> str | None:
    """``projected epoch (16 images): 0.2 s; 300 epochs: 59.4 s``, when known."""
    w = summary.winner
    if w is None or not w.epoch_time_s:
        return None
    return (
        f"projected epoch ({summary.dataset_images} images): {duration(w.epoch_time_s)}; "
        f"{summary.epochs_planned} epochs: {duration(w.epoch_time_s * summary.epochs_planned)}"
    )


def cache_line(summary: Summary) -> str | None:
    """The winner's cache: ``memmap cache: built once in 4.1 s, 18.0 MiB on disk; saves 2.9 s
    per epoch over the best configuration without a cache (w2 b16 pf4: 128.3 img/s), so the
    build pays for itself in 1.4 epochs``, when the winner reads from one."""
    c = summary.cache
    if c is None:
        return None
    if c.mode == "none":
        return "no cache: the fastest configuration reads the image files as they are"
    where = "on disk" if c.mode == "memmap" else "of memory"
    size = f"{c.bytes / 2**20:,.1f} MiB {where}" if c.bytes else ""
    if c.mode == "memmap" and c.build_s is not None:
        cost = f"built once in {_seconds(c.build_s)}" + (f", {size}" if size else "")
    else:
        cost = size or "cost not recorded"
    text = f"{c.mode} cache: {cost}"
    if c.saved_per_epoch_s is None:
        return text + " (no configuration without a cache was measured: --search-cache does)"
    text += (
        f"; {'saves' if c.saved_per_epoch_s >= 0 else 'costs'} "
        f"{_seconds(abs(c.saved_per_epoch_s))} per epoch over the best configuration without "
        f"a cache ({c.without}: {c.without_rate:,.1f} img/s)"
    )
    if c.build_s and c.saved_per_epoch_s > 0:
        text += f", so its build pays for itself in {c.build_s / c.saved_per_epoch_s:.1f} epochs"
    return text


def skipped_lines(summary: Summary, names: int | None = None) -> list[str]:
    """What ``--skip-bad-samples`` left out or replaced: a sentence with the counts, then the
    files the study names (``path: reason``; up to ``names`` of them and how many more);
    [] when nothing was skipped."""
    s = summary.skipped
    counts = [
        (s.get("left_out"), "left out for bad labels"),
        (s.get("undecodable"), "not decodable at the dataset check"),
        (s.get("failed_decoding"), "failed when decoded while measuring"),
    ]
    parts = [f"{n} {what}" for n, what in counts if n]
    if not parts:
        return []
    files = [*(s.get("reasons") or []), *(s.get("failed_decoding_files") or [])]
    lines = [
        f"--skip-bad-samples: {', '.join(parts)} (each undecodable image replaced by the next "
        "one):"
    ]
    names = len(files) if names is None else names
    lines += [f"  {name}" for name in files[:names]]
    if len(files) > names:
        lines.append(f"  ... and {len(files) - names} more (study attribute skipped_samples)")
    return lines


def _seconds(value: float) -> str:
    return f"{value:.2f} s" if value < 10 else duration(value)


def probe(summary: Summary) -> str | None:
    """The batch-size probe's finding (``largest batch under the cap: 32 ...``), if stored."""
    if not summary.probe:
        return None
    from loadersearch.search import ProbeResult

    return ProbeResult.from_dict(summary.probe).describe()
