"""Tune the DataLoader of a torchvision classification pipeline: ImageFolder over JPEGs,
random-resized-crop augmentation, a ResNet-18, and its own training step.

With the Python API (this file; the functions below are found again by the measuring
process, which imports this script as a module, hence the ``__main__`` guard)::

    python examples/classification.py --trials 40

With the command line, from the repository root (the working directory is on the measuring
process's path, so ``examples.classification`` imports)::

    loadersearch run --dataset examples.classification:make_dataset \\
        --model examples.classification:make_model --step examples.classification:make_step \\
        --arg dataset.root=examples/data/shapes --trials 40

The images (one class per shape, drawn on noise, 96 px JPEGs) are generated once under
``root``; point ``root`` at your own ImageFolder tree to tune on it instead.
"""

from __future__ import annotations

import argparse
import functools
import logging
import os
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
SHAPES = ("ellipse", "rectangle", "triangle", "cross")


def generate_images(root: str, images: int = 512, seed: int = 0) -> str:
    """``images`` JPEGs in ``root/<shape>/`` (ImageFolder's layout), once: a finished tree is
    marked by ``root/.done`` and left as it is."""
    import numpy as np
    from PIL import Image, ImageDraw

    if os.path.exists(os.path.join(root, ".done")):
        return root
    rng = np.random.default_rng(seed)
    for i in range(images):
        shape = SHAPES[i % len(SHAPES)]
        os.makedirs(os.path.join(root, shape), exist_ok=True)
        noise = rng.integers(0, 256, (96, 96, 3), dtype=np.uint8)
        im = Image.fromarray(noise)
        draw = ImageDraw.Draw(im)
        x, y = (int(v) for v in rng.integers(8, 40, 2))
        w, h = (int(v) for v in rng.integers(24, 48, 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, 3))
        if shape == "ellipse":
            draw.ellipse((x, y, x + w, y + h), fill=colour)
        elif shape == "rectangle":
            draw.rectangle((x, y, x + w, y + h), fill=colour)
        elif shape == "triangle":
            draw.polygon([(x, y + h), (x + w // 2, y), (x + w, y + h)], fill=colour)
        else:
            draw.rectangle((x + w // 3, y, x + 2 * w // 3, y + h), fill=colour)
            draw.rectangle((x, y + h // 3, x + w, y + 2 * h // 3), fill=colour)
        im.save(os.path.join(root, shape, f"{i:05d}.jpg"), quality=90)
    open(os.path.join(root, ".done"), "w").close()
    return root


def make_dataset(root: str = os.path.join(HERE, "data", "shapes"), size: int = 224) -> Any:
    """An ImageFolder with the usual training augmentation at ``size`` px."""
    from torchvision import datasets, transforms

    generate_images(root)  # a no-op once the tree exists
    augment = transforms.Compose(
        [
            transforms.RandomResizedCrop(size, antialias=True),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            transforms.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
        ]
    )
    return datasets.ImageFolder(root, transform=augment)


def make_model(num_classes: int = len(SHAPES)) -> nn.Module:
    from torchvision.models import resnet18

    return resnet18(num_classes=num_classes)


def make_step(model: nn.Module, device: torch.device, lr: float = 0.1):
    """The body of the training loop: SGD with label smoothing, channels-last and float16
    AMP on CUDA. Called once; the step it returns is called once per batch, the batch
    already on ``device``. No synchronisation: loadersearch times around it."""
    cuda = device.type == "cuda"
    if cuda:
        model.to(memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, weight_decay=1e-4)
    scaler = torch.amp.GradScaler("cuda", enabled=cuda)

    def step(batch: tuple[torch.Tensor, torch.Tensor]) -> None:
        images, labels = batch
        if cuda:
            images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.float16, enabled=cuda):
            loss = F.cross_entropy(model(images), labels, label_smoothing=0.1)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()

    return step


def main(argv: list[str] | None = None) -> None:
    import loadersearch

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=os.path.join(HERE, "data", "shapes"))
    parser.add_argument("--images", type=int, default=512, help="images to generate")
    parser.add_argument("--size", type=int, default=224, help="training crop in pixels")
    parser.add_argument("--batch-size", type=int, default=None, help="fix it (a training choice)")
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--confirm-rounds", type=int, default=None)
    parser.add_argument("--study", default=None)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    root = generate_images(os.path.abspath(args.root), args.images)
    result = loadersearch.tune(
        dataset=functools.partial(make_dataset, root=root, size=args.size),
        model=make_model,
        step=make_step,
        fix={"batch_size": args.batch_size} if args.batch_size else None,
        trials=args.trials,
        confirm_rounds=args.confirm_rounds,
        study=args.study,
        storage=args.storage,
    )
    print(result.report())


if __name__ == "__main__":
    main()
