"""What a study found, read from the storage only: summaries, parameter importance, plots,
the one-page HTML report, and the notes optuna-dashboard shows. Knows nothing of how a trial
ran.

- :mod:`._reading`: open a study for reading.
- :mod:`._summary`: :func:`summarize`, the winner (confirmed, else the best trial), the
  baselines' speedups, every trial ranked, the tuning cost.
- :mod:`._answer`: :func:`load_best`, :func:`env_lines` and the lines to paste
  (:func:`answer_lines`, :func:`answer_python`; a DDP job's with its sampler and torchrun).
- :mod:`._importance`: importance on distinct finished configurations.
- :mod:`._plots`: history, importance, slice and contour as plotly and PNG; a trial's windows.
- :mod:`._html`: ``index.html``, the report a person opens.
- :mod:`._notes`: the study's and the trials' notes in optuna-dashboard (written by the
  processes that run the study, not by ``loadersearch report``).
- :mod:`._text`: the answer as text (:func:`render_summary`), what a run prints at its end.
- :mod:`._progress`: the displays of a running study (:func:`make_progress`): a live panel on
  a terminal, plain lines otherwise.
"""

from __future__ import annotations

from loadersearch.report._answer import answer_lines, answer_python, env_lines, load_best
from loadersearch.report._diagnose_target import winner_target
from loadersearch.report._format import (
    baseline_cells,
    baseline_header,
    baselines_source,
    cache_line,
    cost,
    duration,
    epoch_time,
    finalist_cells,
    machine_load,
    phase_line,
    phase_rows,
    settled_line,
    skipped_lines,
    winner_evidence,
    winner_title,
)
from loadersearch.report._html import answer_html, write_report
from loadersearch.report._importance import Importance, importances
from loadersearch.report._machines import MachineRow, machines
from loadersearch.report._notes import (
    NoteContext,
    note_trial,
    publish,
    study_note,
    trial_hooks,
    trial_note,
    window_artifact_hook,
)
from loadersearch.report._plots import write_plots
from loadersearch.report._progress import PlainProgress, RichProgress, make_progress
from loadersearch.report._reading import open_study, space_fixed
from loadersearch.report._separation import (
    baselines_not_separated,
    finalists_not_separated,
    inconclusive_note,
    not_separated,
)
from loadersearch.report._summary import BaselineResult, Finalist, Summary, Winner, summarize
from loadersearch.report._text import dashboard_command, render_summary

__all__ = [
    "answer_html",
    "BaselineResult",
    "Finalist",
    "Importance",
    "MachineRow",
    "NoteContext",
    "PlainProgress",
    "RichProgress",
    "Summary",
    "Winner",
    "answer_lines",
    "answer_python",
    "baseline_cells",
    "baseline_header",
    "baselines_not_separated",
    "baselines_source",
    "cache_line",
    "cost",
    "dashboard_command",
    "duration",
    "env_lines",
    "epoch_time",
    "finalist_cells",
    "finalists_not_separated",
    "importances",
    "inconclusive_note",
    "load_best",
    "machine_load",
    "machines",
    "make_progress",
    "not_separated",
    "note_trial",
    "open_study",
    "phase_line",
    "phase_rows",
    "publish",
    "render_summary",
    "settled_line",
    "skipped_lines",
    "space_fixed",
    "study_note",
    "summarize",
    "trial_hooks",
    "trial_note",
    "window_artifact_hook",
    "winner_evidence",
    "winner_title",
    "write_plots",
    "winner_target",
    "write_report",
]
