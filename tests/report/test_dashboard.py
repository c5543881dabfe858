"""The real optuna-dashboard server on the study's database, read over HTTP."""

from __future__ import annotations

from helpers.studies import EmulatedStudy, dashboard_server, get_json, study_id

from loadersearch.search import KNOBS


def test_dashboard_serves_the_study_and_the_importance_of_the_five_knobs(
    emulated_study: EmulatedStudy,
) -> None:
    with dashboard_server(emulated_study.storage) as base:
        sid = study_id(base, emulated_study.name)
        importances = get_json(f"{base}/api/studies/{sid}/param_importances")
        names = {p["name"] for p in importances["param_importances"][0]}
        assert names == set(KNOBS) - {"start_method", "cache"}  # not searched by default
