"""What :func:`loadersearch.tune` returns (:class:`TuneResult`): the winner, its throughput,
the study's summary, and the text ``loadersearch run`` prints at its end.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from loadersearch._loader_config import LoaderConfig

if TYPE_CHECKING:
    import optuna

    from loadersearch.report import Summary


@dataclass
class TuneResult:
    """What :func:`tune` found. Everything is also in the study: :func:`loadersearch.load_best`
    and ``loadersearch report`` read it back."""

    best: LoaderConfig | None  # the winner (confirmed unless confirm_rounds=0); None: none ran
    images_per_s: float | None  # its throughput: the confirmation median, else its trial value
    confirmed: bool  # named after the interleaved re-measurement of the finalists
    emulated: bool  # measured on the emulated accelerator (a stand-in, not your device)
    study_name: str
    storage: str  # the storage URL (as given: may hold a password; report() redacts it)
    summary: Summary  # the baselines and speedups, counts, every trial (loadersearch.report)
    probe: str  # what the batch-size probe found, or why it was skipped
    ran: int  # trials this call measured (a resumed study runs only the difference)
    elapsed_s: float
    study: optuna.Study

    def dataloader_kwargs(self) -> dict[str, Any]:
        """The winner's ``DataLoader`` keyword arguments."""
        return self._best().dataloader_kwargs()

    def snippet(self, dataset: str = "dataset") -> str:
        """The winner as a ``DataLoader(...)`` line to paste."""
        return self._best().snippet(dataset)

    def report(self) -> str:
        """The text ``loadersearch run`` prints at its end: the winner, its speedup over each
        baseline, the projected epoch time, the line to paste, the dashboard command."""
        from rich.console import Console

        from loadersearch.report import render_summary

        out = io.StringIO()
        console = Console(file=out, width=100, color_system=None, highlight=False)
        render_summary(
            self.summary,
            storage=self.storage,
            elapsed_s=self.elapsed_s,
            ran=self.ran,
            probe=self.probe,
            console=console,
        )
        return out.getvalue()

    def __str__(self) -> str:
        return self.report()

    def _best(self) -> LoaderConfig:
        if self.best is None:
            from loadersearch.errors import StudyError

            raise StudyError(f"study {self.study_name!r} has no feasible configuration.")
        return self.best
