"""DataLoaderTuner in real Lightning training (CPU; a CSVLogger in the test's directory, no
logger that phones home): a linear model over a dataset with an emulated storage latency (so
that the worker count matters on 2 cores), each sample carrying its index and the id of the
process that loaded it. Online, the first epoch is served by several candidates and the rest
by the chosen one, every sample once per epoch, and the choice reaches the logger; with a
study, its winner's knobs serve from the first batch; without Lightning, one line."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import lightning.pytorch as pl
import psutil
import pytest
import torch
from helpers.wait import wait_for
from helpers.winner_study import make_winner_study
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader, Dataset

from loadersearch import AutoLoader, LoaderConfig
from loadersearch._cpu_budget import cpu_budget
from loadersearch.integrations.lightning import DataLoaderTuner

N = 320  # 80 batches of 4 an epoch
SMALL = {"max_workers": 2, "window_steps": 2}  # a segment: 4 warm-up + 8 measured steps


class Tagged(Dataset):
    """``n`` samples read with a 2 ms latency (a sleep: storage, not CPU), each
    ``[index, pid of the loading process, 0, ...]``, labelled ``index % 2``."""

    def __init__(self, n: int = N) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(0.002)
        x = torch.zeros(8)
        x[0], x[1] = index, os.getpid()
        return x, index % 2


class Model(pl.LightningModule):
    """Records, per step: the epoch, the batch's indices, the loading processes, and the
    configuration the train dataloader served it with (an AutoLoader's ``serving``)."""

    def __init__(self, **loader: object) -> None:
        super().__init__()
        self.net = nn.Linear(8, 2)
        self.loader = {"batch_size": 4, "shuffle": True, **loader}
        self.steps: list[tuple[int, list[int], set[int], LoaderConfig | None]] = []

    def train_dataloader(self) -> DataLoader:
        return DataLoader(Tagged(), **self.loader)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int):
        x, y = batch
        serving = getattr(self.trainer.train_dataloader, "serving", None)
        pids = set(x[:, 1].long().tolist())
        self.steps.append((self.current_epoch, x[:, 0].long().tolist(), pids, serving))
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def epoch(self, k: int) -> list[int]:
        return sorted(i for e, batch, _, _ in self.steps if e == k for i in batch)


def _trainer(tmp_path, tuner: DataLoaderTuner, **kwargs: object) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        logger=CSVLogger(tmp_path),
        callbacks=[tuner],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=10,
        **{"max_epochs": 2, **kwargs},
    )


def _children() -> set[int]:
    return {p.pid for p in psutil.Process().children(recursive=True)}


def _hparams(logger: CSVLogger) -> dict[str, object]:
    """What the logger wrote to hparams.yaml."""
    import yaml

    with open(os.path.join(logger.log_dir, "hparams.yaml")) as f:
        return yaml.safe_load(f)


def _csv_metrics(logger: CSVLogger) -> list[dict[str, str]]:
    import csv

    with open(os.path.join(logger.log_dir, "metrics.csv"), newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_it_tunes_during_the_first_epoch_and_logs_the_choice(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="loadersearch.integrations.lightning")
    before = _children()
    tuner = DataLoaderTuner(**SMALL)
    model = Model()
    trainer = _trainer(tmp_path, tuner)
    trainer.fit(model)

    loader = trainer.train_dataloader
    assert isinstance(loader, AutoLoader) and loader is tuner.loader  # swapped in
    report = tuner.report
    assert report is not None and loader.config == report.config
    # Every sample once in each epoch, across the switches of the first.
    assert model.epoch(0) == list(range(N)) and model.epoch(1) == list(range(N))
    first = {s.label() for e, _, _, s in model.steps if e == 0}
    assert len(first) >= 3  # the user's w0, other candidates, then the chosen one
    assert {s for e, _, _, s in model.steps if e == 1} == {report.config}  # the choice serves
    if report.config.num_workers:  # loaded in worker processes, not here
        assert all(os.getpid() not in p for e, _, p, _ in model.steps if e == 1)

    # The choice reaches the logger: parameters and measured metrics, and a log line.
    hparams = _hparams(trainer.logger)
    assert hparams["loadersearch/num_workers"] == report.config.num_workers
    assert hparams["loadersearch/source"] == "online"
    rows = [r for r in _csv_metrics(trainer.logger) if r.get("loadersearch/images_per_s")]
    assert len(rows) == 1
    assert float(rows[0]["loadersearch/images_per_s"]) == pytest.approx(report.images_per_s)
    assert float(rows[0]["loadersearch/tuning_steps"]) == report.tuning_steps
    assert "loadersearch/tuning_cost_s" in rows[0]
    lines = [r.getMessage() for r in caplog.records if "tuned online" in r.getMessage()]
    assert len(lines) == 1 and f"num_workers={report.config.num_workers}" in lines[0]
    # The settled loader's persistent workers are stopped when fit() ends.
    wait_for(lambda: not (_children() - before), what="no DataLoader worker left", timeout=30)


@pytest.mark.slow
def test_each_rank_tunes_within_its_share_of_the_cpus(tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # what torchrun sets for 2 ranks per node
    caplog.set_level(logging.INFO, logger="loadersearch.integrations")
    budget = cpu_budget()  # this process's CPUs, shared by the LOCAL_WORLD_SIZE ranks
    share = budget.worker_bound
    assert budget.ranks == 2 and share <= max(1, len(os.sched_getaffinity(0)) // 2)
    tuner = DataLoaderTuner(window_steps=2)  # no max_workers: the rank's share decides
    trainer = _trainer(tmp_path, tuner, max_epochs=1)
    trainer.fit(Model())
    top = tuner.loader.shape.warmup - 2  # a segment's warm-up: the ladder's top + 2 steps
    tried = {c.num_workers for c in tuner.loader.tuner.candidates}
    assert top <= share and max(tried) <= share and tried >= {0, 1}
    assert any("CPU budget" in r.getMessage() and "2 ranks" in r.getMessage()
               for r in caplog.records)  # fmt: skip


@pytest.mark.slow
def test_a_stored_studys_winner_serves_from_the_first_batch(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="loadersearch.integrations.lightning")
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    winner = LoaderConfig(num_workers=2, batch_size=8, prefetch_factor=3, persistent_workers=True)
    make_winner_study(storage, "stored", winner, slower=LoaderConfig(num_workers=0, batch_size=8))
    tuner = DataLoaderTuner(study="stored", storage=storage)
    model = Model()  # its own DataLoader: w0, batches of 4
    trainer = _trainer(tmp_path, tuner, max_epochs=1)
    trainer.fit(model)

    loader = trainer.train_dataloader
    assert type(loader) is DataLoader and tuner.loader is None  # applied, not tuned
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (2, 3, True)
    assert loader.batch_size == 4  # the study's 8 changes training: not applied
    assert model.epoch(0) == list(range(N))
    loaded_by = set().union(*(p for _, _, p, _ in model.steps))
    assert os.getpid() not in loaded_by and len(loaded_by) == 2  # the study's two workers
    assert _hparams(trainer.logger)["loadersearch/source"] == "study stored"
    assert any("from study stored" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_a_cut_epoch_is_not_tuned_and_says_why(tmp_path, caplog) -> None:
    trainer = _trainer(tmp_path, DataLoaderTuner(**SMALL), max_epochs=1, limit_train_batches=10)
    model = Model()
    trainer.fit(model)
    assert type(trainer.train_dataloader) is DataLoader and len(model.steps) == 10
    assert any("limit_train_batches" in r.getMessage() for r in caplog.records)


def test_an_unknown_option_is_refused_when_the_callback_is_made() -> None:
    with pytest.raises(TypeError, match="batch_sizes.*max_workers"):
        DataLoaderTuner(batch_sizes=[8, 16])


def test_without_lightning_the_import_says_which_extra_to_install() -> None:
    code = (
        "import sys\nsys.modules['lightning'] = None\nimport loadersearch.integrations.lightning"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "loadersearch.integrations.FrameworkMissingError: lightning is not installed: "
        "pip install 'loadersearch[lightning]'"
    )


@pytest.mark.slow
def test_the_example_tunes_and_logs(tmp_path) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "examples", "lightning_tuner.py")
    args = ["--images", "256", "--size", "16", "--batch-size", "4", "--epochs", "2",
            "--max-workers", "2", "--window-steps", "2",
            "--logs", str(tmp_path / "logs")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}  # busy 2 cores: no OpenMP spin-waits
    done = subprocess.run([sys.executable, script, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(from online)" in done.stdout
    assert "tuned online in" in done.stderr  # the log line
