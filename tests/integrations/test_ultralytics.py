"""The Ultralytics integration with the real framework, offline: their dataset, collate, model
and loss trained for a few steps on generated data; a tune over a tiny space (slow); the
`loadersearch run --ultralytics` path and its messages; the answer in their terms."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
import tempfile
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

# Ultralytics offline and out of the home directory, before anything imports it: no DNS probe
# at import, no analytics, its settings file in a directory of this run.
os.environ.setdefault("YOLO_OFFLINE", "1")
os.environ.setdefault("YOLO_CONFIG_DIR", tempfile.mkdtemp(prefix="loadersearch-yolo-config-"))

from loadersearch import LoaderConfig  # noqa: E402
from loadersearch._options import declared, default_of, help_of  # noqa: E402
from loadersearch.cli import cli  # noqa: E402
from loadersearch.integrations import ultralytics as ul  # noqa: E402

pytest.importorskip("ultralytics")  # the test extra installs it; a bare install skips here

IMGSZ = 64  # small: the pipeline is the real one, the images few and tiny
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _child_env() -> dict[str, str]:
    """A subprocess's environment: this tree importable, Ultralytics offline, one thread."""
    path = os.pathsep.join(p for p in [ROOT, *sys.path] if p)
    return {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def yolo_data(tmp_path_factory: pytest.TempPathFactory) -> str:
    """DATA.yaml of a generated 16-image YOLO dataset, written by `loadersearch make-dataset`
    (Ultralytics writes its labels.cache beside it: a dataset of this module's own)."""
    root = tmp_path_factory.mktemp("yolo")
    result = CliRunner().invoke(cli, ["make-dataset", str(root / "d"), "-n", "16"])
    assert result.exit_code == 0, result.output
    return str(root / "d" / "data.yaml")


# -- fast lane: the answer, the options, the messages ------------------------------------------


def test_the_answer_is_model_train_and_yolo_train_lines() -> None:
    lines = ul.answer_lines("d/data.yaml", "yolo11n.yaml", 640, 12, 48, "ram")
    assert lines == [
        'model = YOLO("yolo11n.yaml")',
        'model.train(data="d/data.yaml", imgsz=640, workers=12, batch=48, cache="ram")',
        "yolo train data=d/data.yaml model=yolo11n.yaml imgsz=640 workers=12 batch=48 cache=ram",
    ]


def test_no_cache_is_written_false_and_hyperparameters_are_kept() -> None:
    lines = ul.answer_lines("data.yaml", "best.pt", 320, 0, 16, False, {"mosaic": 0.5})
    assert lines[1] == (
        'model.train(data="data.yaml", imgsz=320, mosaic=0.5, workers=0, batch=16, cache=False)'
    )
    assert lines[2].endswith("imgsz=320 mosaic=0.5 workers=0 batch=16 cache=False")


def test_a_pin_memory_switch_is_named_before_the_lines() -> None:
    lines = ul.answer_lines("d.yaml", "yolo11n.yaml", 640, 4, 32, "disk", pin_memory=False)
    assert lines[0].startswith('os.environ["PIN_MEMORY"] = "False"')
    assert lines[-1].startswith("PIN_MEMORY=False yolo train ")


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("ram,false", ("false", "ram")),
        ([True, None], ("false", "ram")),
        ("disk", ("disk",)),
        ((False, "disk", "RAM"), ("false", "ram", "disk")),  # disk last: it writes .npy files
    ],
)
def test_cache_choices_read_in_ultralytics_spellings(given, expected) -> None:
    assert ul.UltralyticsSpec(data="d.yaml", cache=given).cache == expected


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"cache": "memmap"}, "Unknown Ultralytics cache 'memmap'; choose from False, ram, disk"),
        ({"imgsz": 100}, "imgsz must be a multiple of 32"),
        ({"hyp": {"batch": 8}}, "hyp batch: give it as tune"),
    ],
)
def test_bad_spec_values_are_refused_with_the_fix(fields, match) -> None:
    with pytest.raises(ValueError, match=match):
        ul.UltralyticsSpec(data="d.yaml", **fields)


def test_each_option_is_declared_once_for_the_cli_and_the_api() -> None:
    """As tests/test_options.py checks the core options: the declared flag reaches `run`
    with its declared help and no default of its own; the API argument has the default."""
    text = CliRunner().invoke(cli, ["run", "--help"], terminal_width=200).output
    params = {p.name: p for p in cli.commands["run"].params}
    signature = inspect.signature(ul.tune).parameters
    for name, o in declared(ul.UltralyticsSpec).items():
        for flag in o.cli_flags(name):
            assert flag in text
            param = params[o.dest or name]
            assert param.help == help_of(ul.UltralyticsSpec, name) and param.default is None
        parameter = signature[o.api_name(name)]
        if name != "data":
            assert parameter.default == default_of(ul.UltralyticsSpec, name) or (
                name in ("hyp", "cache")  # None / a tuple of Ultralytics' own values
            )
    assert (
        ul.UltralyticsSpec(data="d.yaml").cache
        == ul.UltralyticsSpec(data="d.yaml", cache=signature["cache"].default).cache
    )


def _study(rate: float | None, confirmed: bool = True) -> SimpleNamespace:
    best = None if rate is None else LoaderConfig(num_workers=2, batch_size=16)
    return SimpleNamespace(best=best, images_per_s=rate, confirmed=confirmed)


def test_a_cache_is_chosen_only_when_it_beats_no_cache_beyond_the_precision() -> None:
    spec = ul.UltralyticsSpec(data="d.yaml")
    faster = ul._choose(spec, {"false": _study(20.0), "ram": _study(30.0)}, False)
    assert faster.cache == "ram" and faster.images_per_s == 30.0
    close = ul._choose(spec, {"false": _study(20.0), "ram": _study(20.5)}, False)
    assert close.cache == "false" and "within 5% of cache=False" in "\n".join(close.notes)
    # the ranges overlap: measured at different times, the difference may be the load's
    noisy = _study(30.0)
    noisy.summary = SimpleNamespace(winner=SimpleNamespace(low=6.5, high=40.0, inconclusive=True))
    overlap = ul._choose(spec, {"false": _study(20.0), "ram": noisy}, False)
    assert overlap.cache == "false" and "overlapping cache=False" in "\n".join(overlap.notes)
    assert "cache=ram confirmed on a busy machine: inconclusive" in "\n".join(overlap.notes)
    none = ul._choose(spec, {"false": _study(None)}, False)
    assert none.best is None and "nothing to paste" in none.report()


def test_make_dataset_writes_a_data_yaml_ultralytics_reads(yolo_data) -> None:
    info = ul._data_dict(yolo_data)
    assert info["nc"] == 20 and info["names"][0] == "aeroplane"
    assert os.path.samefile(info["train"], os.path.join(os.path.dirname(yolo_data), "images"))


def test_run_refuses_a_missing_data_yaml_with_the_command_that_writes_one(tmp_path) -> None:
    missing = tmp_path / "nope" / "data.yaml"
    result = CliRunner().invoke(cli, ["run", "--ultralytics", str(missing)])
    assert result.exit_code == 2
    assert f"Ultralytics dataset file {missing} not found" in result.output
    assert "loadersearch make-dataset --format yolo DIR" in result.output
    assert "Traceback" not in result.output


def test_run_refuses_weights_it_would_have_to_download(yolo_data) -> None:
    args = ["run", "--ultralytics", yolo_data, "--model", "yolo11n.pt"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert "model weights yolo11n.pt not found: loadersearch never downloads weights" in (
        result.output
    )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--step", "a:b"], "--step: --ultralytics builds the pipeline itself"),
        (["--fix", "persistent_workers=false"], "persistent_workers: Ultralytics' loader fixes"),
        (["--arg", "model.nc=3"], "--arg dataset.KEY=VALUE sets one of their"),
        (["--search-cache"], "--ultralytics-cache false,ram,disk"),
        (["--arg", "dataset.mosaik=0.5"], "hyp 'mosaik' is not one of Ultralytics' training"),
        (["--arg", "dataset.mosaic=abc"], "Ultralytics refuses hyp {'mosaic': 'abc'}"),
        (["--img-size", "64"], "--img-size is the built-in workload's; with --ultralytics"),
        (["--space", "num_workers=0:999"], "Ultralytics' loader starts at most os.cpu_count()"),
    ],
)
def test_run_refuses_what_their_pipeline_does_not_take(yolo_data, args, match) -> None:
    result = CliRunner().invoke(cli, ["run", "--ultralytics", yolo_data, *args])
    assert result.exit_code == 2 and match in result.output, result.output


def test_imgsz_without_ultralytics_is_refused() -> None:
    result = CliRunner().invoke(cli, ["run", "--imgsz", "64"])
    assert result.exit_code == 2
    assert "--imgsz and --ultralytics-cache need --ultralytics DATA.yaml" in result.output


def test_a_missing_ultralytics_is_one_line_naming_the_extra(yolo_data) -> None:
    # The framework made unimportable in a fresh process, as an install without it is.
    code = (
        "import sys; sys.modules['ultralytics'] = None; "
        "sys.argv = ['loadersearch', 'run', '--ultralytics', sys.argv[1]]; "
        "from loadersearch.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, yolo_data],
        env=_child_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode != 0
    lines = [ln for ln in (done.stdout + done.stderr).splitlines() if ln.strip()]
    fix = "pip install 'loadersearch[ultralytics]'"
    assert lines == [f"Error: ultralytics is not installed: {fix}"]


# -- the real framework, trained for a few steps, with no network -----------------------------

_TRAIN_OFFLINE = """
import socket, sys
reached = []
def refuse(*args, **kwargs):
    reached.append(args[:1])
    raise OSError("network disabled by the test")
socket.getaddrinfo = refuse
socket.socket.connect = lambda self, *a: refuse(*a)
import os
os.environ.pop("YOLO_OFFLINE", None)  # the integration sets it itself
import torch
from loadersearch.integrations import ultralytics as ul
from loadersearch.workload import WorkloadSpec, create_workload
data, imgsz = sys.argv[1], int(sys.argv[2])
spec = ul.UltralyticsSpec(data=data, imgsz=imgsz, hyp={"nbs": 4})
# what a measuring process builds, in its order
parts = ul.pipeline_spec(spec, "false", ul._data_dict(data), batch=4)
pipeline = create_workload(WorkloadSpec(device="cpu", pipeline=parts), batch_size=4)
DataLoader = torch.utils.data.DataLoader
loader = DataLoader(pipeline.dataset, batch_size=4, collate_fn=pipeline.collate_fn)
batches = iter(loader)
first = next(batches)
assert first["img"].shape == (4, 3, imgsz, imgsz), first["img"].shape
assert set(first) >= {"img", "cls", "bboxes", "batch_idx"}, sorted(first)
second = next(batches)
pipeline.step(first)
pipeline.step(second)
# the same step on a model of its own: the optimizer stepped, the weights moved
model = ul.yolo_model("yolo11n.yaml", nc=20)
step = ul.yolo_step(model, torch.device("cpu"), hyp={"nbs": 4})
before = [p.detach().clone() for p in model.parameters() if p.requires_grad]
step(first)
after = [p for p in model.parameters() if p.requires_grad]
print("MOVED", sum(not torch.equal(a, b) for a, b in zip(before, after)))
print("OFFLINE", os.environ.get("YOLO_OFFLINE"), "REACHED", len(reached))
"""


def test_their_pipeline_trains_a_few_steps_offline(yolo_data) -> None:
    """Their dataset (augmented, mosaic), collate, DetectionModel from yolo11n.yaml and
    v8DetectionLoss, built as the measuring process builds them, two optimizer steps (nbs=4
    at batch 4), every socket refused: nothing is fetched (no weights, no font, no DNS
    probe)."""
    done = subprocess.run(
        [sys.executable, "-c", _TRAIN_OFFLINE, yolo_data, str(IMGSZ)],
        env={k: v for k, v in _child_env().items() if k != "YOLO_OFFLINE"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OFFLINE 1 REACHED 0" in done.stdout, done.stdout + done.stderr
    assert "MOVED 0" not in done.stdout and "MOVED " in done.stdout


# -- measuring: a study per cache choice ------------------------------------------------------

QUICK_PLAN = {"epochs": 1, "steps": 3, "warmup_steps": 1, "windows_per_epoch": 1}


@pytest.mark.slow
def test_tune_measures_each_cache_choice_and_answers_in_their_terms(yolo_data, tmp_path) -> None:
    storage = f"sqlite:///{tmp_path / 'ul.db'}"
    result = ul.tune(
        yolo_data,
        imgsz=IMGSZ,
        cache=[False, "ram"],
        trials=1,
        space={"num_workers": "0:1"},
        fix={"batch_size": 4},
        confirm_rounds=0,
        baselines=False,
        probe=False,
        settle=False,
        plan=QUICK_PLAN,
        storage=storage,
        study="ul",
        verbose=False,
    )
    assert set(result.studies) == {"false", "ram"}
    for choice, study in result.studies.items():
        assert study.study_name == f"ul-cache-{choice}"
        pipeline = study.study.user_attrs["spec"]["workload"]["pipeline"]
        dataset = "loadersearch.integrations._ultralytics_pipeline:yolo_dataset"
        assert pipeline["dataset"] == dataset
        assert pipeline["collate"] == "ultralytics.data.dataset:YOLODataset.collate_fn"
        assert pipeline["dataset_kwargs"]["cache"] == ul._cache_value(choice)
        assert study.best is not None and study.best.persistent_workers in (True, False)
    assert result.cache in ("false", "ram") and result.best is not None
    assert result.best.batch_size == 4
    assert result.train_kwargs()["cache"] == ul._cache_value(result.cache)
    text = result.report()
    assert f"batch=4 cache={ul._cache_value(result.cache)}" in text
    assert f'model.train(data="{yolo_data}", imgsz={IMGSZ}, workers=' in text


@pytest.mark.slow
def test_the_quick_path_make_dataset_then_run_ultralytics(tmp_path) -> None:
    runner = CliRunner()
    made = runner.invoke(cli, ["make-dataset", "--format", "yolo", str(tmp_path / "d"), "-n", "8"])
    assert made.exit_code == 0, made.output
    data = str(tmp_path / "d" / "data.yaml")
    args = ["run", "--ultralytics", data, "--model", "yolo11n.yaml", "--imgsz", str(IMGSZ),
            "--trials", "1", "--ultralytics-cache", "false", "--fix", "batch_size=4",
            "--space", "num_workers=0:1", "--no-baselines", "--no-probe", "--no-settle",
            "--confirm-rounds", "0", "--epochs", "1", "--steps", "3", "--windows", "1",
            "--warmup-steps", "1",
            "--storage", f"sqlite:///{tmp_path / 'q.db'}", "--quiet"]  # fmt: skip
    result = runner.invoke(cli, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "Paste into your training:" in result.output
    assert f"yolo train data={data} model=yolo11n.yaml imgsz={IMGSZ} workers=" in result.output
    assert "batch=4 cache=False" in result.output

