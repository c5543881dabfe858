"""``run --search-cache``: the cache mode as a knob of the study's space, measured with the
cache it names, and the answer's cache line (one-time build cost next to the per-epoch
saving)."""

from __future__ import annotations

import dataclasses

import optuna
import pytest
from helpers.studies import HOST, quick_settings, run_cli, steady_measure

from loadersearch import LoaderConfig
from loadersearch.report import answer_python, cache_line, open_study, summarize
from loadersearch.search._objective import workload_for
from loadersearch.search._settings import Overrides, SpecError, resolve_settings
from loadersearch.search._space import SearchSpace
from loadersearch.search._space_text import SpaceError
from loadersearch.search._structured import StructuredStrategy
from loadersearch.workload import WorkloadSpec


def test_the_cache_is_not_searched_unless_asked():
    space = SearchSpace()
    assert space.cache == () and "cache" not in space.describe()
    assert all(c.cache is None for c in space.configs())
    assert "cache" not in space.distributions()


def test_a_searched_cache_multiplies_the_configurations_and_clamps_baselines_to_none():
    plain = SearchSpace(num_workers=(0, 1), batch_size=(8, 8))
    space = plain.with_range("cache", "all")
    assert space.cache == ("none", "ram", "memmap")
    assert len(space.configs()) == 3 * len(plain.configs())
    assert space.clamp(LoaderConfig(1, 8)).cache == "none"
    config = LoaderConfig(1, 8, prefetch_factor=2, cache="memmap")
    assert space.config_of(space.params_of(config)) == config
    assert "memmap" in config.label()
    assert space.with_fixed("cache", "memmap").fixed()["cache"] == "memmap"
    with pytest.raises(SpaceError, match="none, ram, memmap"):
        plain.with_range("cache", "none,ssd")


def test_the_objective_measures_each_configuration_with_its_own_cache():
    workload = WorkloadSpec(kind="emulated")
    assert workload_for(workload, LoaderConfig(cache="memmap")).cache == "memmap"
    assert workload_for(workload, LoaderConfig()) is workload


def test_the_structured_search_tries_the_other_caches_early():
    space = SearchSpace(num_workers=(0, 4), batch_size=(8, 16)).with_range("cache", "all")
    strategy = StructuredStrategy(space)
    best = strategy.start
    moves = [m for m, _ in strategy.moves(best, lambda c, minor: False, {})]
    caches = [m.cache for m in moves[:6]]
    assert "ram" in caches and "memmap" in caches


def test_search_cache_is_refused_with_a_fixed_cache_or_a_pipeline(tmp_path):
    overrides = Overrides()
    overrides.workload = {"cache": "memmap"}
    overrides.space_ranges = {"cache": "all"}
    with pytest.raises(SpecError, match="give one of them"):
        resolve_settings(None, overrides, hardware=HOST, storage="sqlite://")
    overrides.workload = {"kind": "loader"}
    overrides.pipeline = {"dataset": "helpers.pipelines:make_dataset"}
    with pytest.raises(SpecError, match="built-in dataset"):
        resolve_settings(None, overrides, hardware=HOST, storage="sqlite://")


def _cache_study(tiny_dataset, tmp_path, monkeypatch, rates):  # noqa: ANN001, ANN202
    """A study of 6 trials searching none and memmap, measured at ``rates[cache]``."""
    from loadersearch.search._study import run_study

    monkeypatch.setenv("LOADERSEARCH_CACHE_DIR", str(tmp_path / "caches"))
    settings = quick_settings(tmp_path, trials=6)
    settings = dataclasses.replace(
        settings,
        workload=dataclasses.replace(settings.workload, data=tiny_dataset, img_size=64),
        space=settings.space.with_range("cache", "none,memmap"),
        baselines=False,
    )

    def measure(workload, config, plan, **kw):  # noqa: ANN001, ANN003
        result = steady_measure(rates[workload.cache])(workload, config, plan, **kw)
        return dataclasses.replace(result, dataset_images=16)

    return settings, run_study(settings, measure_fn=measure, hardware=HOST).study


def test_a_study_whose_winner_reads_no_cache_says_so(tiny_dataset, tmp_path, monkeypatch):
    rates = {"none": 300.0, "memmap": 100.0}
    settings, study = _cache_study(tiny_dataset, tmp_path, monkeypatch, rates)
    summary = summarize(open_study(settings.storage, study.study_name))
    assert summary.winner.config.cache == "none" and summary.cache.mode == "none"
    assert cache_line(summary).startswith("no cache")


def test_the_summary_names_the_cache_its_cost_and_its_saving(tiny_dataset, tmp_path, monkeypatch):
    rates = {"none": 100.0, "memmap": 400.0}  # memmap reads 4x faster here
    settings, study = _cache_study(tiny_dataset, tmp_path, monkeypatch, rates)
    assert study.user_attrs["caches"]["memmap"]["images"] == 16  # built before the trials
    study.set_user_attr("caches", {"memmap": {"mode": "memmap", "build_s": 3.0, "bytes": 2**20}})
    summary = summarize(open_study(settings.storage, study.study_name))
    assert summary.winner.config.cache == "memmap"
    c = summary.cache
    assert c.mode == "memmap" and c.without_rate == pytest.approx(100.0)
    n = summary.dataset_images
    assert n == 16 and c.saved_per_epoch_s == pytest.approx(n / 100.0 - n / 400.0)
    line = cache_line(summary)
    assert "built once in 3.00 s" in line and "per epoch" in line and "pays for itself" in line
    assert answer_python(summary).endswith("# measured reading the images from the memmap cache")
    # the same line on the report page and in the study's note in optuna-dashboard
    from loadersearch.report import answer_html, importances, study_note

    assert 'id="cache"' in answer_html(summary) and "pays for itself" in answer_html(summary)
    assert "Memmap cache: built once in 3.00 s" in study_note(summary, importances(study))
    assert study.user_attrs["spec"]["space"]["cache"] == ["none", "memmap"]
    assert isinstance(optuna.load_study(study_name="t", storage=settings.storage), optuna.Study)


def test_run_search_cache_builds_the_memmap_once_and_answers_with_its_cost(
    tiny_dataset, tmp_path, monkeypatch
):
    monkeypatch.setenv("LOADERSEARCH_CACHE_DIR", str(tmp_path / "caches"))
    storage = f"sqlite:///{tmp_path / 's.db'}"
    args = ["run", "--data", tiny_dataset, "--workload", "loader", "--img-size", "64",
            "--search-cache", "--space", "cache=none,memmap",  # narrowed: fewer trials
            "--space", "num_workers=0:1", "--fix", "batch_size=4",
            "--epochs", "1", "--steps", "2", "--windows-per-epoch", "1", "--warmup-steps", "1",
            "--trials", "8", "--confirm-rounds", "1", "--storage", storage]  # fmt: skip
    result = run_cli(args)
    assert result.exit_code == 0, result.output
    assert "memmap cache: 16 images pre-decoded at <= 64 px" in result.output
    assert "cachesearch" in result.output
    built = list((tmp_path / "caches").glob("*.lscache"))
    assert len(built) == 1
    study = open_study(storage, None)
    assert study.user_attrs["caches"]["memmap"]["build_s"] > 0
    caches = {t.params.get("cache") for t in study.trials}
    assert {"none", "memmap"} <= caches
    summary = summarize(study)
    if summary.cache is not None:  # the winner reads from a cache: its line is printed
        assert cache_line(summary).split(";")[0] in result.output.replace("\n", " ")
