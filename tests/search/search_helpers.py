"""Helpers of the search tests: the emulated study's options and a CLI runner."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner, Result

from loadersearch.cli import cli

# One emulated step takes 150 ms whatever the batch (a + b*batch with b = 0) and the tiny 64 px
# dataset loads much faster than that, so batch 16 runs at twice the images/s of batch 8:
# batch-8 trials are clearly slower and the pruner must stop them.
E2E_OPTIONS = [
    "--workload", "emulated",
    "--img-size", "64",
    "--emulated-ms", "150,0",
    "--space", "batch_size=8:16:8",
    "--space", "num_workers=0:2",
    "--epochs", "2",
    "--steps", "4",
    "--windows-per-epoch", "4",
    "--warmup-epochs", "1",
    "--warmup-steps", "2",
    "--seed", "3",
]  # fmt: skip


@dataclass
class EmulatedStudy:
    storage: str
    db_path: str
    name: str
    first: Result  # `run --trials 6`
    second: Result  # the same command with `--trials 8`


def run_cli(args: list[str]) -> Result:
    return CliRunner().invoke(cli, args, catch_exceptions=False)
