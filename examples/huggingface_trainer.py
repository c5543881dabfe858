"""Tune a Hugging Face Trainer's DataLoader while it trains, and keep the answer for the next
run as TrainingArguments fields.

    python examples/huggingface_trainer.py --epochs 3
    python examples/huggingface_trainer.py --study my-study   # a stored study's winner

A small ViT built from its config (no download) on torchvision's FakeData (random images made
on the fly, then augmented: the loader's CPU work). ``DataLoaderTuner`` tunes the Trainer's
train DataLoader during the first epoch, keeps the best for the later epochs, writes it into
the ``dataloader_*`` fields of ``trainer.args`` and into ``trainer.state.log_history``, and
prints the fields to paste into the next run's ``TrainingArguments``.
"""

from __future__ import annotations

import argparse
import logging
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # everything here is built locally

import torch  # noqa: E402
from torch.utils.data import Dataset  # noqa: E402
from torchvision import datasets, transforms  # noqa: E402
from transformers import (  # noqa: E402
    Trainer,
    TrainingArguments,
    ViTConfig,
    ViTForImageClassification,
)

from loadersearch.integrations.huggingface import DataLoaderTuner  # noqa: E402


class FakeImages(Dataset):
    """torchvision's FakeData, augmented, as the dicts the Trainer passes to the model."""

    def __init__(self, images: int, size: int, classes: int) -> None:
        augment = transforms.Compose(
            [
                transforms.RandomResizedCrop(size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
            ]
        )
        self.data = datasets.FakeData(
            size=images, image_size=(3, 2 * size, 2 * size), num_classes=classes,
            transform=augment,
        )  # fmt: skip

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor | int]:
        image, label = self.data[index]
        return {"pixel_values": image, "labels": int(label)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--size", type=int, default=32, help="training crop, pixels")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="hf_out", help="the Trainer's output_dir")
    parser.add_argument("--study", help="apply this stored study's winner instead of tuning")
    parser.add_argument("--storage", help="the study's storage (loadersearch run's default)")
    parser.add_argument("--max-workers", type=int, help="top of the worker ladder")
    parser.add_argument("--window-steps", type=int, default=8, help="steps per measured window")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("loadersearch").setLevel(logging.INFO)  # the choice, its cost, saving

    classes = 4
    config = ViTConfig(
        image_size=args.size,
        patch_size=8,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        num_labels=classes,
    )
    training = TrainingArguments(
        output_dir=args.out,
        per_device_train_batch_size=args.batch_size,
        num_train_epochs=args.epochs,
        report_to="none",
        save_strategy="no",
        logging_steps=20,
        disable_tqdm=True,
    )
    options = {"window_steps": args.window_steps}
    if args.max_workers is not None:
        options["max_workers"] = args.max_workers
    tuner = DataLoaderTuner(study=args.study, storage=args.storage, **options)
    trainer = Trainer(
        model=ViTForImageClassification(config),
        args=training,
        train_dataset=FakeImages(args.images, args.size, classes),
        callbacks=[tuner],  # the one line this example is about
    )
    trainer.train()
    fields = ", ".join(f"{k}={v!r}" for k, v in tuner.arguments().items())
    print(f"Next run: TrainingArguments(..., {fields})")


if __name__ == "__main__":
    main()
