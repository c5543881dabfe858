"""``loadersearch make-dataset``: write the generated VOC-like stand-in dataset."""

from __future__ import annotations

import os
import shutil

import click

from loadersearch.workload import FORMATS


@click.command("make-dataset")
@click.argument("directory", type=click.Path(file_okay=False, writable=True))
@click.option(
    "--images",
    "-n",
    type=click.IntRange(min=1),
    default=512,
    show_default=True,
    help="Number of images to generate.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="yolo",
    show_default=True,
    help="Label layout: yolo (images/ + labels/), voc (JPEGImages/ + Annotations/ + "
    "ImageSets/Main/train.txt) or coco (images/ + annotations/instances_train.json).",
)
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--classes",
    "num_classes",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Number of object classes (VOC's 20 names up to 20).",
)
@click.option(
    "--force",
    is_flag=True,
    help="Write into DIRECTORY even if it is not empty, replacing its images/, labels/, "
    "JPEGImages/, Annotations/ and annotations/ folders.",
)
def make_dataset(
    directory: str, images: int, fmt: str, seed: int, num_classes: int, force: bool
) -> None:
    """Generate a stand-in detection dataset in DIRECTORY.

    The images resemble Pascal VOC where data-loading cost is concerned: 500x375 and 375x500
    JPEGs (mostly landscape) with natural-looking texture, about 93 kB (91 KiB) each on average,
    with about 2.4 boxes per image. Use it to try loadersearch, or to compare machines on the same
    data; it is also the built-in dataset used when you give none.

    \b
    Example:
      loadersearch make-dataset data/synth --images 2000 --format voc --seed 1
    """
    if os.path.isdir(directory) and os.listdir(directory):
        if not force:
            raise click.UsageError(
                f"{directory} is not empty; choose an empty or new directory, or pass --force "
                "to replace the dataset folders in it."
            )
        for sub in ("images", "labels", "JPEGImages", "Annotations", "annotations"):
            shutil.rmtree(os.path.join(directory, sub), ignore_errors=True)
    from loadersearch.workload import make_dataset as generate

    stats = generate(directory, images=images, fmt=fmt, seed=seed, num_classes=num_classes)
    click.echo(
        f"Wrote {stats['images']} images ({fmt}) to {directory}: "
        f"{stats['mean_kb']:.1f} KB mean file size, {stats['boxes_per_image']:.2f} boxes/image, "
        f"{stats['landscape']} landscape / {stats['portrait']} portrait, "
        f"in {stats['seconds']:.1f} s."
    )
