"""A small study built by hand (real Optuna, in memory), whose answer is known in advance:

====  ====================  =========================================================
  #   config                what it is
====  ====================  =========================================================
  0   w0 b16                baseline pytorch, 50 img/s
  1   w4 b16 pin pf2        baseline article, 70 img/s; a finalist (median 72)
  2   w2 b32 pin pf4        90 img/s in one measurement: the dashboard's "Best Trial";
                            a finalist (median 85)
  3   w3 b32 pin pf2        88 img/s; the confirmed winner (median 89, 87..90)
  4   w2 b32 pin pf4        a repeat of trial 2
  5   w0 b8                 pruned after 2 of 4 windows, against trial 2
  6   w4 b32 pin pf8        infeasible: over the VRAM cap
  7   w1 b8 pf2             failed
====  ====================  =========================================================
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import TrialState

from loadersearch import LoaderConfig
from loadersearch.search import SearchSpace

SPACE = SearchSpace.from_dict(
    {
        "num_workers": [0, 4],
        "batch_size": [8, 32],
        "batch_step": 8,
        "prefetch_factor": [1, 8],
        "pin_memory": [False, True],
        "persistent_workers": [False, True],
    }
)
PLAN = {"epochs": 2, "windows_per_epoch": 2}  # 4 windows a trial


def cfg(workers: int, batch: int, pin: bool = False, prefetch: int | None = None) -> LoaderConfig:
    return LoaderConfig(
        num_workers=workers,
        batch_size=batch,
        pin_memory=pin,
        prefetch_factor=(prefetch or 2) if workers else None,
    )


def add_trial(
    study: optuna.Study,
    config: LoaderConfig,
    value: float | None,
    *,
    state: TrialState = TrialState.COMPLETE,
    windows: list[float] | None = None,
    **attrs: Any,
) -> optuna.trial.FrozenTrial:
    """One trial through the real path: enqueue, ask, the space suggests, tell."""
    study.enqueue_trial(SPACE.params_of(config))
    trial = study.ask()
    assert SPACE.suggest(trial) == config
    windows = windows if windows is not None else ([value] * 4 if value else [])
    for step, rate in enumerate(windows):
        trial.report(rate, step)
    defaults = {
        "config": config.label(),
        "feasible": True,
        "dataset_images": 1000,
        "wall_s": 4.0,
        "windows_done": len(windows),
        "measured_s": 0.5 * len(windows),
        "window_wait": [0.25] * len(windows),
        "window_cv": 0.02,
        "wait_fraction": 0.25,
        "steady_rate": value,
        "host": "testhost",
    }
    for key, item in {**defaults, **attrs}.items():
        trial.set_user_attr(key, item)
    if state == TrialState.COMPLETE:
        study.tell(trial, value)
    else:
        study.tell(trial, state=state)
    return study.get_trials(deepcopy=False)[-1]


def candidate(trial: int, config: LoaderConfig, value: float, rates: list[float], **extra: Any):
    median = sorted(rates)[len(rates) // 2]
    return {
        "trial": trial,
        "label": config.label(),
        "config": config.to_dict(),
        "baseline": extra.get("baseline"),
        "trial_value": value,
        "median": median,
        "min": min(rates),
        "max": max(rates),
        "spread": round((max(rates) - min(rates)) / median, 4),
        "n": len(rates),
    }


WINNER = cfg(3, 32, True, 2)
BEST_SINGLE = cfg(2, 32, True, 4)


def make_study(*, confirmed: bool = True) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="hand", direction="maximize")
    study.set_user_attr("spec", {"space": SPACE.to_dict(), "plan": PLAN})
    study.set_user_attr("epochs_planned", 100)
    study.set_user_attr("pruner", "wilcoxon")
    probes = [{"batch": 32, "fits": True}, {"batch": 64, "fits": False}]
    study.set_user_attr("probe", {"max_batch": 32, "probes": probes, "skipped": None})
    study.set_user_attr("workload_description", "YOLOv4-tiny train at 416 px")
    study.set_user_attr(
        "hardware",
        {"host": "testhost", "cpu_model": "Test CPU", "cpu_count": 8, "physical_cores": 4,
         "gpu_model": "NVIDIA Test", "gpu_count": 1, "gpu_memory_bytes": 8 * 2**30},
    )  # fmt: skip
    pytorch, article = cfg(0, 16), cfg(4, 16, True, 2)
    study.set_user_attr(
        "baselines",
        [
            {"name": "pytorch", "rule": "PyTorch defaults", "config": pytorch.to_dict()},
            {"name": "article", "rule": "2 x physical cores", "config": article.to_dict()},
        ],
    )
    add_trial(study, pytorch, 50.0, baseline="pytorch")
    add_trial(study, article, 70.0, baseline="article")
    add_trial(study, BEST_SINGLE, 90.0)
    add_trial(study, WINNER, 88.0)
    add_trial(study, BEST_SINGLE, 90.0, repeat_of=2, wall_s=0.0)
    add_trial(study, cfg(0, 8), None, state=TrialState.PRUNED, windows=[30.0, 31.0],
              pruned_against=2, status="pruned")  # fmt: skip
    add_trial(study, cfg(4, 32, True, 8), 0.0, windows=[], feasible=False, status="infeasible",
              infeasible_reason="vram_cap", message="over the VRAM cap at batch 32")  # fmt: skip
    add_trial(study, cfg(1, 8), None, state=TrialState.FAIL, windows=[],
              message="ValueError: boom")  # fmt: skip
    if confirmed:
        study.set_user_attr(
            "confirmation",
            {
                "rounds": 3,
                "finished_trials": 7,
                "time": 0.0,
                "winner": 3,
                "candidates": [
                    candidate(2, BEST_SINGLE, 90.0, [84.0, 85.0, 86.0]),
                    candidate(3, WINNER, 88.0, [87.0, 89.0, 90.0]),
                    candidate(1, article, 70.0, [71.0, 72.0, 73.0], baseline="article"),
                ],
                "measurements": [{"wall_s": 2.0}] * 9,
            },
        )
    return study
