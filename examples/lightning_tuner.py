"""Tune a Lightning training's DataLoader while it trains: one callback, nothing else changes.

    python examples/lightning_tuner.py --epochs 3
    python examples/lightning_tuner.py --study my-study      # apply a stored study's winner

A small CNN on torchvision's FakeData (random images made on the fly, then augmented: the
loader's CPU work), a LightningModule whose ``train_dataloader()`` returns PyTorch's default
DataLoader. ``DataLoaderTuner`` tunes it during the first epoch (num_workers, prefetch_factor,
pinned memory with a GPU), keeps the best for the later epochs, and logs the choice and its
measured cost and saving through the Trainer's logger (here a CSVLogger under --logs).
"""

from __future__ import annotations

import argparse
import logging

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from lightning.pytorch.loggers import CSVLogger
from torch import nn
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from loadersearch.integrations.lightning import DataLoaderTuner


class Classifier(pl.LightningModule):
    def __init__(self, images: int, size: int, batch_size: int, classes: int = 4) -> None:
        super().__init__()
        self.images, self.size, self.batch_size, self.classes = images, size, batch_size, classes
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, classes),
        )  # fmt: skip

    def train_dataloader(self) -> DataLoader:
        augment = transforms.Compose(
            [
                transforms.RandomResizedCrop(self.size),
                transforms.RandomHorizontalFlip(),
                transforms.ToTensor(),
            ]
        )
        data = datasets.FakeData(
            size=self.images,
            image_size=(3, 2 * self.size, 2 * self.size),
            num_classes=self.classes,
            transform=augment,
        )
        return DataLoader(data, batch_size=self.batch_size, shuffle=True, drop_last=True)

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        images, labels = batch
        loss = F.cross_entropy(self.net(images), labels)
        self.log("loss", loss)
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=2048)
    parser.add_argument("--size", type=int, default=64, help="training crop, pixels")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--logs", default="lightning_logs", help="the CSVLogger's directory")
    parser.add_argument("--study", help="apply this stored study's winner instead of tuning")
    parser.add_argument("--storage", help="the study's storage (loadersearch run's default)")
    parser.add_argument("--max-workers", type=int, help="top of the worker ladder")
    parser.add_argument("--window-steps", type=int, default=8, help="steps per measured window")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    logging.getLogger("loadersearch").setLevel(logging.INFO)  # the choice, its cost, saving

    options = {"window_steps": args.window_steps}
    if args.max_workers is not None:
        options["max_workers"] = args.max_workers
    tuner = DataLoaderTuner(study=args.study, storage=args.storage, **options)
    trainer = pl.Trainer(
        max_epochs=args.epochs,
        accelerator="auto",
        logger=CSVLogger(args.logs),
        callbacks=[tuner],  # the one line this example is about
        enable_checkpointing=False,
        enable_progress_bar=False,
        log_every_n_steps=10,
    )
    trainer.fit(Classifier(args.images, args.size, args.batch_size))
    print(f"train DataLoader: {tuner.knobs} (from {tuner.source})")
    print(f"logged to {trainer.logger.log_dir}")


if __name__ == "__main__":
    main()
