"""The measured version of the article's hardware table: over every study in a storage (a
database several machines share), one row per hardware class (GPU model and count, CPUs) with
its best configuration, its speedup over the rules of thumb and the studies behind it.

The article's table ("4 cores + RTX 2060: 4-6 workers; 6 cores + 2070S: 8-12; 8 cores + 3090:
12-16") is a guess; this one is what the studies measured. Rates of different workloads do not
compare, speedups do: each study contributes its winner and the winner's speedup over the
better of the two rules of thumb it measured (the source article's "2 x physical cores" and
Ultralytics', :mod:`loadersearch.search._baselines`); PyTorch's defaults are not a rule of
thumb. A class's best configuration is the winner most of its studies agree on (ties: the one
with the larger speedup).
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from loadersearch.report._summary import Summary, summarize

RULES_OF_THUMB = ("article", "ultralytics")


@dataclass
class StudyAnswer:
    """One study's contribution to its hardware class's row."""

    study: str
    best: str  # the winner's label
    workers: int
    rate: float
    speedup: float | None  # over the better rule of thumb; None when neither was measured
    emulated: bool


@dataclass
class MachineRow:
    """One hardware class of a storage."""

    gpu: str  # "1 x NVIDIA H200", "no GPU"
    cpus: str  # "16 CPUs (8 cores)"
    studies: list[StudyAnswer] = field(default_factory=list)

    @property
    def best(self) -> StudyAnswer:
        votes = Counter(s.best for s in self.studies)
        return max(self.studies, key=lambda s: (votes[s.best], s.speedup or 0.0))

    @property
    def workers(self) -> str:
        """The winners' num_workers, as the article's table gives them: ``4`` or ``4-6``."""
        lo, hi = min(s.workers for s in self.studies), max(s.workers for s in self.studies)
        return str(lo) if lo == hi else f"{lo}-{hi}"

    @property
    def speedup(self) -> float | None:
        """The median over the studies of the winner's speedup over the rules of thumb."""
        values = [s.speedup for s in self.studies if s.speedup is not None]
        return statistics.median(values) if values else None

    @property
    def emulated(self) -> int:
        return sum(s.emulated for s in self.studies)

    def to_dict(self) -> dict[str, Any]:
        return {
            "gpu": self.gpu,
            "cpus": self.cpus,
            "studies": len(self.studies),
            "emulated_studies": self.emulated,
            "best": self.best.best,
            "best_study": self.best.study,
            "workers": self.workers,
            "speedup": self.speedup,
        }


def hardware_class(hardware: dict[str, Any]) -> tuple[str, str]:
    """``("1 x NVIDIA H200", "16 CPUs (8 cores)")`` from a study's stored fingerprint."""
    count, model = int(hardware.get("gpu_count") or 0), hardware.get("gpu_model")
    gpu = f"{count} x {model}" if count and model else "no GPU"
    cpus = int(hardware.get("cpu_count") or 0)
    cores = int(hardware.get("physical_cores") or 0)
    return gpu, f"{cpus} CPUs ({cores} cores)" if cores else f"{cpus} CPUs"


def study_answer(summary: Summary) -> StudyAnswer | None:
    """What ``summary``'s study says for its class; None without a feasible winner."""
    w = summary.winner
    if w is None:
        return None
    rules = [
        b.rate
        for b in summary.baselines
        if b.rate and any(name in RULES_OF_THUMB for name in b.name.split("+"))
    ]
    return StudyAnswer(
        study=summary.study,
        best=w.config.label(),
        workers=w.config.num_workers,
        rate=w.rate,
        speedup=w.rate / max(rules) if rules else None,
        emulated=summary.emulated,
    )


def machines(
    storage: str | None = None, pattern: str | None = None
) -> tuple[list[MachineRow], list[str]]:
    """Every hardware class of the storage's loadersearch studies (those whose names match
    the glob ``pattern``, when given), most studies first, and the studies left out (not
    loadersearch's, or nothing feasible yet) with the reason."""
    import fnmatch

    import optuna

    from loadersearch.search import foreign_study_problems
    from loadersearch.storage import open_existing_storage, resolve_storage_url, studies_listed

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    rdb = open_existing_storage(resolve_storage_url(storage))
    rows: dict[tuple[str, str], MachineRow] = {}
    skipped: list[str] = []
    every = rdb.get_all_studies()
    chosen = [s for s in every if not pattern or fnmatch.fnmatchcase(s.study_name, pattern)]
    if pattern and every and not chosen:
        from loadersearch.errors import StudyError

        listed = studies_listed([s.study_name for s in every])
        raise StudyError(
            f"no study name matches {pattern!r} (studies there: {listed}); quote the pattern "
            "so that the shell leaves it alone, e.g. --study 'yolo-*'."
        )
    for frozen in chosen:
        study = optuna.load_study(study_name=frozen.study_name, storage=rdb)
        if foreign_study_problems(study):
            skipped.append(f"{frozen.study_name}: not a loadersearch study")
            continue
        answer = study_answer(summarize(study))
        if answer is None:
            skipped.append(f"{frozen.study_name}: no feasible trial yet")
            continue
        key = hardware_class(study.user_attrs.get("hardware") or {})
        rows.setdefault(key, MachineRow(*key)).studies.append(answer)
    ordered = sorted(rows.values(), key=lambda r: (-len(r.studies), r.gpu, r.cpus))
    return ordered, skipped
