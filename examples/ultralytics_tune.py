"""Tune an Ultralytics YOLO training's ``workers``, ``batch`` and ``cache`` on this machine,
and print the ``model.train(...)`` and ``yolo train`` lines to paste.

What is measured is their own pipeline: their dataset and augmentations, their collate,
their DetectionModel (built from ``--model``, a ``.yaml``, or your local ``.pt``) and loss,
AMP on CUDA (see docs/integrations/ultralytics.md)::

    python examples/ultralytics_tune.py --data path/to/data.yaml --imgsz 640 --trials 20

Without ``--data`` it tunes on a generated dataset (``loadersearch make-dataset``'s VOC-like
JPEGs with YOLO labels and a ``data.yaml``), written once under ``examples/data/yolo``. The
same from the command line::

    loadersearch run --ultralytics path/to/data.yaml --model yolo11n.yaml --trials 20
"""

from __future__ import annotations

import argparse
import os

from loadersearch.integrations import ultralytics as lsu

HERE = os.path.dirname(os.path.abspath(__file__))


def generated_data(root: str, images: int) -> str:
    """``root/data.yaml`` of a generated YOLO dataset of ``images`` images, written once."""
    data = os.path.join(root, "data.yaml")
    if not os.path.isfile(data):
        from loadersearch.workload import make_dataset

        make_dataset(root, images=images, fmt="yolo")
    return data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", help="Your DATA.yaml (default: a generated dataset).")
    parser.add_argument("--root", default=os.path.join(HERE, "data", "yolo"))
    parser.add_argument("--images", type=int, default=512, help="Generated images.")
    parser.add_argument("--model", default="yolo11n.yaml", help="A .yaml or a local .pt.")
    parser.add_argument("--imgsz", type=int, default=640)
    parser.add_argument("--cache", default="false,ram", help="Their cache= choices to measure.")
    parser.add_argument("--trials", type=int, default=20, help="Trials per cache choice.")
    parser.add_argument("--batch", type=int, help="Fix the batch size instead of searching it.")
    parser.add_argument("--confirm-rounds", type=int)
    parser.add_argument("--storage")
    parser.add_argument("--study")
    args = parser.parse_args()

    data = args.data or generated_data(args.root, args.images)
    result = lsu.tune(
        data,
        model=args.model,
        imgsz=args.imgsz,
        cache=args.cache.split(","),
        trials=args.trials,
        fix={"batch_size": args.batch} if args.batch else None,
        confirm_rounds=args.confirm_rounds,
        storage=args.storage,
        study=args.study,
    )
    print(result.report())
    # Training with the answer, in the same script:
    #   from ultralytics import YOLO
    #   YOLO(args.model).train(**result.train_kwargs(), epochs=100)


if __name__ == "__main__":  # the measuring process imports loadersearch's parts, not this file
    main()
