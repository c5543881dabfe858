"""``loadersearch bench``: options, rendering, JSON and exit codes."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner
from helpers.procs import measurement_processes

from loadersearch.cli import cli
from loadersearch.measure import MeasureResult

TINY = ["--img-size", "64", "--device", "cpu", "--epochs", "1", "--steps", "2", "--windows", "1"]


def test_prefetch_factor_without_workers_exits_2_with_one_line():
    result = CliRunner().invoke(cli, ["bench", "--num-workers", "0", "--prefetch-factor", "4"])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1
    assert "prefetch_factor=4 needs num_workers > 0" in lines[0]
    assert "Traceback" not in result.output


def test_persistent_workers_without_workers_exits_2():
    result = CliRunner().invoke(cli, ["bench", "--persistent-workers"])
    assert result.exit_code == 2
    assert "persistent_workers=True needs num_workers > 0" in result.output


def test_a_start_method_without_workers_exits_2_and_an_unknown_one_is_refused():
    result = CliRunner().invoke(cli, ["bench", "--start-method", "spawn"])
    assert result.exit_code == 2
    assert "start_method=spawn needs num_workers > 0" in result.output
    result = CliRunner().invoke(cli, ["bench", "--num-workers", "1", "--start-method", "thread"])
    assert result.exit_code == 2 and "'thread' is not one of" in result.output


def test_help_documents_the_invalid_configuration_decision_and_exit_codes():
    result = CliRunner().invoke(cli, ["bench", "--help"])
    assert result.exit_code == 0
    assert "rejected (exit 2)" in result.output
    assert "3 infeasible" in result.output


def test_bench_module_does_not_import_torch():
    code = "import sys, loadersearch.cli._bench; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_json_output_parses_into_a_measure_result(tiny_dataset):
    args = ["bench", "--data", tiny_dataset, "--workload", "emulated", "--emulated-ms", "5,1"]
    result = CliRunner().invoke(
        cli, [*args, "--num-workers", "1", "--batch-size", "2", *TINY, "--json"]
    )
    assert result.exit_code == 0, result.output
    parsed = MeasureResult.from_dict(json.loads(result.stdout))
    assert parsed.ok and parsed.emulated and len(parsed.windows) == 1
    assert parsed.config.num_workers == 1
    assert measurement_processes() == []


def test_summary_labels_emulated_results_and_infeasible_exits_3(tiny_dataset):
    args = ["bench", "--data", tiny_dataset, "--workload", "emulated", "--batch-size", "4"]
    result = CliRunner().invoke(cli, [*args, *TINY, "--vram-cap", "1GiB"])
    assert result.exit_code == 3
    assert "EMULATED" in result.output
    assert "over the VRAM cap at batch 4" in result.stderr


def test_unreadable_vram_cap_is_a_usage_error():
    result = CliRunner().invoke(cli, ["bench", "--vram-cap", "six gigs"])
    assert result.exit_code == 2
    assert "cannot read the size 'six gigs'" in result.output


def test_more_ranks_than_gpus_on_cuda_exits_2_naming_the_fix():
    result = CliRunner().invoke(cli, ["bench", "--gpus", "64", "--device", "cuda"])
    assert result.exit_code == 2
    assert "gpus=64 needs 64 GPUs, one per rank" in result.output
    assert "--device cpu for CPU ranks with gloo" in result.output
    assert "Traceback" not in result.output


def test_bench_measures_a_user_pipeline_named_on_the_command_line():
    args = ["bench", "--dataset", "helpers.pipelines:make_dataset", "--arg", "dataset.n=16",
            "--arg", "dataset.size=8", "--workload", "loader", "--num-workers", "1",
            "--batch-size", "4", "--device", "cpu", "--epochs", "1", "--steps", "2",
            "--windows", "1"]  # fmt: skip
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    assert "pipeline     dataset helpers.pipelines:make_dataset(n=16, size=8)" in result.output
    assert "for a full epoch of 16 images" in result.output
    assert measurement_processes() == []


def test_emulated_storage_latency_is_labelled_and_a_negative_one_refused(tiny_dataset):
    args = ["bench", "--data", tiny_dataset, "--workload", "loader", "--batch-size", "2"]
    result = CliRunner().invoke(cli, [*args, *TINY, "--emulated-io-ms", "5"])
    assert result.exit_code == 0, result.output
    assert "EMULATED storage latency 5 ms/sample" in result.output
    result = CliRunner().invoke(
        cli, [*args, *TINY, "--emulated-io-ms", "5", "--emulated-io-cv", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "EMULATED storage latency 5 ms/sample, CV 2 per file" in result.output
    result = CliRunner().invoke(cli, ["bench", "--emulated-io-ms", "-1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--emulated-io-ms" in result.output
    result = CliRunner().invoke(cli, ["bench", "--emulated-io-ms", "nan"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "emulated_io_ms must be a finite number" in result.output
