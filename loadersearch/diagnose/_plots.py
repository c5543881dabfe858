"""Pictures of a diagnosis: the timelines side by side (PNG with matplotlib, HTML with plotly,
as :mod:`loadersearch.report` draws), and the loader's scaling curve.

One column per measurement, one row per signal: when the step waited for data (from the
trainer's per-step timeline: the "GPU-Util jumps between 0 and 100%" picture, drawn on any
device), GPU utilisation (NVML, when there is a GPU), CPU busy per core, disk reads.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from loadersearch.diagnose._findings import Diagnosis, Measurement
    from loadersearch.diagnose._timeline import Timeline


def idle_spans(tl: Timeline) -> list[tuple[float, float]]:
    """``(start, end)`` of every wait for data: when the accelerator had nothing to do."""
    return [(t - w, t) for t, w in zip(tl.step_t, tl.step_wait_s, strict=False) if w > 0]


def epoch_spans(tl: Timeline) -> list[tuple[float, float]]:
    """``(start, last batch)`` of each measured epoch; the gaps between them (a cold
    measurement evicts the page cache there) are not measured."""
    spans = []
    bounds = [*tl.epoch_t, float("inf")]
    for start, nxt in zip(bounds, bounds[1:], strict=False):
        inside = [t for t in tl.step_t if start <= t < nxt]
        if inside:
            spans.append((start, max(inside)))
    return spans


def fed_share(tl: Timeline) -> float | None:
    """Share of the measured time the step was not waiting for data."""
    measured = sum(b - a for a, b in epoch_spans(tl))
    if not tl.step_t or measured <= 0:
        return None
    return max(0.0, 1.0 - sum(tl.step_wait_s) / measured)


def _rows(measurements: list[Measurement]) -> list[str]:
    rows = ["fed"]
    if any(m.timeline and any(v is not None for v in m.timeline.gpu_util) for m in measurements):
        rows.append("gpu")
    rows += ["cpu", "disk"]
    return rows


_TITLES = {
    "fed": "step waiting for data",
    "gpu": "GPU util % (NVML)",
    "cpu": "CPU busy % per core",
    "disk": "disk reads MB/s",
}


def timeline_png(measurements: list[Measurement], path: str, title: str = "") -> str:
    """The timelines of ``measurements`` as one PNG, a column each. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ms = [m for m in measurements if m.timeline is not None]
    rows = _rows(ms)
    fig, axes = plt.subplots(
        len(rows), len(ms), figsize=(4.2 * len(ms), 1.7 * len(rows) + 0.8), squeeze=False,
        sharex="col", sharey="row",
    )  # fmt: skip
    for col, m in enumerate(ms):
        tl = m.timeline
        assert tl is not None
        fed = fed_share(tl)
        head = f"{m.name}: {m.rate:,.0f} img/s" if m.ok else f"{m.name}: {m.status}"
        if fed is not None:
            head += f"\nfed {100 * fed:.0f}% of the time"
        axes[0][col].set_title(head, fontsize=9)
        for row, kind in enumerate(rows):
            ax = axes[row][col]
            if kind == "fed":
                for a, b in epoch_spans(tl):
                    ax.axvspan(a, b, color="#2e7d32", alpha=0.25, lw=0)
                for a, b in idle_spans(tl):
                    ax.axvspan(a, b, color="#c62828", alpha=0.9, lw=0)
                ax.set_ylim(0, 1)
                ax.set_yticks([])
            elif kind == "gpu":
                ax.plot(tl.t, [v if v is not None else float("nan") for v in tl.gpu_util])
                ax.set_ylim(-5, 105)
            elif kind == "cpu":
                if tl.cpu:
                    for core in zip(*tl.cpu, strict=False):
                        ax.plot(tl.t, core, lw=0.8, alpha=0.7)
                ax.set_ylim(-5, 105)
            else:
                ax.plot(tl.t, tl.disk_read_mb_s, color="#6a1b9a")
            for t0 in tl.epoch_t[1:]:
                ax.axvline(t0, color="grey", lw=0.6, ls=":")
            if col == 0:
                ax.set_ylabel(_TITLES[kind], fontsize=8)
            if row == len(rows) - 1:
                ax.set_xlabel("seconds (measured epochs)", fontsize=8)
            ax.tick_params(labelsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def timeline_figure(measurements: list[Measurement], title: str = ""):  # noqa: ANN201
    """The same picture as a plotly figure (for HTML)."""
    from plotly.subplots import make_subplots

    ms = [m for m in measurements if m.timeline is not None]
    rows = _rows(ms)
    fig = make_subplots(
        rows=len(rows),
        cols=len(ms),
        shared_xaxes="columns",
        shared_yaxes="rows",
        column_titles=[f"{m.name}: {m.rate:,.0f} img/s" if m.ok else m.name for m in ms],
        row_titles=[_TITLES[r] for r in rows],
        vertical_spacing=0.06,
    )
    for col, m in enumerate(ms, start=1):
        tl = m.timeline
        assert tl is not None
        for row, kind in enumerate(rows, start=1):
            if kind == "fed":
                xs: list[float | None] = []
                ys: list[float | None] = []
                for a, b in idle_spans(tl):
                    xs += [a, a, b, b, None]
                    ys += [0, 1, 1, 0, None]
                fig.add_scatter(
                    x=xs, y=ys, fill="toself", mode="none", fillcolor="rgba(198,40,40,0.9)",
                    name="waiting for data", showlegend=col == 1, row=row, col=col,
                )  # fmt: skip
            elif kind == "gpu":
                fig.add_scatter(x=tl.t, y=tl.gpu_util, name="GPU util", row=row, col=col)
            elif kind == "cpu":
                for i, core in enumerate(zip(*tl.cpu, strict=False)):
                    fig.add_scatter(
                        x=tl.t, y=list(core), name=f"cpu{i}", line={"width": 1},
                        showlegend=False, row=row, col=col,
                    )  # fmt: skip
            else:
                fig.add_scatter(
                    x=tl.t, y=tl.disk_read_mb_s, name="disk MB/s", showlegend=False,
                    row=row, col=col,
                )  # fmt: skip
    fig.update_layout(title=title, height=220 * len(rows) + 120, width=max(700, 420 * len(ms)))
    return fig


def scaling_png(d: Diagnosis, path: str) -> str:
    """The loader alone: images/s against workers, with the ceiling and the warm pipeline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [(p["workers"], p["rate"]) for p in d.scaling if p["rate"] > 0]
    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    if pts:
        ax.plot(*zip(*pts, strict=True), marker="o", label="loader alone")
    for name, style in (("ceiling", "--"), ("warm", ":"), ("cold", "-.")):
        rate = d.rate(name)
        if rate:
            ax.axhline(rate, ls=style, color="grey", label=f"{name} ({rate:,.0f} img/s)")
    if d.knee_workers:
        ax.axvline(d.knee_workers, color="#c62828", lw=0.8, label="stops scaling")
    ax.set_xlabel("num_workers")
    ax.set_ylabel("images/s")
    ax.set_yscale("log")
    ax.set_title(f"{d.verdict}: loader scaling on {d.cpu_count} CPUs", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(d: Diagnosis, out_dir: str) -> list[str]:
    """``diagnosis.json``, ``timelines.png`` (ceiling, warm, cold), ``remedies.png``,
    ``timelines.html`` (every measurement), ``scaling.png`` and, when the configuration is not
    PyTorch's default, ``default-vs-config.png`` in ``out_dir``.
    Returns the files written (PNG only when matplotlib is installed, HTML only with plotly)."""
    os.makedirs(out_dir, exist_ok=True)
    written = []
    path = os.path.join(out_dir, "diagnosis.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(d.to_dict(), f, indent=1)
    written.append(path)
    shown = [m for m in d.measurements.values() if m.timeline is not None]
    title = f"{d.config.label()} on {d.device}: {d.verdict}"
    pair = [d.measurements[n] for n in ("default", "warm") if n in d.measurements]
    differential = [m for m in shown if m.name in ("ceiling", "warm", "cold")]
    remedies = [d.measurements[r.measurement] for r in d.remedies]
    if remedies:  # each remedy beside the measurement it is compared with
        remedies.insert(0, d.measurements[d.remedies[0].condition])
    written.append(timeline_png(differential, os.path.join(out_dir, "timelines.png"), title))
    if remedies:
        path = os.path.join(out_dir, "remedies.png")
        written.append(timeline_png(remedies, path, f"{d.verdict}: the remedies, measured"))
    if len(pair) == 2:
        path = os.path.join(out_dir, "default-vs-config.png")
        written.append(timeline_png(pair, path, f"PyTorch's defaults vs {d.config.label()}"))
    written.append(scaling_png(d, os.path.join(out_dir, "scaling.png")))
    fig = timeline_figure(shown, title)
    path = os.path.join(out_dir, "timelines.html")
    fig.write_html(path, include_plotlyjs="directory")
    written.append(path)
    return written


PAIR_ATTR = "diagnosis_pair"  # the study user attribute `loadersearch report` draws
_PAIR_SAMPLES = 240  # machine samples kept per timeline in the study (a few KiB each)


def pair_record(d: Diagnosis) -> dict | None:
    """PyTorch's defaults and the diagnosed configuration (warm), compact enough for a study
    attribute: the CPU line is the mean over cores, samples thinned to at most
    :data:`_PAIR_SAMPLES`, figures rounded. None when the warm run was not measured."""
    if "warm" not in d.measurements:
        return None
    out: dict = {"config": d.config.label(), "verdict": d.verdict, "summary": d.summary}
    for name in ("default", "warm"):
        # a configuration that is PyTorch's default is its own "default" measurement
        m = d.measurements.get(name) or d.measurements["warm"]
        tl = m.timeline
        if tl is None:
            return None
        every = max(1, -(-len(tl.t) // _PAIR_SAMPLES))
        keep = range(0, len(tl.t), every)
        r3 = lambda x: None if x is None else round(float(x), 3)  # noqa: E731
        compact = {
            "t": [r3(tl.t[i]) for i in keep],
            "cpu": [[r3(sum(tl.cpu[i]) / max(1, len(tl.cpu[i])))] for i in keep],
            "disk_read_mb_s": [r3(tl.disk_read_mb_s[i]) for i in keep],
            "gpu_util": [r3(tl.gpu_util[i]) for i in keep],
            "gpu_mem_mib": [r3(tl.gpu_mem_mib[i]) for i in keep],
            "step_t": [r3(x) for x in tl.step_t],
            "step_wait_s": [round(x, 4) for x in tl.step_wait_s],
            "epoch_t": [r3(x) for x in tl.epoch_t],
            "nvml": tl.nvml,
        }
        out[name] = {
            "config": m.config.to_dict(),
            "rate": m.rate,
            "wait_fraction": m.wait_fraction,
            "timeline": compact,
        }
    return out


def pair_png(record: dict, path: str) -> str:
    """The stored pair (:func:`pair_record`) drawn as :func:`timeline_png` draws it."""
    from loadersearch._loader_config import LoaderConfig
    from loadersearch.diagnose._findings import Measurement
    from loadersearch.diagnose._timeline import Timeline

    ms = []
    for name in ("default", "warm"):
        part = record[name]
        config = LoaderConfig.from_dict(part["config"])
        ms.append(
            Measurement(
                name="PyTorch's defaults" if name == "default" else "the winner",
                what="",
                config=config,
                status="ok",
                message="",
                rate=part["rate"],
                steady_rate=0.0,
                wait_fraction=part["wait_fraction"],
                window_cv=0.0,
                device="",
                timeline=Timeline.from_dict(part["timeline"]),
            )  # fmt: skip
        )
    title = f"PyTorch's defaults vs {record['config']} (CPU: mean over cores)"
    return timeline_png(ms, path, title)
