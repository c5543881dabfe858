"""index.html: one page with the answer and the evidence, readable offline."""

from __future__ import annotations

import os
import re

import pytest
from hand_study import WINNER, make_study

from loadersearch.report import importances, summarize, write_report
from loadersearch.report._html import render_html


def test_the_page_shows_the_confirmed_winner_and_the_line_to_paste(hand_study):
    page = render_html(summarize(hand_study), importances(hand_study), {})
    assert f'<span id="winner" data-trial="3">{WINNER.label()}</span>' in page
    assert f'<pre id="paste"><code>{WINNER.snippet()}</code></pre>' in page
    assert '<table id="baselines">' in page and '<table id="confirmation">' in page
    assert "Test CPU, 8 CPUs (4 physical cores)" in page
    assert "PED-ANOVA on 4 distinct finished configurations (trials 0-3)" in page
    assert "&quot;Best Trial&quot; is trial 2" in page
    assert "Largest batch under the cap: 32 (probed 32 fits, 64 over)." in page


def test_an_unconfirmed_study_says_so():
    study = make_study(confirmed=False)
    page = render_html(summarize(study), importances(study), {})
    assert "Best trial (not confirmed)" in page and "Not confirmed yet" in page


def test_text_from_the_study_is_escaped(hand_study):
    hand_study.set_user_attr("workload_description", "<script>alert(1)</script>")
    page = render_html(summarize(hand_study), importances(hand_study), {})
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)" in page


@pytest.mark.slow
def test_write_report_writes_index_plots_and_pngs_with_no_script_from_the_network(
    hand_study, tmp_path
):
    written = write_report(hand_study, str(tmp_path))
    assert written[0] == str(tmp_path / "index.html")
    files = set(os.listdir(tmp_path))
    assert {"index.html", "plotly.min.js", "history.png", "importance.png"} <= files
    assert {"history.html", "importance.html", "slice.html"} <= files
    page = (tmp_path / "index.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert scripts == ["plotly.min.js"]
    assert 'id="plot-importance"' in page and 'href="importance.png"' in page
    for name in ("history.html", "importance.html"):
        assert "cdn.plot.ly" not in (tmp_path / name).read_text()


@pytest.mark.slow
def test_a_study_without_trials_still_gets_a_page(tmp_path):
    import optuna

    written = write_report(optuna.create_study(direction="maximize"), str(tmp_path))
    page = (tmp_path / "index.html").read_text()
    assert written[0] == str(tmp_path / "index.html")
    assert "No feasible trial yet." in page and "no finished feasible configuration" in page
