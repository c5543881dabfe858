"""What ``loadersearch diagnose`` reads from a study and writes back: the study's pipeline
(the winner it diagnoses is :func:`loadersearch.report.winner_target`), and the diagnosis a
study keeps for ``loadersearch report`` (its own workload's only)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig
from loadersearch.workload import PipelineSpec, WorkloadSpec

if TYPE_CHECKING:
    import optuna

    from loadersearch._hardware import Hardware
    from loadersearch.diagnose._findings import Diagnosis
    from loadersearch.workload import PipelineTrust


@dataclass
class Target:
    """What is diagnosed: a configuration, and the study it comes from (if any)."""

    config: LoaderConfig
    said: str = ""  # what is diagnosed, in one line (empty: a configuration given by hand)
    study: optuna.Study | None = None
    workload: dict[str, Any] = field(default_factory=dict)  # the study's stored workload


def study_pipeline(
    target: Target,
    trust: PipelineTrust,
    storage: str | None,
    show: Callable[[str], None],
) -> PipelineSpec | None:
    """The study's stored pipeline (None without one), once
    :func:`~loadersearch.workload._refs.admit_stored` accepts it under ``trust``: it was read
    from a database, so its references are shown first (``show``) and imported only if
    trusted."""
    from loadersearch.storage import redact_url, resolve_storage_url
    from loadersearch.workload import admit_stored

    stored = target.workload.get("pipeline")
    if not stored or target.study is None:
        return None
    pipeline = PipelineSpec.from_dict(stored)
    source = f"study {target.study.study_name!r} in {redact_url(resolve_storage_url(storage))}"
    admit_stored(pipeline, trust, source, show)
    return pipeline


def store_diagnosis(
    d: Diagnosis, target: Target, measured: WorkloadSpec, hardware: Hardware, storage: str | None
) -> str | None:
    """Keep the diagnosis (PyTorch's defaults and the diagnosed configuration, warm) in the
    study it came from, for ``loadersearch report``; a diagnosis of another workload than the
    study's is not kept, and the line that says so is returned."""
    from loadersearch.diagnose._plots import PAIR_ATTR, pair_record

    if target.study is None:
        return None
    record = pair_record(d)
    if record is None:
        return None
    other = differences(target.workload, measured, hardware)
    if other:
        return (
            f"not stored in study {target.study.study_name!r}: this diagnosis measured another "
            f"workload than the study's ({'; '.join(other)})."
        )
    _set_attr(storage, target.study.study_name, PAIR_ATTR, record)
    return None


def differences(stored: dict, measured: WorkloadSpec, hardware: Hardware) -> list[str]:
    """How ``measured`` (resolved to this machine) differs from the study's stored workload,
    beside what does not change a measurement (NOT_IDENTITY; the emulated workload's device,
    which only decides where its batches go); empty when it is the study's own."""
    from loadersearch.search import NOT_IDENTITY
    from loadersearch.workload import resolved_workload

    try:
        own = resolved_workload(WorkloadSpec.from_dict(stored), hardware).to_dict()
    except (TypeError, ValueError):
        return ["the study's workload cannot be read"]
    skip = NOT_IDENTITY["workload"] | ({"device"} if measured.emulated else set())
    now = measured.to_dict()
    return [
        f"{key}: the study's {own.get(key)!r}, measured {now.get(key)!r}"
        for key in sorted(set(own) | set(now))
        if key not in skip and own.get(key) != now.get(key)
    ]


def _set_attr(storage: str | None, name: str, key: str, record: dict) -> None:
    """Store ``record`` in the study as a user attribute (the study was read read-only)."""
    import optuna

    from loadersearch.storage import open_storage

    optuna.load_study(
        study_name=name, storage=open_storage(storage, heartbeat=False)
    ).set_user_attr(key, record)
