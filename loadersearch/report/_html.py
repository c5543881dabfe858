"""``index.html``: the report a person opens. The answer and the line to paste, the baselines,
the confirmation, the machine, parameter importance and the plots, and every trial.

It reads offline: the text and tables are plain HTML; the plots are plotly divs drawn by the
one ``plotly.min.js`` written beside the page (no CDN), each with its PNG linked for when
scripts are off. The words are :mod:`._format`'s and :mod:`._notes`', as in the terminal and
the dashboard.
"""

from __future__ import annotations

import html
import os
from typing import TYPE_CHECKING

from loadersearch.report._answer import answer_python
from loadersearch.report._format import (
    baseline_cells,
    baseline_header,
    baselines_source,
    cache_line,
    cost,
    epoch_time,
    finalist_cells,
    finalist_header,
    machine,
    noise,
    probe,
    sentence,
    winner_evidence,
    winner_title,
)
from loadersearch.report._importance import Importance, importances
from loadersearch.report._plots import figures, write_figures_html, write_pngs
from loadersearch.report._separation import (
    baselines_not_separated,
    best_trial_differs,
    finalists_not_separated,
    inconclusive_note,
)
from loadersearch.report._summary import Summary, summarize
from loadersearch.report._trials import COMPLETE

if TYPE_CHECKING:
    import optuna
    import plotly.graph_objects as go

PLOT_TITLES = {
    "history": "Optimization history",
    "importance": "Parameter importance",
    "slice": "Each knob against images/s",
    "contour_workers_batch": "num_workers x batch_size",
}
_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1100px; margin: 2em auto; padding: 0 1em;
       color: #222; line-height: 1.45; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ddd; }
.emulated { background: #c62828; color: white; padding: 0 0.4em; border-radius: 3px; }
.answer { background: #f1f8e9; border: 1px solid #aed581; padding: 0.6em 1em; }
pre { background: #f5f5f5; padding: 0.6em; white-space: pre-wrap; word-break: break-all; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: left; }
td.num { text-align: right; } .muted { color: #666; }
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _table(table_id: str, header: list[str], rows: list[list[str]]) -> str:
    """A table of already-escaped cells (a cell that looks like a number is right-aligned)."""
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="num">{c}</td>' if c[:1].isdigit() or c[:1] == "-" else f"<td>{c}</td>"
            for c in cells
        )
        + "</tr>"
        for cells in rows
    )
    return f'<table id="{table_id}"><tr>{head}</tr>{body}</table>'


def write_report(study: optuna.Study, out_dir: str) -> list[str]:
    """``index.html`` with the plots embedded, the plots as HTML and PNG files beside it.
    Returns the files written, ``index.html`` first."""
    os.makedirs(out_dir, exist_ok=True)
    summary = summarize(study)
    importance = importances(study)
    figs = figures(study, importance)
    written = write_figures_html(figs, out_dir) + write_pngs(study, out_dir, importance)
    html = render_html(summary, importance, figs)
    pair = _diagnosis_pair(study, out_dir)  # written by `loadersearch diagnose`, if it ran
    if pair:
        written.append(pair[0])
        html = html.replace("</body></html>", pair[1] + "</body></html>")
    index = os.path.join(out_dir, "index.html")
    with open(index, "w", encoding="utf-8") as f:
        f.write(html)
    return [index, *written]


def _diagnosis_pair(study: optuna.Study, out_dir: str) -> tuple[str, str] | None:
    """PyTorch's defaults beside the winner, as `loadersearch diagnose` measured them and
    stored them in the study: the PNG written and the index's section, or None."""
    from loadersearch.diagnose import PAIR_ATTR, pair_png

    record = study.user_attrs.get(PAIR_ATTR)
    if not record:
        return None
    path = pair_png(record, os.path.join(out_dir, "default-vs-winner.png"))
    section = (
        '<section id="diagnosis"><h2>Why the GPU idled: PyTorch\'s defaults vs the winner'
        f"</h2><p>{_e(record.get('summary', ''))}</p>"
        '<p class="muted">Measured by <code>loadersearch diagnose</code>: red, the step waiting '
        "for data; green, fed.</p>"
        '<img src="default-vs-winner.png" alt="defaults vs winner timelines" '
        'style="max-width:100%"></section>'
    )
    return path, section


def render_html(summary: Summary, importance: Importance, figs: dict[str, go.Figure]) -> str:
    sections = [
        answer_html(summary),
        _baselines(summary),
        _confirmation(summary),
        _cost_and_machine(summary),
        _importance(importance),
        _plots(figs),
        _trials(summary),
    ]
    emulated = ' <span class="emulated">EMULATED</span>' if summary.emulated else ""
    script = '<script src="plotly.min.js"></script>' if figs else ""
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>loadersearch: {_e(summary.study)}</title><style>{_CSS}</style>{script}"
        f"</head><body><h1>Study {_e(summary.study)}{emulated}</h1>"
        f'<p class="muted">{_e(summary.description)}</p>'
        + "".join(s for s in sections if s)
        + "</body></html>\n"
    )


def answer_html(summary: Summary) -> str:
    w = summary.winner
    if w is None:
        return '<section id="answer" class="answer"><p>No feasible trial yet.</p></section>'
    status = winner_title(w)
    parts = [
        f'<h2>{status}: <span id="winner" data-trial="{w.trial}">{_e(w.config.label())}</span>'
        "</h2>",
        f"<p><b>{_e(winner_evidence(w))}</b>, trial {w.trial}.</p>",
    ]
    caveat = inconclusive_note(w)
    if caveat:
        parts.append(f'<p id="inconclusive"><b>{_e(caveat)}</b></p>')
    epoch = epoch_time(summary)
    if epoch:
        parts.append(f"<p>{_e(sentence(epoch))}</p>")
    cached = cache_line(summary)
    if cached:
        parts.append(f'<p id="cache">{_e(sentence(cached))}</p>')
    parts.append(
        "<p>Paste into your training code:</p>"
        f'<pre id="paste"><code>{_e(answer_python(summary))}</code></pre>'
        f'<p class="muted">For scripts: <code>loadersearch best --study {_e(summary.study)} '
        "--format json|python|env</code></p>"
    )
    differs = best_trial_differs(summary)
    if differs:
        parts.append(f'<p class="muted" id="best-trial">{_e(differs)}</p>')
    return '<section id="answer" class="answer">' + "".join(parts) + "</section>"


def _baselines(summary: Summary) -> str:
    if not summary.baselines:
        return ""
    rows = [[_e(c) for c in [*baseline_cells(b), b.rule]] for b in summary.baselines]
    close = baselines_not_separated(summary)
    header = [*baseline_header(summary.epochs_planned), "rule"]
    return (
        "<section><h2>Against the baselines</h2>"
        + _table("baselines", header, rows)
        + f'<p class="muted">{_e(baselines_source(summary))}</p>'
        + (f'<p id="not-separated">{_e(close)}</p>' if close else "")
        + "</section>"
    )


def _confirmation(summary: Summary) -> str:
    w = summary.winner
    if not summary.finalists or w is None:
        return (
            "<section><h2>Confirmation</h2><p>Not confirmed yet: the winner is the best single "
            "trial, which is biased upward. <code>loadersearch run</code> with "
            "<code>--confirm-rounds 3</code> re-measures the finalists.</p></section>"
        )
    rows = [[_e(c) for c in finalist_cells(f)] for f in summary.finalists]
    alike = finalists_not_separated(summary)
    stale = ""
    if not summary.confirmation_current:
        stale = (
            f"<p>The confirmation covered {summary.confirmed_after} finished trials; the study "
            f"now holds {summary.finished}: run <code>loadersearch run</code> again to confirm "
            "anew.</p>"
        )
    return (
        f"<section><h2>Confirmation</h2><p>The finalists, re-measured in "
        f"{w.rounds_done or w.rounds} interleaved rounds (A B C A B C ...), so that a drift "
        "of the machine hits each alike; the winner has the highest median. A finalist marked "
        "out was measured no further once the rounds left could not make it the winner.</p>"
        + _table(
            "confirmation",
            finalist_header(w.rounds),
            rows,
        )
        + (f'<p id="finalists-alike">{_e(alike)}</p>' if alike else "")
        + stale
        + "</section>"
    )


def _cost_and_machine(summary: Summary) -> str:
    found = probe(summary)
    probed = f"<p>{_e(sentence(found))}</p>" if found else ""
    return (
        f"<section><h2>What it cost</h2><p>{_e(cost(summary))}</p>{probed}</section>"
        f'<section><h2>Machine</h2><p id="machine">{_e(machine(summary.hardware))}.</p>'
        + (
            f'<p id="cpu-budget">CPU budget: {_e(summary.cpu_budget)}.</p>'
            if summary.cpu_budget
            else ""
        )
        + (
            f'<p id="memory-bound">{_e(summary.memory_bound)}</p>'
            if summary.memory_bound
            else ""
        )
        + f"<p>Noise: {_e(noise(summary))}.</p></section>"
    )


def _importance(importance: Importance) -> str:
    if not importance.values:
        return (
            "<section><h2>Parameter importance</h2><p>Not enough distinct configurations yet: "
            f"{_e(importance.describe())}</p></section>"
        )
    rows = [
        [_e(name), f"{value:.3f}", _e(importance.interval_text(name))]
        for name, value in importance.values.items()
    ]
    return (
        f'<section><h2>Parameter importance</h2><p id="importance-trials">'
        f"{_e(importance.describe())}</p>"
        f'<p id="importance-verdict">{_e(importance.verdict())}</p>'
        + _table("importance", ["knob", "importance", "90% interval"], rows)
        + '<p class="muted">optuna-dashboard\'s own importance chart counts every COMPLETE '
        "trial (repeats and infeasible ones too); the study's note and its card "
        "&quot;Parameter importance on ... distinct configurations&quot; show this one.</p>"
        "</section>"
    )


def _plots(figs: dict[str, go.Figure]) -> str:
    if not figs:
        return ""
    parts = ['<section id="plots"><h2>Plots</h2>']
    for name, fig in figs.items():
        div = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"plot-{name}")
        parts.append(
            f"<h3>{_e(PLOT_TITLES.get(name, name))}</h3>{div}"
            f'<p class="muted"><a href="{name}.png">PNG</a> · <a href="{name}.html">'
            "full page</a></p>"
        )
    return "".join(parts) + "</section>"


def _trials(summary: Summary) -> str:
    rows = []
    for r in summary.rows:
        note = ""
        if r.get("online"):
            note = "online: AutoLoader in a real training loop"
        elif r["repeat_of"] is not None:
            note = f"repeat of trial {r['repeat_of']}"
        elif r["state"] == "queued":
            note = f"retry of trial {r['retry_of']}" if r.get("retry_of") is not None else ""
        elif r["state"] == "pruned":
            note = f"after {r['windows_done']} windows" if r["windows_done"] else ""
        elif r["state"] != COMPLETE:
            note = r["reason"] or ""
        rows.append(
            [
                str(r["trial"]),
                _e(r["state"]),
                f"{r['value']:.1f}" if r["value"] is not None else "-",
                _e(r["config"]),
                _e(r["baseline"] or ""),
                f"{r['wait_fraction']:.0%}" if r["wait_fraction"] is not None else "",
                f"{r['window_cv']:.1%}" if r["window_cv"] is not None else "",
                _e(note),
            ]
        )
    header = ["#", "state", "img/s", "config", "baseline", "data-wait", "window CV", "note"]
    return (
        "<section><h2>Every trial, best first</h2>" + _table("trials", header, rows) + "</section>"
    )
