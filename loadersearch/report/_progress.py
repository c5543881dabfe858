"""How ``loadersearch run`` (on stdout) and :func:`loadersearch.tune` (on stderr) show a study
while it runs: a live rich panel on a terminal, plain lines (one per event) otherwise, nothing
with --quiet (``verbose=False``). The displays of :class:`~loadersearch.search._progress.Progress`
the command line and the API share; they write to the terminal only when they are given one."""

from __future__ import annotations

import statistics
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from loadersearch.search import Progress

if TYPE_CHECKING:
    import optuna

    from loadersearch._loader_config import LoaderConfig
    from loadersearch.measure import MeasureResult, Window


class _Tracker(Progress):
    """Counts and timings shared by both displays."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.finished = 0
        self.counts = {"pruned": 0, "infeasible": 0, "failed": 0}
        self.best: tuple[float, str] | None = None
        self.current: tuple[int, str, str | None] | None = None
        self.values: list[float] = []
        self.durations: list[float] = []
        self.started_at = time.monotonic()
        self.trial_started = self.started_at
        self.confirming: tuple[int, int] | None = None  # (done, total)

    def study_ready(
        self, study: optuna.Study, *, resumed: bool, finished: int, target: int
    ) -> None:
        self.finished = finished
        self.study_name = study.study_name
        for t in study.get_trials(deepcopy=False):
            self._count(t)

    def trial_start(self, number: int, config: LoaderConfig, baseline: str | None) -> None:
        self.current = (number, config.label(), baseline)
        self.values = []
        self.trial_started = time.monotonic()

    def window(self, number: int, window: Window, value: float) -> None:
        self.values.append(value)

    def trial_end(self, trial: optuna.trial.FrozenTrial, summary: dict[str, Any]) -> None:
        self.durations.append(time.monotonic() - self.trial_started)
        self.finished = summary.get("finished", self.finished + 1)
        self._count(trial)
        self.current = None

    def _count(self, trial: optuna.trial.FrozenTrial) -> None:
        state = trial.state.name
        attrs = trial.user_attrs
        if state == "PRUNED":
            self.counts["pruned"] += 1
        elif state == "FAIL":
            self.counts["failed"] += 1
        elif state == "COMPLETE" and not attrs.get("feasible", True):
            self.counts["infeasible"] += 1
        elif state == "COMPLETE" and trial.value is not None:
            if self.best is None or trial.value > self.best[0]:
                self.best = (trial.value, attrs.get("config", ""))

    def eta_s(self) -> float | None:
        if not self.durations:
            return None
        return statistics.fmean(self.durations) * max(self.target - self.finished, 0)

    def confirm_start(self, labels: list[str], rounds: int) -> None:
        self.confirming = (0, len(labels) * rounds)

    def confirm_step(self, label: str, round_: int, result: MeasureResult) -> None:
        if self.confirming:
            self.confirming = (self.confirming[0] + 1, self.confirming[1])

    def confirm_out(self, label: str, skipped: int) -> None:
        if self.confirming:
            self.confirming = (self.confirming[0], self.confirming[1] - skipped)

    def close(self) -> None:
        pass

    def status_line(self) -> str:
        parts = [f"trial {min(self.finished + 1, self.target)}/{self.target}"]
        if self.current:
            number, label, baseline = self.current
            parts.append(f"#{number} {label}" + (f" [{baseline}]" if baseline else ""))
            if self.values:
                parts.append(f"now {statistics.fmean(self.values):.1f} img/s")
        if self.best:
            parts.append(f"best {self.best[0]:.1f} img/s ({self.best[1]})")
        parts.append(
            f"pruned {self.counts['pruned']}, infeasible {self.counts['infeasible']}"
            + (f", failed {self.counts['failed']}" if self.counts["failed"] else "")
        )
        eta = self.eta_s()
        if eta is not None and not self.confirming:
            parts.append(f"ETA {_duration(eta)}")
        if self.confirming:
            parts.append(f"confirming {self.confirming[0]}/{self.confirming[1]}")
        return " | ".join(parts)


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class PlainProgress(_Tracker):
    """One line per event, for logs and pipes; on stderr when ``err``."""

    def __init__(self, target: int, *, err: bool = False) -> None:
        super().__init__(target)
        self.err = err

    def _echo(self, text: str) -> None:
        click.echo(text, err=self.err)
        (sys.stderr if self.err else sys.stdout).flush()

    def answer(self, lines: list[str]) -> None:
        for line in lines:
            self._echo(line)

    def notice(self, text: str) -> None:
        self._echo(f"note: {text}")

    def study_ready(
        self, study: optuna.Study, *, resumed: bool, finished: int, target: int
    ) -> None:
        super().study_ready(study, resumed=resumed, finished=finished, target=target)
        verb = "resuming" if resumed else "created"
        # open_study describes what this process measures (the stored text is free text)
        described = getattr(study, "described", None)
        described = described or study.user_attrs.get("workload_description", "")
        self._echo(
            f"study {study.study_name}: {verb}, {finished} of {target} trials finished; "
            f"{described}"
        )

    def probe_step(self, batch: int, fits: bool, detail: str) -> None:
        self._echo(f"probe batch_size={batch}: {'fits' if fits else 'over the cap'} ({detail})")

    def trial_end(self, trial: optuna.trial.FrozenTrial, summary: dict[str, Any]) -> None:
        super().trial_end(trial, summary)
        a = trial.user_attrs
        state = trial.state.name.lower()
        if state == "complete" and not a.get("feasible", True):
            what = f"infeasible ({a.get('infeasible_reason')})"
        elif state == "complete":
            what = f"{trial.value:.1f} img/s"
        elif state == "pruned":
            what = f"pruned after {a.get('windows_done')} windows"
        else:
            what = f"{state} ({a.get('reason') or ''})"
        base = f" [{a['baseline']}]" if a.get("baseline") else ""
        best = f"; best {self.best[0]:.1f} img/s" if self.best else ""
        eta = self.eta_s()
        eta_text = f"; ETA {_duration(eta)}" if eta else ""
        self._echo(
            f"trial {trial.number} ({self.finished}/{self.target}) {a.get('config', '')}{base}: "
            f"{what}{best}{eta_text}"
        )

    def confirm_start(self, labels: list[str], rounds: int) -> None:
        super().confirm_start(labels, rounds)
        self._echo(
            f"confirming {len(labels)} finalists, {rounds} interleaved rounds: "
            + ", ".join(labels)
        )

    def confirm_step(self, label: str, round_: int, result: MeasureResult) -> None:
        super().confirm_step(label, round_, result)
        rate = f"{result.objective:.1f} img/s" if result.ok else f"{result.status}"
        self._echo(f"  round {round_ + 1}: {label}: {rate}")


class RichProgress(_Tracker):
    """A live panel on a terminal (stderr's when ``err``); finished trials scroll above it."""

    def __init__(self, target: int, *, err: bool = False) -> None:
        super().__init__(target)
        from rich.console import Console
        from rich.live import Live

        self.console = Console(stderr=err)
        self.live = Live(
            self._render(), console=self.console, refresh_per_second=4, transient=True
        )
        self.live.start()

    def _render(self) -> Any:
        from rich.text import Text

        return Text(self.status_line(), style="bold cyan")

    def _update(self) -> None:
        self.live.update(self._render())

    def notice(self, text: str) -> None:
        self.console.print(f"[yellow]note:[/] {text}")

    def study_ready(
        self, study: optuna.Study, *, resumed: bool, finished: int, target: int
    ) -> None:
        super().study_ready(study, resumed=resumed, finished=finished, target=target)
        verb = "resuming" if resumed else "created"
        self.console.print(
            f"study [bold]{study.study_name}[/]: {verb}, {finished} of {target} trials finished"
        )
        self._update()

    def probe_step(self, batch: int, fits: bool, detail: str) -> None:
        mark = "[green]fits[/]" if fits else "[red]over the cap[/]"
        self.console.print(f"probe batch_size={batch}: {mark} ({detail})")

    def trial_start(self, number: int, config: LoaderConfig, baseline: str | None) -> None:
        super().trial_start(number, config, baseline)
        self._update()

    def window(self, number: int, window: Window, value: float) -> None:
        super().window(number, window, value)
        self._update()

    def trial_end(self, trial: optuna.trial.FrozenTrial, summary: dict[str, Any]) -> None:
        super().trial_end(trial, summary)
        a = trial.user_attrs
        if trial.state.name == "COMPLETE" and a.get("feasible", True):
            what = f"[green]{trial.value:.1f} img/s[/]"
        elif trial.state.name == "COMPLETE":
            what = f"[red]infeasible ({a.get('infeasible_reason')})[/]"
        elif trial.state.name == "PRUNED":
            what = f"[yellow]pruned after {a.get('windows_done')} windows[/]"
        else:
            what = f"[red]{trial.state.name.lower()} ({a.get('reason')})[/]"
        base = f" [dim]\\[{a['baseline']}][/]" if a.get("baseline") else ""
        self.console.print(f"trial {trial.number}: {a.get('config', '')}{base} {what}")
        self._update()

    def confirm_start(self, labels: list[str], rounds: int) -> None:
        super().confirm_start(labels, rounds)
        self.console.print(f"confirming {len(labels)} finalists x {rounds} interleaved rounds")
        self._update()

    def confirm_step(self, label: str, round_: int, result: MeasureResult) -> None:
        super().confirm_step(label, round_, result)
        self._update()

    def close(self) -> None:
        self.live.stop()

    def answer(self, lines: list[str]) -> None:
        for line in lines:
            self.console.print(line, soft_wrap=True, markup=False, highlight=False)


def make_progress(*, quiet: bool, target: int, err: bool = False) -> _Tracker:
    """The display for a study of ``target`` trials, on stdout (stderr when ``err``): rich on
    a terminal, plain lines otherwise, nothing when ``quiet``."""
    if quiet:
        return _Tracker(target)
    if (sys.stderr if err else sys.stdout).isatty():
        return RichProgress(target, err=err)
    return PlainProgress(target, err=err)
