"""A real browser, as a new user would look: headless Chromium (Debian's ``chromium``, driven
by Playwright) opens optuna-dashboard on a finished study and the report's index.html, and
finds the confirmed winner, the trials and the importance charts drawn.

Skipped only where no browser can be run: no Playwright, or no Chromium (``.ci/run`` installs
Debian's chromium package). Screenshots go to ``$LOADERSEARCH_SCREENSHOTS`` when set, else to
the test's tmp folder. They show this test's small emulated study; the README's pictures
(docs/report.png, docs/dashboard.png) are of a real default run (docs/development.md).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.studies import EmulatedStudy, dashboard_server, run_cli, study_id

from loadersearch import LoaderConfig
from loadersearch.report import open_study

playwright = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[test]')"
)
expect = playwright.expect
CHROMIUM_ENV = "LOADERSEARCH_CHROMIUM"
# Flags for a sandboxed machine without network: no background connections, no GPU.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
DEADLINE_MS = 30_000  # every expect() polls the page until this deadline


def _chromium() -> str | None:
    found = os.environ.get(CHROMIUM_ENV)
    if found:
        return found
    return next(
        (p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p),
        None,
    )


# Decided before any fixture runs, so that a machine without a browser skips at once.
pytestmark = pytest.mark.skipif(
    _chromium() is None,
    reason=f"no Chromium found (apt-get install chromium, or set ${CHROMIUM_ENV})",
)


@pytest.fixture(scope="module")
def page() -> Iterator[playwright.Page]:
    executable = _chromium()
    with playwright.sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        # A persistent context on a new, empty profile folder: nothing from an earlier run.
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=executable,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(DEADLINE_MS)
        expect.set_options(timeout=DEADLINE_MS)
        try:
            yield context.new_page()
        finally:
            context.close()


@pytest.fixture(scope="module")
def winner(emulated_study: EmulatedStudy) -> dict:
    result = run_cli(["best", "--storage", emulated_study.storage, "--study", emulated_study.name])
    assert result.exit_code == 0, result.output
    best = json.loads(result.output)
    assert best["confirmed"] is True
    # On a busy machine the confirmation may be inconclusive: the pages say so in its title.
    title = "Inconclusive winner (busy machine)" if best["inconclusive"] else "Confirmed winner"
    label = LoaderConfig.from_dict(best["config"]).label()
    return {"trial": best["trial"], "label": label, "title": title}


def _screenshot_dir(tmp_path: Path) -> Path:
    chosen = os.environ.get("LOADERSEARCH_SCREENSHOTS")
    return Path(chosen) if chosen else tmp_path


def test_the_dashboard_shows_the_study_its_trials_the_importance_and_the_winner_s_note(
    emulated_study: EmulatedStudy, winner: dict, page: playwright.Page, tmp_path: Path
) -> None:
    with dashboard_server(emulated_study.storage) as base:
        sid = study_id(base, emulated_study.name)
        page.goto(f"{base}/dashboard/studies/{sid}")
        expect(page.get_by_text(f"{emulated_study.name} (id={sid})")).to_be_visible()
        # The dashboard's own importance chart and loadersearch's card, both drawn by plotly.
        expect(page.get_by_role("heading", name="Hyperparameter Importance")).to_be_visible()
        expect(
            page.locator("#graph-hyperparameter-importances .bars .point").first
        ).to_be_visible()
        card = page.locator(".js-plotly-plot", has_text="Parameter importance on")
        expect(card.locator(".bars .point").first).to_be_visible()
        expect(page.get_by_text("images/s (projected full epoch)").first).to_be_visible()

        page.goto(f"{base}/dashboard/studies/{sid}/trials?numbers={winner['trial']}")
        for number in range(len(open_study(emulated_study.storage, emulated_study.name).trials)):
            expect(page.get_by_text(f"Trial {number}", exact=True)).to_be_visible()
        expect(page.get_by_text(winner["title"]).first).to_be_visible()

        page.goto(f"{base}/dashboard/studies/{sid}/note")
        heading = page.get_by_role("heading", name=f"{winner['title']}: {winner['label']}")
        expect(heading).to_be_visible()
        expect(page.get_by_text("loadersearch begin")).to_have_count(0)  # markers unseen
        page.screenshot(path=str(_screenshot_dir(tmp_path) / "dashboard.png"))


def test_the_report_page_shows_the_confirmed_winner_and_its_plots_offline(
    emulated_study: EmulatedStudy, winner: dict, page: playwright.Page, tmp_path: Path
) -> None:
    out = tmp_path / "report"
    result = run_cli(["report", "--storage", emulated_study.storage, "--out", str(out)])
    assert result.exit_code == 0, result.output
    requested: list[str] = []
    page.on("request", lambda r: requested.append(r.url))
    page.goto((out / "index.html").as_uri())
    expect(page.locator("#winner")).to_have_text(winner["label"])
    expect(page.locator("#winner")).to_have_attribute("data-trial", str(winner["trial"]))
    expect(page.locator("#paste")).to_contain_text("DataLoader(dataset, ")
    # plotly.min.js beside the page draws every plot: no network needed.
    expect(page.locator("#plot-importance .main-svg").first).to_be_visible()
    expect(page.locator("#plot-history .main-svg").first).to_be_visible()
    assert [u for u in requested if not u.startswith("file://")] == []
    page.screenshot(path=str(_screenshot_dir(tmp_path) / "report.png"))
