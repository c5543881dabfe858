"""A user pipeline built as the measuring process builds it (in this process, for speed):
the default step trains, every failure names the part (and a failing sample its index, also
from a DataLoader worker), running out of memory keeps its own meaning."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader

from loadersearch.errors import PipelineError
from loadersearch.measure import BAD_PIPELINE, BAD_SAMPLE, ERROR, classify_exception
from loadersearch.workload import create_workload
from loadersearch.workload._pipeline import _checked_step, build_pipeline
from loadersearch.workload._spec import PipelineSpec, WorkloadSpec

P = "helpers.pipelines"
CPU = torch.device("cpu")


def _spec(**parts) -> PipelineSpec:
    return PipelineSpec(dataset=f"{P}:make_dataset", dataset_kwargs={"n": 16}, **parts)


def _batch(pipeline, size: int = 4):
    return pipeline.collate_fn([pipeline.dataset[i] for i in range(size)])


def test_the_default_step_trains_the_model_on_inputs_and_targets() -> None:
    spec = WorkloadSpec(
        device="cpu", pipeline=_spec(model=f"{P}:make_model", loss="torch.nn:CrossEntropyLoss")
    )
    workload = create_workload(spec, batch_size=4)
    assert workload.img_size is None and len(workload.dataset) == 16
    assert workload.worker_init_fn is None
    batch = workload.collate_fn([workload.dataset[i] for i in range(4)])
    assert batch[0].shape == (4, 3, 16, 16) and batch[1].tolist() == [0, 1, 2, 3]
    workload.step(batch)


@pytest.mark.parametrize(
    "parts",
    [
        {"model": f"{P}:make_model", "loss": "torch.nn.functional:cross_entropy"},
        {"model": f"{P}:make_model", "step": f"{P}:make_step"},
    ],
    ids=["default-step", "users-step"],
)
def test_a_step_trains_the_model_the_factory_built(parts, monkeypatch) -> None:
    import helpers.pipelines as hp

    built: list[torch.nn.Module] = []
    make_model = hp.make_model

    def recording_make_model() -> torch.nn.Module:
        built.append(make_model())
        return built[-1]

    monkeypatch.setattr(hp, "make_model", recording_make_model)  # what resolve() imports
    pipeline = build_pipeline(_spec(**parts), train=True, device=CPU)
    (model,) = built
    before = [p.detach().clone() for p in model.parameters()]
    pipeline.step(_batch(pipeline))
    assert model.training
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_a_failing_default_step_names_the_model_and_loss() -> None:
    spec = _spec(model=f"{P}:make_model", loss="torch.nn:BCELoss")
    pipeline = build_pipeline(spec, train=True, device=CPU)
    with pytest.raises(PipelineError) as e:
        pipeline.step(_batch(pipeline))
    assert str(e.value).startswith(
        f"the default step (model {P}:make_model, loss torch.nn:BCELoss) raised ValueError: "
    )


def test_a_loss_class_gets_its_keyword_arguments() -> None:
    spec = _spec(model=f"{P}:make_model", loss="torch.nn:CrossEntropyLoss",
                 loss_kwargs={"label_smoothing": 0.1})  # fmt: skip
    from loadersearch.workload._pipeline import _loss

    loss = _loss(spec, CPU)
    assert isinstance(loss, torch.nn.CrossEntropyLoss) and loss.label_smoothing == 0.1


def test_a_failing_sample_names_its_index_in_this_process_and_from_a_worker() -> None:
    spec = PipelineSpec(dataset=f"{P}:make_dataset", dataset_kwargs={"n": 8, "fail_at": 5})
    pipeline = build_pipeline(spec, train=False, device=CPU)
    with pytest.raises(Exception) as e:
        pipeline.dataset[5]
    status, reason, message = classify_exception(e.value)
    assert (status, reason) == (ERROR, BAD_SAMPLE)
    assert message == (f"bad sample index 5 of {P}:make_dataset: ValueError: record 5 is corrupt")
    loader = DataLoader(pipeline.dataset, batch_size=8, num_workers=1,
                        collate_fn=pipeline.collate_fn)  # fmt: skip
    with pytest.raises(Exception) as e:
        next(iter(loader))
    status, reason, message = classify_exception(e.value)
    assert (status, reason) == (ERROR, BAD_SAMPLE)
    assert message.startswith(f"bad sample index 5 of {P}:make_dataset: ValueError: record 5")
    assert "DataLoader worker process 0" in message


@pytest.mark.slow
def test_a_failing_collate_is_a_bad_pipeline_naming_it_also_from_a_worker() -> None:
    class Ragged(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 4

        def __getitem__(self, i: int) -> torch.Tensor:
            return torch.zeros(3, 8 + i)

    from loadersearch.workload._pipeline import CheckedCollate, _collate

    collate = _collate(PipelineSpec(dataset=f"{P}:make_dataset"))
    assert isinstance(collate, CheckedCollate)
    loader = DataLoader(Ragged(), batch_size=2, num_workers=1, collate_fn=collate)
    with pytest.raises(Exception) as e:
        next(iter(loader))
    status, reason, message = classify_exception(e.value)
    assert (status, reason) == (ERROR, BAD_PIPELINE)
    assert message.startswith("PyTorch's default_collate raised RuntimeError: stack expects")
    assert message.endswith("give a collate function that batches your samples (collate, "
                            "--collate)")  # fmt: skip


def test_a_failing_step_is_a_bad_pipeline_but_out_of_memory_stays_itself() -> None:
    pipeline = build_pipeline(_spec(step=f"{P}:failing_step"), train=True, device=CPU)
    with pytest.raises(PipelineError) as e:
        pipeline.step(_batch(pipeline))
    assert str(e.value) == f"your step (from {P}:failing_step) raised KeyError: 'labels'"

    def oom(batch) -> None:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    with pytest.raises(torch.OutOfMemoryError):
        _checked_step(oom, "your step")(None)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("parts", "match"),
    [
        ({"dataset": f"{P}:make_empty"}, "returned an empty dataset"),
        ({"dataset": f"{P}:make_number"}, "returned a int, not a map-style dataset"),
        ({"dataset": f"{P}:make_stream"}, "returned an iterable-style dataset"),
        ({"model": f"{P}:not_a_model", "step": f"{P}:make_step"}, "returned a str, not a torch"),
        ({"step": f"{P}:no_step"}, r"returned a NoneType: it is called as make_step\(model, "),
        (
            {
                "model": f"{P}:make_model",
                "loss": "torch.nn:CrossEntropyLoss",
                "collate": f"{P}:records",
            },
            r"takes \(inputs, targets\) batches but the collate gave "
            "a dict of 2",
        ),  # fmt: skip
    ],
)
def test_unusable_parts_are_refused_naming_the_part(parts, match) -> None:
    parts = {"dataset": f"{P}:make_dataset", **parts}
    with pytest.raises(PipelineError, match=match):
        pipeline = build_pipeline(PipelineSpec(**parts), train=True, device=CPU)
        pipeline.step(_batch(pipeline))
