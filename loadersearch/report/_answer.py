"""The answer for scripts and training code: the winner as a config, as shell variables, or as
the lines to paste (for a DDP job: the sampler, the per-rank loader and the torchrun command)."""

from __future__ import annotations

from loadersearch._loader_config import LoaderConfig
from loadersearch.errors import StudyError
from loadersearch.report._reading import open_study
from loadersearch.report._summary import Summary, summarize


def load_best(storage: str | None = None, study: str | None = None) -> LoaderConfig:
    """The confirmed winner of a study (else its best trial) as a :class:`LoaderConfig`."""
    summary = summarize(open_study(storage, study))
    if summary.winner is None:
        raise StudyError(
            f"study {summary.study!r} has no finished feasible trial yet; run "
            "`loadersearch run` until it has."
        )
    return summary.winner.config


def env_lines(config: LoaderConfig) -> list[str]:
    """``LOADERSEARCH_NUM_WORKERS=4`` ... lines (for shell scripts)."""
    out = []
    for key, value in config.to_dict().items():
        if value is None:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        out.append(f"LOADERSEARCH_{key.upper()}={text}")
    return out


def answer_lines(summary: Summary) -> list[str]:
    """The winner's lines to paste: one ``DataLoader(...)`` call, or for a DDP job (several
    ranks) the ``DistributedSampler``, the per-rank ``DataLoader`` and the ``torchrun`` command
    that launches it as measured."""
    if summary.winner is None:
        raise StudyError(f"study {summary.study!r} has no feasible trial yet.")
    config = summary.winner.config
    if summary.gpus > 1:
        from loadersearch.measure import paste_lines

        return paste_lines(config, summary.gpus)
    return [config.snippet()]


def answer_python(summary: Summary, note: str = "") -> str:
    """The answer as Python code: ``note`` (a comment) ends the loader line; a DDP job's
    ``torchrun`` command is a comment."""
    lines = answer_lines(summary)
    if summary.cache is not None and summary.cache.mode != "none":
        note += f"  # measured reading the images from the {summary.cache.mode} cache"
    if summary.gpus > 1:
        sampler, loader, launch = lines
        return f"{sampler}\n{loader}{note}\n# launch: {launch}"
    return lines[0] + note
