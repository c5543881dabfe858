"""The tabular benchmark's results: the table's landscape and noise, the replay's figures per
method and budget, the targets of issue 12; as Markdown, JSON and a plot."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from bench_tabular.replay import RANDOM_SEARCH, percentile
from bench_tabular.table import Table
from loadersearch import LoaderConfig
from loadersearch.measure import coefficient_of_variation
from loadersearch.search import SearchSpace

TARGET = 0.97
DEFAULT_METHOD = "loadersearch (structured)"  # the default sampler (search.sampler)


def landscape(table: Table) -> dict[str, Any]:
    """What the table says about the problem: optimum, noise, the best per worker count and
    per batch, pin_memory's (absent) effect, the infeasible batches, the load it was measured
    under."""
    config, optimum = table.optimum()
    values = {c: table.true_value(c) for c in table.repeats}
    ranked = sorted(values, key=values.get, reverse=True)
    cvs = [
        coefficient_of_variation([r.objective for r in reps])
        for reps in table.repeats.values()
        if len(reps) > 1 and all(r.status == "ok" for r in reps)
    ]
    pin = []
    for pinned, reps in table.pinned.items():
        base = values.get(LoaderConfig.from_dict({**pinned.to_dict(), "pin_memory": False}))
        ok = [r.objective for r in reps if r.status == "ok"]
        if base and ok:
            pin.append({"config": pinned.label(), "pinned": statistics.mean(ok), "unpinned": base,
                        "ratio": statistics.mean(ok) / base})  # fmt: skip
    measurements = [r for reps in table.repeats.values() for r in reps]
    return {
        "optimum": {"config": config.label(), "value": optimum},
        "top": [
            {
                "config": c.label(),
                "value": values[c],
                "quality": values[c] / optimum,
                "repeats": [r.objective for r in table.repeats[c]],
            }
            for c in ranked[:8]
        ],  # fmt: skip
        "within_3pct": sum(v >= 0.97 * optimum for v in values.values()),
        "points": len(values),
        "noise_cv_median": statistics.median(cvs) if cvs else None,
        "noise_cv_p90": percentile(sorted(cvs), 90) if cvs else None,
        "repeats_per_point": statistics.median(len(r) for r in table.repeats.values()),
        "by_workers": {
            w: max(v for c, v in values.items() if c.num_workers == w) for w in table.workers
        },  # fmt: skip
        "by_batch": {
            b: max(v for c, v in values.items() if c.batch_size == b) for b in table.batches
        },  # fmt: skip
        "pin": pin,
        "over_cap": {b: [r.reason for r in reps] for b, reps in table.over_cap.items()},
        "measuring_s": sum(r.wall_s for r in measurements),
    }


def targets(summary: dict[str, Any], budgets: list[int]) -> list[dict[str, Any]]:
    default = summary.get(DEFAULT_METHOD)
    rand = summary.get(RANDOM_SEARCH)
    out = []
    if default and 14 in default["budgets"]:
        p10 = default["budgets"][14]["p10"]
        out.append({"target": f"{DEFAULT_METHOD}: 10th percentile >= 97% of the optimum at "
                              "budget 14", "measured": f"{100 * p10:.1f}%",
                    "verdict": "PASS" if p10 >= TARGET else "MISS"})  # fmt: skip
    if default and rand:
        worse = [b for b in budgets if b in default["budgets"] and b in rand["budgets"]
                 and (default["budgets"][b]["median"] < rand["budgets"][b]["median"]
                      or default["budgets"][b]["p10"] < rand["budgets"][b]["p10"])]  # fmt: skip
        shown = ", ".join(
            f"{b}: {_pct(default['budgets'][b]['p10'])} vs {_pct(rand['budgets'][b]['p10'])}"
            for b in budgets if b in default["budgets"] and b in rand["budgets"]
        )  # fmt: skip
        out.append({"target": f"{DEFAULT_METHOD} above random search at every budget (median "
                              "and 10th percentile)", "measured": f"p10 {shown}",
                    "verdict": "PASS" if not worse else f"MISS at {worse}"})  # fmt: skip
    return out


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100 * x:.1f}%"


def markdown(data: dict[str, Any]) -> str:
    meta, land, summary = data["meta"], data["landscape"], data["summary"]
    budgets = data["report_budgets"]
    lines = [
        "# Tabular search benchmark: every method replayed against one measured table",
        "",
        f"Table: `benchmarks/data/tabular-grid.json.gz`, made by `{meta.get('command', '?')}` "
        f"(commit {meta.get('commit', '?')}) on {meta.get('machine', '?')}. "
        f"Workload: {meta.get('workload_desc', '?')}. Plan: {meta.get('plan_desc', '?')}.",
        "",
        f"Grid: {meta.get('grid_desc', '?')}. {data['measurements']} measurements, "
        f"{land['repeats_per_point']:g} per grid point, measured round-robin (every point once, "
        f"then every point again, in a new order each round) in "
        f"{land['measuring_s'] / 60:.0f} min of measuring time between {meta.get('started')} "
        f"and {meta.get('finished')}. The 2 cores were shared with other engineers' work: load "
        f"average (1 min) during the measurements: median {data['load']['median']:.1f}, range "
        f"{data['load']['min']:.1f}-{data['load']['max']:.1f}.",
        "",
        f"Optimum: **{land['optimum']['config']}**, {land['optimum']['value']:.1f} img/s "
        f"(mean of its repeats). Noise: median CV of a point's repeats "
        f"{_pct(land['noise_cv_median'])} (90th percentile {_pct(land['noise_cv_p90'])}). "
        f"{land['within_3pct']} of {land['points']} configurations lie within 3% of the optimum.",
        "",
        "Best value by num_workers (over the other knobs): "
        + ", ".join(f"{w}: {v:.0f}" for w, v in land["by_workers"].items())
        + " img/s. By batch: "
        + ", ".join(f"{b}: {v:.0f}" for b, v in land["by_batch"].items())
        + " img/s.",
        "",
        "pin_memory (no CUDA here, so no pinned copies): pinned / unpinned twin "
        + ", ".join(f"{p['config']} {p['ratio']:.3f}" for p in land["pin"])
        + "; the replay reads a pinned configuration from its unpinned twin. Over the VRAM cap: "
        + "; ".join(f"batch {b}: {', '.join(map(str, r))}" for b, r in land["over_cap"].items())
        + " (the batch-size probe bounds the space below it; every method searches that space).",
        "",
        f"Replay: {data['seeds']} seeds per method; search space {data['space']}; a trial draws "
        "one of the point's measured repeats (worker counts and prefetch factors between the "
        "grid's are interpolated between their measured neighbours). Quality = true value of "
        "the answer / true optimum. Costs are the table's measuring times.",
        "",
        "Methods: `loadersearch (S)` is the whole pipeline with sampler S (the three baselines "
        "first, no configuration measured twice, the Wilcoxon pruner on the drawn windows, the "
        "interleaved confirmation of the finalists, 3 rounds): `structured` (the default), "
        "`gp` and `tpe` (Optuna's GPSampler and multivariate TPE after 5 random start-up trials "
        "besides the baselines), `random` (uniform, no repeats); `tpe-before` is loadersearch "
        "before issue 12 (TPE with 8 start-up trials that the baselines use up, repeats "
        "reused as wasted trials). `random search` is what a user would run instead: Optuna's "
        "RandomSampler over the same space, no pruning, no baselines, the best trial seen.",
        "",
        "| method | budget | quality median | 10th pct | worst | seeds >= 97% | pruned | "
        "repeated trials | search time | confirmation |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method, s in summary.items():
        for b in budgets:
            r = s["budgets"].get(b)
            if r is None:
                continue
            lines.append(
                f"| {method} | {b} | {_pct(r['median'])} | {_pct(r['p10'])} | {_pct(r['worst'])} "
                f"| {100 * r['reach']:.0f}% | {r['pruned']:.1f} | {r['repeats']:.1f} | "
                f"{r['search_s']:.0f} s | {r['confirm_s']:.0f} s |"
            )
    top = max(data["all_budgets"])
    lines += ["", f"Budget for 90% of seeds to reach 97% of the optimum (budgets 4-{top}):",
              "", "| method | budget |", "|---|---:|"]  # fmt: skip
    for method, s in summary.items():
        lines.append(f"| {method} | {s['budget_for_90pct'] or 'not reached'} |")
    lines += ["", "| target | measured | verdict |", "|---|---|---|"]
    lines += [f"| {t['target']} | {t['measured']} | {t['verdict']} |" for t in data["targets"]]
    lines += [
        "",
        "Caveats. (1) One table, one machine, one workload: the structured search's rules come "
        "from the known shape of the problem (workers rise then saturate, the largest batch "
        "first), but the order of its moves and its rule for baselines were settled after a "
        "first replay against the table's first round; its unit tests check it on other "
        "shapes (a peak anywhere from 1 to 24 workers, the best batch the largest or not). "
        "(2) With 8 steps per measured epoch, more than 8 workers add no parallelism, only "
        "start-up cost, and their rate includes it (issue 9 sizes the measurement to the "
        "configuration): the table is the objective as loadersearch measures it today. "
        "(3) The machine was shared (load average above): the noise is larger than on a quiet "
        "machine, which makes the comparison harder for every method alike.",
    ]
    lines += ["", "![quality against budget](tabular-benchmark.png)", ""]
    return "\n".join(lines)


def plot(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.8))
    for i, (method, s) in enumerate(data["summary"].items()):
        budgets = sorted(s["budgets"])
        color = f"C{i}"
        ax.plot(budgets, [100 * s["budgets"][b]["median"] for b in budgets], color=color,
                label=f"{method} median")  # fmt: skip
        ax.plot(budgets, [100 * s["budgets"][b]["p10"] for b in budgets], color=color,
                linestyle="--", label=f"{method} 10th pct")  # fmt: skip
    ax.axhline(100 * TARGET, color="grey", linewidth=0.8)
    ax.set_xlabel("budget (trials, baselines included)")
    ax.set_ylabel("true value of the answer (% of the optimum)")
    ax.set_ylim(bottom=max(50, ax.get_ylim()[0]), top=100.5)
    ax.set_title(f"Tabular benchmark: {data['seeds']} seeds per method")
    ax.legend(fontsize=7, ncol=2, loc="lower right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(
    summary: dict[str, Any],
    rows: list[dict[str, Any]],
    table: Table,
    *,
    space: SearchSpace,
    seeds: int,
    report_budgets: list[int],
    out: Path,
    replay_s: float,
) -> dict[str, Path]:
    meta = dict(table.meta)
    loads = [m for m in (meta.get("loads") or [])]
    data = {
        "meta": meta,
        "landscape": landscape(table),
        "summary": summary,
        "targets": targets(summary, report_budgets),
        "seeds": seeds,
        "space": space.describe(),
        "report_budgets": report_budgets,
        "all_budgets": sorted({r["budget"] for r in rows}),
        "measurements": meta.get("measurements", 0),
        "load": {
            "median": statistics.median(loads) if loads else float("nan"),
            "min": min(loads) if loads else float("nan"),
            "max": max(loads) if loads else float("nan"),
        },
        "replay_s": replay_s,
        "rows": rows,
    }
    return render(data, out)


def render(data: dict[str, Any], out: Path) -> dict[str, Path]:
    """Write the Markdown, the JSON (rows at the reported budgets only) and the plot."""
    data = dict(data)
    data["rows"] = [r for r in data["rows"] if r["budget"] in data["report_budgets"]]
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out / "tabular-benchmark.md",
        "json": out / "tabular-benchmark.json",
        "plot": out / "tabular-benchmark.png",
    }
    paths["markdown"].write_text(markdown(data))
    paths["json"].write_text(json.dumps(data, default=str))
    plot(data, paths["plot"])
    return paths
