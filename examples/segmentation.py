"""Tune the DataLoader of a semantic-segmentation pipeline whose samples differ in size: a
custom collate pads each batch, and the default step (model + loss) trains a small
fully-convolutional network on it.

From the repository root, with the command line::

    loadersearch run --dataset examples.segmentation:make_dataset \\
        --collate examples.segmentation:pad_collate \\
        --model examples.segmentation:make_model \\
        --loss torch.nn:CrossEntropyLoss --arg loss.ignore_index=255 --trials 40

or the same as a study spec: ``loadersearch run --config examples/segmentation.toml``. In
Python, the loss with its argument is ``functools.partial(torch.nn.CrossEntropyLoss,
ignore_index=IGNORE)``.

Each sample is drawn when it is loaded (blobs of ``classes - 1`` kinds on a textured
background, random size between 3/4 and 1 of ``size``, random flip), so the data pipeline
costs CPU as decoding and augmentation would.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

IGNORE = 255  # mask value of padding: CrossEntropyLoss(ignore_index=IGNORE) leaves it out


class Blobs(Dataset):
    """``(image float32 (3, H, W), mask int64 (H, W))``, H and W differing per sample; sample
    ``i`` is the same in every epoch and every worker (its generator is seeded with ``i``)."""

    def __init__(self, n: int = 1024, size: int = 256, classes: int = 4) -> None:
        self.n, self.size, self.classes = n, size, classes

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        from PIL import Image, ImageDraw, ImageFilter

        rng = np.random.default_rng(index)
        h, w = (int(v) for v in rng.integers(3 * self.size // 4, self.size + 1, 2))
        noise = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        image = Image.fromarray(noise).filter(ImageFilter.GaussianBlur(2))
        mask = Image.new("L", (w, h), 0)
        draw, mdraw = ImageDraw.Draw(image), ImageDraw.Draw(mask)
        for _ in range(int(rng.integers(1, 4))):
            cls = int(rng.integers(1, self.classes))
            x, y = int(rng.integers(0, w - 8)), int(rng.integers(0, h - 8))
            bw, bh = int(rng.integers(8, w // 2 + 9)), int(rng.integers(8, h // 2 + 9))
            colour = (60 * cls, 255 - 50 * cls, 40 * cls)
            draw.ellipse((x, y, x + bw, y + bh), fill=colour)
            mdraw.ellipse((x, y, x + bw, y + bh), fill=cls)
        img = torch.from_numpy(np.asarray(image, dtype=np.float32) / 255.0).permute(2, 0, 1)
        target = torch.from_numpy(np.asarray(mask, dtype=np.int64))
        if rng.random() < 0.5:
            img, target = img.flip(-1), target.flip(-1)
        return img.contiguous(), target.contiguous()


def make_dataset(n: int = 1024, size: int = 256, classes: int = 4) -> Blobs:
    return Blobs(n=n, size=size, classes=classes)


def pad_collate(
    samples: list[tuple[torch.Tensor, torch.Tensor]], multiple: int = 8
) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad every image (with 0) and mask (with IGNORE) of a batch to the largest height and
    width in it, rounded up to ``multiple`` (the network's stride)."""
    h = max(img.shape[1] for img, _ in samples)
    w = max(img.shape[2] for img, _ in samples)
    h, w = -(-h // multiple) * multiple, -(-w // multiple) * multiple
    images = torch.zeros(len(samples), 3, h, w)
    masks = torch.full((len(samples), h, w), IGNORE, dtype=torch.int64)
    for i, (img, mask) in enumerate(samples):
        images[i, :, : img.shape[1], : img.shape[2]] = img
        masks[i, : mask.shape[0], : mask.shape[1]] = mask
    return images, masks


def make_model(classes: int = 4, width: int = 32) -> nn.Module:
    """A small encoder-decoder: stride 4 down, back up to the input size."""

    def block(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
        return nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
            nn.BatchNorm2d(cout),
            nn.ReLU(inplace=True),
        )

    return nn.Sequential(
        block(3, width),
        block(width, 2 * width, stride=2),
        block(2 * width, 4 * width, stride=2),
        block(4 * width, 4 * width),
        nn.Upsample(scale_factor=4, mode="bilinear", align_corners=False),
        block(4 * width, width),
        nn.Conv2d(width, classes, 1),
    )
