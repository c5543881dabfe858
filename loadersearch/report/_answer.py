"""The answer for scripts and training code: the winner as a config, or as shell variables."""

from __future__ import annotations

from loadersearch.config import LoaderConfig
from loadersearch.errors import StudyError
from loadersearch.report._study import open_study
from loadersearch.report._summary import summarize


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
