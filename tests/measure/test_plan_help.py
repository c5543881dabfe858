"""The measurement options' help states the plan a study really measures with
(search.default_plan), for a study on a GPU and one where the CPU does the heavy work: the
command line passes nothing for an option not given, so click cannot show those defaults."""

from __future__ import annotations

import re

import click
import pytest

from loadersearch.cli import cli
from loadersearch.search import default_plan

# option -> the MeasurePlan field whose study defaults its help must state
OPTIONS = {
    "--epochs": "epochs",
    "--steps": "steps",
    "--windows-per-epoch": "windows_per_epoch",
    "--warmup-steps": "warmup_steps",
    "--timeout": "timeout_s",
    "--epoch-limit": "epoch_limit_s",
    "--extend-limit": "extend_limit_s",
    "--warmup-epochs": "warmup_epochs",
    "--in-flight-rounds": "in_flight_rounds",
    "--precision": "precision",
}


def _help_of(command: str, option: str) -> str:
    """The help click shows for ``option`` of ``command`` (rendered: default placeholders
    filled in)."""
    ctx = click.Context(cli.commands[command])
    for param in cli.commands[command].params:
        if option in getattr(param, "opts", ()):
            record = param.get_help_record(ctx)
            assert record is not None, f"{command} {option} has no help"
            return record[1]
    raise AssertionError(f"{command} has no {option}")


def _stated(help_text: str) -> tuple[float, float]:
    """[default: A; a study where the CPU does the heavy work: B] -> (A, B); B = A when the
    help gives one default."""
    cpu = r"(?:; a study where the CPU does the heavy work: ([\d.]+))?"
    m = re.search(r"\[default: ([\d.]+)" + cpu + r"\]", help_text)
    assert m, f"no default stated in: {help_text}"
    return float(m.group(1)), float(m.group(2) or m.group(1))


@pytest.mark.parametrize("command", ["run", "bench", "diagnose"])
@pytest.mark.parametrize("option", list(OPTIONS))
def test_the_help_states_the_defaults_a_study_measures_with(command: str, option: str) -> None:
    gpu, cpu = _stated(_help_of(command, option))
    field = OPTIONS[option]
    assert gpu == float(getattr(default_plan(small=False), field))
    assert cpu == float(getattr(default_plan(small=True), field))


def test_a_plan_the_study_defaults_make_invalid_names_the_default_it_took() -> None:
    from click.testing import CliRunner

    # --steps 1 against the 4 windows an epoch of every study plan: the user gave no
    # --windows-per-epoch, so the message says where the 4 came from and what to give
    result = CliRunner().invoke(cli, ["bench", "--workload", "emulated", "--steps", "1"])
    assert result.exit_code == 2, result.output
    assert "windows_per_epoch (4) cannot exceed steps (1)" in result.output
    assert "windows_per_epoch (--windows-per-epoch) or more steps (--steps)" in result.output
    assert "windows_per_epoch 4 not given: a study's default" in result.output
    assert "Traceback" not in result.output
