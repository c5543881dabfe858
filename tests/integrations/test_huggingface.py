"""DataLoaderTuner in real Hugging Face Trainer training (CPU, offline: a tiny ViT built from
its config, no download, no reporting integration): an in-memory image dataset with an
emulated storage latency, each image carrying its index and the id of the process that
loaded it in its first pixels. Online, the first epoch is served by several candidates, every
image once per epoch in batches of the Trainer's size, and the TrainingArguments and the log
history hold the choice; with a study, its winner's knobs serve from the first batch and
``dataloader_arguments`` gives the same fields; without transformers, one line."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no network: nothing is downloaded
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402
from helpers.winner_study import make_winner_study  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402
from transformers import (  # noqa: E402
    Trainer,
    TrainingArguments,
    ViTConfig,
    ViTForImageClassification,
)

from loadersearch import AutoLoader, LoaderConfig  # noqa: E402
from loadersearch.errors import StudyError  # noqa: E402
from loadersearch.integrations.huggingface import (  # noqa: E402
    DataLoaderTuner,
    dataloader_arguments,
)

N = 320  # 80 batches of 4 an epoch
SMALL = {"max_workers": 2, "window_steps": 2}


class Images(Dataset):
    """``n`` 3x16x16 images read with a 2 ms latency (a sleep: storage, not CPU); pixel
    (0, 0, 0) holds the index and (0, 0, 1) the loading process's id."""

    def __init__(self, n: int = N) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> dict[str, object]:
        time.sleep(0.002)
        x = torch.rand(3, 16, 16)
        x[0, 0, 0], x[0, 0, 1] = index, os.getpid()
        return {"pixel_values": x, "labels": index % 3}


def _model(seen: list[tuple[list[int], set[int]]]) -> ViTForImageClassification:
    """A one-layer ViT from its config (no weights to download) that records each batch's
    indices and loading processes."""
    config = ViTConfig(image_size=16, patch_size=8, num_channels=3, hidden_size=16,
                       num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                       num_labels=3)  # fmt: skip
    model = ViTForImageClassification(config)

    def record(module, args, kwargs) -> None:
        if module.training:
            x = kwargs["pixel_values"]
            seen.append((x[:, 0, 0, 0].long().tolist(), set(x[:, 0, 0, 1].long().tolist())))

    model.register_forward_pre_hook(record, with_kwargs=True)
    return model


def _args(tmp_path, **kwargs: object) -> TrainingArguments:
    return TrainingArguments(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=4,
        report_to="none",
        save_strategy="no",
        use_cpu=True,
        disable_tqdm=True,
        logging_steps=20,
        **{"num_train_epochs": 2, **kwargs},
    )


def _epoch(seen: list[tuple[list[int], set[int]]], k: int, steps: int = N // 4) -> list[int]:
    return sorted(i for batch, _ in seen[k * steps : (k + 1) * steps] for i in batch)


@pytest.mark.slow
def test_it_tunes_during_the_first_epoch_and_fills_the_arguments(tmp_path, caplog) -> None:
    caplog.set_level(logging.INFO, logger="loadersearch.integrations.huggingface")
    seen: list[tuple[list[int], set[int]]] = []
    tuner = DataLoaderTuner(max_workers=2, window_steps=3)  # rounded up to 4: accumulation 2
    args = _args(tmp_path, gradient_accumulation_steps=2)
    trainer = Trainer(model=_model(seen), args=args, train_dataset=Images(), callbacks=[tuner])
    trainer.train()

    loader = tuner.loader
    assert isinstance(loader, AutoLoader) and loader.shape.window_steps == 4
    report = tuner.report
    assert report is not None and report.config.batch_size == 4
    assert len(loader.tuner.candidates) >= 2  # it tried configurations
    # Every image once per epoch, in the Trainer's batches of 4, after the switches too.
    assert len(seen) == 2 * N // 4 and {len(batch) for batch, _ in seen} == {4}
    assert _epoch(seen, 0) == list(range(N)) and _epoch(seen, 1) == list(range(N))
    if report.config.num_workers:  # the second epoch loaded in the chosen workers
        assert all(os.getpid() not in pids for _, pids in seen[N // 4 :])

    # The TrainingArguments hold the choice (for the loaders built from now on, and the
    # next run), as do the log history and a log line.
    chosen = {
        "dataloader_num_workers": report.config.num_workers,
        "dataloader_prefetch_factor": report.config.prefetch_factor,
        "dataloader_pin_memory": False,
        "dataloader_persistent_workers": report.config.persistent_workers,
    }
    assert tuner.arguments() == chosen
    assert {k: getattr(trainer.args, k) for k in chosen} == chosen
    records = [h for h in trainer.state.log_history if "loadersearch/images_per_s" in h]
    assert len(records) == 1
    assert records[0]["loadersearch/images_per_s"] == pytest.approx(report.images_per_s)
    assert records[0]["loadersearch/num_workers"] == report.config.num_workers
    assert records[0]["loadersearch/source"] == "online"
    assert "loadersearch/tuning_cost_s" in records[0]
    assert any("tuned online" in r.getMessage() for r in caplog.records)


@pytest.mark.slow
def test_a_stored_studys_winner_fills_the_arguments_and_serves(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    winner = LoaderConfig(num_workers=2, batch_size=8, prefetch_factor=3, persistent_workers=True)
    make_winner_study(storage, "stored", winner, slower=LoaderConfig(num_workers=0, batch_size=8))
    fields = {
        "dataloader_num_workers": 2,
        "dataloader_prefetch_factor": 3,
        "dataloader_pin_memory": False,  # no accelerator here
        "dataloader_persistent_workers": True,
    }
    assert dataloader_arguments(study="stored", storage=storage) == fields

    seen: list[tuple[list[int], set[int]]] = []
    tuner = DataLoaderTuner(study="stored", storage=storage)
    args = _args(tmp_path, num_train_epochs=1)  # the Trainer's defaults: no workers
    trainer = Trainer(model=_model(seen), args=args, train_dataset=Images(), callbacks=[tuner])
    trainer.train()

    assert tuner.loader is None and tuner.arguments() == fields  # applied, not tuned
    assert {k: getattr(trainer.args, k) for k in fields} == fields
    assert _epoch(seen, 0) == list(range(N))
    loaded_by = set().union(*(pids for _, pids in seen))
    assert os.getpid() not in loaded_by and len(loaded_by) == 2  # the study's two workers
    records = [h for h in trainer.state.log_history if "loadersearch/source" in h]
    assert [r["loadersearch/source"] for r in records] == ["study stored"]


def test_dataloader_arguments_names_a_missing_study(tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    make_winner_study(storage, "stored", LoaderConfig(num_workers=1, batch_size=8),
                      slower=LoaderConfig(num_workers=0, batch_size=8))  # fmt: skip
    with pytest.raises(StudyError, match="no study 'other'.*stored"):
        dataloader_arguments(study="other", storage=storage)


def test_without_transformers_the_import_says_which_extra_to_install() -> None:
    code = (
        "import sys\nsys.modules['transformers'] = None\n"
        "import loadersearch.integrations.huggingface"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        "loadersearch.integrations.FrameworkMissingError: transformers is not installed: "
        "pip install 'loadersearch[transformers]'"
    )


@pytest.mark.slow
def test_the_example_tunes_and_prints_the_arguments(tmp_path) -> None:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    script = os.path.join(root, "examples", "huggingface_trainer.py")
    args = ["--images", "256", "--size", "16", "--batch-size", "4", "--epochs", "2",
            "--max-workers", "2", "--window-steps", "2",
            "--out", str(tmp_path / "out")]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, script, *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Next run: TrainingArguments(..., dataloader_num_workers=" in done.stdout
    assert "tuned online in" in done.stderr  # the log line
