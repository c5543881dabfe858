"""What a running study tells its watcher. The library calls these hooks and never prints; the
command line renders them (a live rich display, or plain lines when stdout is not a terminal).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna

    from loadersearch._loader_config import LoaderConfig
    from loadersearch.measure import MeasureResult, Window


class Progress:
    """No-op hooks; subclass and override what you show. Exceptions in hooks are not caught."""

    def notice(self, text: str) -> None:
        """A sentence worth showing once (e.g. "on a CPU the model is the bottleneck")."""

    def study_ready(
        self, study: optuna.Study, *, resumed: bool, finished: int, target: int
    ) -> None:
        """The study is open; ``finished`` trials of ``target`` are already done."""

    def probe_step(self, batch: int, fits: bool, detail: str) -> None:
        """One batch-size probe measurement finished."""

    def trial_start(self, number: int, config: LoaderConfig, baseline: str | None) -> None:
        """A trial starts measuring ``config``."""

    def window(self, number: int, window: Window, value: float) -> None:
        """A measurement window arrived; ``value`` is what was reported to the pruner."""

    def trial_end(self, trial: optuna.trial.FrozenTrial, summary: dict[str, Any]) -> None:
        """A trial finished (complete, pruned, infeasible or failed)."""

    def confirm_start(self, labels: list[str], rounds: int) -> None:
        """The interleaved confirmation of the finalists starts."""

    def confirm_step(self, label: str, round_: int, result: MeasureResult) -> None:
        """One confirmation measurement finished."""

    def confirm_out(self, label: str, skipped: int) -> None:
        """The confirmation measures ``label`` no more: ``skipped`` of its rounds are not
        needed (it cannot win any more, or it has won)."""

    def answer(self, lines: list[str]) -> None:
        """The study's answer, at the end of :func:`loadersearch.tune`: the winner and the
        line to paste."""

    def close(self) -> None:
        """The study is over (or stopped): release the display."""
