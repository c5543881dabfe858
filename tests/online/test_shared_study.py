"""Online and offline tuning agree and share a study: an offline study of a pipeline (real
measuring processes, the emulated accelerator), then AutoLoader on the same pipeline in this
process: on its own it settles within its budget on a configuration within a few percent of
the study's winner, measured side by side; with ``study=`` it races the stored winners and
writes its result back as a trial labelled online."""

from __future__ import annotations

import functools
import statistics
import time

import pytest
import torch
from helpers import pipelines
from torch.utils.data import DataLoader

import loadersearch
from loadersearch import LoaderConfig
from loadersearch.workload import EmulatedAccelerator

STEP_MS = 4.0  # the emulated accelerator: 4 ms a batch
SAMPLE_MS = 2.0  # storage latency per sample: one worker loads a batch of 4 in ~8 ms
N = 480  # 120 batches of 4 an epoch
DATASET = functools.partial(pipelines.make_slow_dataset, n=N, ms=SAMPLE_MS)
PLAN = {"epochs": 2, "steps": 24, "windows_per_epoch": 4, "warmup_steps": 8, "timeout_s": 120}


def _offline_study(storage: str) -> loadersearch.TuneResult:
    return loadersearch.tune(
        dataset=DATASET,
        workload="emulated",
        emulated_ms=(STEP_MS, 0.0),
        storage=storage,
        study="offline",
        space={"num_workers": (0, 4)},
        fix={"batch_size": 4, "pin_memory": False, "prefetch_factor": 2},
        plan=PLAN,
        trials=6,
        confirm_rounds=1,
        seed=0,
    )


def _rate(config: LoaderConfig, steps: int = 60) -> float:
    """Steps/s of the training loop with a plain DataLoader of ``config`` (its first
    ``num_workers + 2`` steps excluded, as a segment's warm-up is)."""
    device = EmulatedAccelerator(ms=(STEP_MS, 0.0), mib=(0.0, 0.0), cap_bytes=None)
    kwargs = config.dataloader_kwargs()
    loader = DataLoader(DATASET(), shuffle=True, **kwargs)
    warm = config.num_workers + 2
    t0 = 0.0
    for k, batch in enumerate(loader):
        if k == warm:
            t0 = time.perf_counter()
        if k == warm + steps:
            break
        device.step(len(batch))
    return steps / (time.perf_counter() - t0)


def _side_by_side(a: LoaderConfig, b: LoaderConfig, rounds: int = 5) -> float:
    """Median rate of ``a`` over median rate of ``b``, measured interleaved."""
    ra, rb = [], []
    for _ in range(rounds):
        ra.append(_rate(a))
        rb.append(_rate(b))
    return statistics.median(ra) / statistics.median(rb)


def _train(loader: loadersearch.AutoLoader, epochs: int) -> None:
    device = EmulatedAccelerator(ms=(STEP_MS, 0.0), mib=(0.0, 0.0), cap_bytes=None)
    for _ in range(epochs):
        for batch in loader:
            device.step(len(batch))


@pytest.mark.slow
def test_online_settles_near_the_offline_winner_and_shares_the_study(tmp_path, capsys) -> None:
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    offline = _offline_study(storage)
    assert offline.best is not None

    loader = loadersearch.AutoLoader(DATASET(), batch_size=4, shuffle=True, max_workers=4)
    _train(loader, 2)  # the default budget: 6 segments, 216 of the 240 steps
    report = loader.report
    assert report is not None and report.tuning_steps <= loader.tuner.budget
    chosen = LoaderConfig.from_dict({**loader.config.to_dict(), "persistent_workers": False})
    winner = LoaderConfig.from_dict({**offline.best.to_dict(), "persistent_workers": False})
    ratio = _side_by_side(chosen, winner)
    with capsys.disabled():
        print(
            f"\nonline {chosen.label()} / offline winner {winner.label()}: {ratio:.3f} "
            f"(tuned in {report.tuning_steps} steps, {report.tuning_s:.1f} s; cost "
            f"{report.cost_s:.1f} s, {report.slower_steps} steps on slower candidates)"
        )
    assert ratio >= 0.8  # "within a few percent", loosely: this machine is shared and noisy
    loader.close()

    # With the study: the stored winners are raced, and the result goes back to the study.
    seeded = loadersearch.AutoLoader(
        DATASET(), batch_size=4, shuffle=True, study="offline", storage=storage, epochs=10
    )
    stored = {c.num_workers for c in seeded.tuner._ladder[1:]}
    assert winner.num_workers in stored and seeded.tuner.seeded
    _train(seeded, 2)
    seeded.close()
    study = loadersearch.report.open_study(storage, "offline")
    online = [t for t in study.get_trials() if t.user_attrs.get("online")]
    assert len(online) == 1
    trial = online[0]
    assert trial.user_attrs["label"] == "online"
    assert trial.value == pytest.approx(seeded.report.images_per_s)
    assert trial.params.get("num_workers") == seeded.config.num_workers
    assert trial.user_attrs["online_saved_s"] == pytest.approx(seeded.report.saved_s, abs=1e-3)
    rows = loadersearch.report.summarize(study).rows  # the report labels it
    assert [r["trial"] for r in rows if r["online"]] == [trial.number]
    # ... but never ranks it for the study's answer: its value is another measure (a real
    # loop's images/s, not the projected full epoch), whatever its size.
    from loadersearch.search import feasible_complete

    assert trial.number not in [t.number for t in feasible_complete(study)]
    assert trial.number in [t.number for t in feasible_complete(study, include_online=True)]


def test_a_missing_study_is_logged_and_the_ladder_is_climbed(tmp_path, caplog) -> None:
    storage = f"sqlite:///{tmp_path / 'none.db'}"
    torch.manual_seed(0)
    loader = loadersearch.AutoLoader(
        pipelines.Slow(16, 0.0), batch_size=4, study="nope", storage=storage, max_workers=1
    )
    assert not loader.tuner.seeded and "not using study 'nope'" in caplog.text
