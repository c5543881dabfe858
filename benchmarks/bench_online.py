#!/usr/bin/env python
"""End to end, N epochs of a real training loop: with PyTorch's default DataLoader, with
AutoLoader (tuning during the first epoch), and with the offline study's winner (the study's
own time counted beside it). Two workloads:

- ``emulated``: samples read with an emulated storage latency (a sleep per sample, no CPU),
  the step the emulated accelerator (a sleep of a + b*batch ms): the worker count decides the
  throughput, as on a GPU machine whose loader cannot keep up.
- ``train``: CPU training of a small CNN on JPEG images decoded and augmented in the loader:
  workers and the step share the CPUs.

Each method runs ``--rounds`` times, interleaved (default, AutoLoader, winner, default, ...),
each time in a fresh loader; the median is reported. The load average is printed: the machine
this ran on is shared. Writes ``results.md`` and ``results.json`` to ``--out``.

Run from the repository root:

    .venv/bin/python benchmarks/bench_online.py --out results/online

The parts are defined at the top level of this script: the offline study's measuring
processes import them from here (keep the entry point under ``__main__``).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class SlowSamples(Dataset):
    """``n`` small tensors, each read with ``ms`` milliseconds of emulated storage latency."""

    def __init__(self, n: int = 2000, ms: float = 2.0) -> None:
        self.n, self.ms = n, ms

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.ms / 1000.0)
        return torch.full((3, 8, 8), float(index % 7)), index % 10


class JpegImages(Dataset):
    """``n`` JPEG images of ``size`` px held encoded in memory; each read decodes, crops at
    random, flips and normalises: the CPU work of a vision loader."""

    def __init__(self, n: int = 2048, size: int = 128, crop: int = 112) -> None:
        from torchvision.io import encode_jpeg

        g = torch.Generator().manual_seed(0)
        base = (torch.rand(3, size, size, generator=g) * 255).to(torch.uint8)
        self.blobs = [encode_jpeg(base.roll(i, dims=2), quality=90) for i in range(n)]
        self.size, self.crop = size, crop

    def __len__(self) -> int:
        return len(self.blobs)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        from torchvision.io import decode_jpeg

        image = decode_jpeg(self.blobs[index]).float() / 255.0
        y, x = torch.randint(0, self.size - self.crop + 1, (2,)).tolist()
        image = image[:, y : y + self.crop, x : x + self.crop]
        if torch.rand(()) < 0.5:
            image = image.flip(2)
        return (image - 0.5) / 0.25, index % 10


def make_slow(n: int = 2000, ms: float = 2.0) -> SlowSamples:
    return SlowSamples(n=n, ms=ms)


def make_jpeg(n: int = 2048) -> JpegImages:
    return JpegImages(n=n)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


WORKLOADS: dict[str, dict[str, Any]] = {
    "emulated": {
        "dataset": make_slow,
        "batch_size": 8,
        "emulated_ms": (8.0, 0.5),  # 12 ms a batch of 8
        "describe": "2 ms storage latency per sample; emulated accelerator 8 + 0.5 ms/img",
    },
    "train": {
        "dataset": make_jpeg,
        "batch_size": 8,
        "describe": "CPU training of a 3-layer CNN, JPEG 128 px decoded, cropped to 112, flipped",
    },
}


def _step(workload: str) -> Any:
    if workload == "emulated":
        from loadersearch.workload import EmulatedAccelerator

        device = EmulatedAccelerator(WORKLOADS["emulated"]["emulated_ms"], (0.0, 0.0), None)
        return lambda batch: device.step(len(batch[0]))
    from loadersearch.workload import make_optimizer, train_step

    model = make_model()
    return train_step(model, nn.CrossEntropyLoss(), make_optimizer("sgd", model.parameters()),
                      torch.device("cpu"))  # fmt: skip


def _epochs(loader: Any, step: Any, epochs: int) -> list[float]:
    """Seconds of each epoch of ``for batch in loader: step(batch)``."""
    out = []
    for _ in range(epochs):
        t0 = time.perf_counter()
        for batch in loader:
            step(batch)
        out.append(time.perf_counter() - t0)
    return out


def _offline(workload: str, storage: str, trials: int) -> tuple[Any, float]:
    import loadersearch

    w = WORKLOADS[workload]
    options: dict[str, Any] = {
        "dataset": w["dataset"],
        "storage": storage,
        "study": f"online-bench-{workload}",
        "fix": {"batch_size": w["batch_size"]},
        "trials": trials,
        "seed": 0,
    }
    if workload == "emulated":
        options.update(workload="emulated", emulated_ms=w["emulated_ms"])
    else:
        options.update(model=make_model, loss=nn.CrossEntropyLoss, device="cpu")
    t0 = time.monotonic()
    result = loadersearch.tune(**options)
    return result, time.monotonic() - t0


def run(workload: str, args: argparse.Namespace, storage: str) -> dict[str, Any]:
    import loadersearch

    w = WORKLOADS[workload]
    dataset = w["dataset"]()
    batch = w["batch_size"]
    load_before = os.getloadavg()
    print(f"\n== {workload}: {w['describe']}; {len(dataset)} samples, batch {batch} ==")
    offline, study_s = _offline(workload, storage, args.trials)
    winner = offline.best
    print(f"offline study: {study_s:.0f} s, winner {winner.label()}")
    runs: dict[str, list[list[float]]] = {
        "default": [],
        "autoloader": [],
        "autoloader+study": [],
        "winner": [],
    }
    reports: dict[str, list[dict[str, Any]]] = {"autoloader": [], "autoloader+study": []}
    for r in range(args.rounds):
        for method in runs:
            torch.manual_seed(r)
            if method == "default":
                loader: Any = DataLoader(dataset, batch_size=batch, shuffle=True, drop_last=True)
            elif method == "winner":
                loader = DataLoader(dataset, shuffle=True, drop_last=True,
                                    **winner.dataloader_kwargs())  # fmt: skip
            else:
                study = {"study": f"online-bench-{workload}", "storage": storage}
                loader = loadersearch.AutoLoader(
                    dataset, batch_size=batch, shuffle=True, drop_last=True, epochs=args.epochs,
                    **(study if method == "autoloader+study" else {}),
                )  # fmt: skip
            seconds = _epochs(loader, _step(workload), args.epochs)
            if method in reports:
                reports[method].append(loader.report.to_dict())
                print(loader.report.summary())
                loader.close()
            del loader
            runs[method].append(seconds)
            print(f"round {r} {method:<16} {sum(seconds):7.1f} s  epochs {_fmt(seconds)}")
    return {
        "workload": workload,
        "describe": w["describe"],
        "samples": len(dataset),
        "batch_size": batch,
        "epochs": args.epochs,
        "study_s": study_s,
        "study_trials": args.trials,
        "winner": winner.label(),
        "runs": runs,
        "autoloader": reports,
        "load_before": load_before,
        "load_after": os.getloadavg(),
    }


def _fmt(seconds: list[float]) -> str:
    return " ".join(f"{s:.1f}" for s in seconds)


def _median_total(runs: list[list[float]]) -> float:
    return statistics.median(sum(r) for r in runs)


def markdown(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = []
    for res in results:
        n = res["epochs"]
        d = _median_total(res["runs"]["default"])
        lines += [
            f"### {res['workload']}: {res['describe']}",
            "",
            f"{res['samples']} samples, batch {res['batch_size']}, {n} epochs, median of "
            f"{args.rounds} interleaved rounds; load average {_load(res['load_before'])} "
            f"before, {_load(res['load_after'])} after.",
            "",
            f"| method | {n} epochs | first epoch | later epochs (mean) | vs default |",
            "|---|---:|---:|---:|---:|",
        ]
        for method, label in (
            ("default", "PyTorch's default DataLoader (w0)"),
            ("autoloader", "AutoLoader (tunes in epoch 1)"),
            ("autoloader+study", "AutoLoader, study= (races the study's best)"),
            ("winner", f"offline winner ({res['winner']})"),
        ):
            runs = res["runs"][method]
            total = _median_total(runs)
            first = statistics.median(r[0] for r in runs)
            later = statistics.median(statistics.fmean(r[1:]) for r in runs) if n > 1 else 0.0
            lines.append(
                f"| {label} | {total:.1f} s | {first:.1f} s | {later:.1f} s | x{d / total:.2f} |"
            )
        w = _median_total(res["runs"]["winner"])
        lines.append(
            f"| offline winner + its study ({res['study_trials']} trials, "
            f"{res['study_s']:.0f} s) | {w + res['study_s']:.1f} s | | | "
            f"x{d / (w + res['study_s']):.2f} |"
        )
        lines.append("")
        for method, reports in res["autoloader"].items():
            chosen = ", ".join(a["label"] for a in reports)
            costs = ", ".join(f"{a['cost_s']:.1f}" for a in reports)
            steps = ", ".join(str(a["tuning_steps"]) for a in reports)
            tried = ", ".join(str(len(a["candidates"])) for a in reports)
            lines.append(
                f"- {method}: settled on {chosen} (per round); candidates tried: {tried}; "
                f"tuning steps: {steps}; tuning cost beyond the chosen configuration: "
                f"{costs} s."
            )
        lines.append("")
    return "\n".join(lines)


def _load(values: Any) -> str:
    return " / ".join(f"{x:.1f}" for x in values)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="results/online", help="folder for results.md/.json")
    parser.add_argument("--epochs", type=int, default=4, help="epochs per run (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds (default 2)")
    parser.add_argument("--trials", type=int, default=12, help="offline study's trials")
    parser.add_argument("--workloads", default="emulated,train", help="comma-separated")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    storage = f"sqlite:///{(out / 'studies.db').resolve()}"
    results = [run(w, args, storage) for w in args.workloads.split(",")]
    text = markdown(results, args)
    (out / "results.md").write_text(text + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    print("\n" + text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
