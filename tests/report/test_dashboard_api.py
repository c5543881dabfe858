"""optuna-dashboard, a real server on a real finished study, read through its own API: the
notes name the confirmed winner, the metric is named, the importance card and each trial's
window picture are there."""

from __future__ import annotations

import json
import urllib.request

from helpers.studies import EmulatedStudy, dashboard_server, get_json, run_cli, study_id

from loadersearch import LoaderConfig
from loadersearch.report._notes import BEGIN, IMPORTANCE_PLOT_ID, WINDOWS_PNG
from loadersearch.search import METRIC_NAME


def _best(study: EmulatedStudy) -> dict:
    result = run_cli(["best", "--storage", study.storage, "--study", study.name])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_the_study_note_names_the_confirmed_winner_and_the_metric_is_named(
    emulated_study: EmulatedStudy,
) -> None:
    best = _best(emulated_study)
    assert best["confirmed"] is True
    label = LoaderConfig.from_dict(best["config"]).label()
    with dashboard_server(emulated_study.storage) as base:
        detail = get_json(f"{base}/api/studies/{study_id(base, emulated_study.name)}")
    assert detail["objective_names"] == [METRIC_NAME]
    note = detail["note"]["body"]
    assert note.startswith(BEGIN)
    # On a busy machine the confirmation may be inconclusive; both say so in the same words.
    title = "Inconclusive winner (busy machine)" if best["inconclusive"] else "Confirmed winner"
    assert f"## {title}: {label} (EMULATED accelerator)" in note
    assert f"**{best['images_per_s']:.1f} img/s (median of 1 interleaved" in note
    assert f"trial {best['trial']}." in note
    # The finalists `best` says are as good as the winner are the ones the note names.
    alike = {LoaderConfig.from_dict(e["config"]).label(): e["baselines"]
             for e in best["within_noise"]}  # fmt: skip
    assert ("Finalists within the noise" in note) == any(not b for b in alike.values())
    assert ("Within the noise: the rounds" in note) == any(alike.values())
    assert all(f"{label}: " in note if baseline else f"{label} (" in note
               for label, baseline in alike.items())  # fmt: skip
    trials = {t["number"]: t for t in detail["trials"]}
    assert trials[best["trial"]]["note"]["body"].startswith(f"{BEGIN}\n\n**{title}**")


def test_every_trial_has_a_note_and_measured_trials_their_window_picture(
    emulated_study: EmulatedStudy,
) -> None:
    with dashboard_server(emulated_study.storage) as base:
        sid = study_id(base, emulated_study.name)
        detail = get_json(f"{base}/api/studies/{sid}")
        trials = detail["trials"]
        assert trials and all(t["note"]["body"].startswith(BEGIN) for t in trials)
        assert "**Baseline `pytorch`**" in trials[0]["note"]["body"]
        pruned = [t for t in trials if t["state"] == "Pruned"]
        # (whether a trial was pruned is tests/search/test_study.py's question, on this study)
        assert all("**Pruned after window" in t["note"]["body"] for t in pruned)
        pictures = [(t, a) for t in trials for a in t["artifacts"] if a["filename"] == WINDOWS_PNG]
        assert {t["number"] for t, _ in pictures} >= {0, 1, 2}  # the measured baselines
        trial, artifact = pictures[0]
        url = f"{base}/artifacts/{sid}/{trial['trial_id']}/{artifact['artifact_id']}"
        with urllib.request.urlopen(url, timeout=30) as response:
            assert response.headers["Content-Type"] == "image/png"
            assert response.read(8) == b"\x89PNG\r\n\x1a\n"
        assert IMPORTANCE_PLOT_ID in [g["id"] for g in detail["plotly_graph_objects"]]
