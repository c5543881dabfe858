"""Errors a user can fix. The CLI shows their message in one line (no traceback unless --debug)
and exits with their ``exit_code``."""

from __future__ import annotations

import signal


class LoaderSearchError(Exception):
    """Base class: a problem with the user's input or environment, with the fix in the message."""

    exit_code = 2  # bad input


class SpecError(LoaderSearchError):
    """A study spec (file or options) cannot be used; the message names the key and the fix."""


class DatasetError(LoaderSearchError):
    """The dataset cannot be used: missing directory, unknown format, nothing to load."""


class BadSampleError(LoaderSearchError):
    """One sample cannot be loaded. Names the file and the reason."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason

    def __reduce__(self):  # survive pickling across DataLoader worker processes
        return (type(self), (self.path, self.reason))


class PipelineError(LoaderSearchError):
    """The user's own pipeline (dataset, collate, model, loss, step) cannot be imported, built
    or run; the message names the part, its reference and what to change."""


class StorageError(LoaderSearchError):
    """The study database cannot be reached or used (the URL is always shown redacted)."""


class DiskFullError(StorageError):
    """The disk under the study database is full: names the file system, its free space and
    what to do. Not bad input: the run itself failed (exit 1)."""

    exit_code = 1


class ResourceLimitError(LoaderSearchError):
    """A limit of this process (``ulimit -n``, ``ulimit -v``, ...) stops every measurement:
    named as the limit it is, with how to raise it (exit 1)."""

    exit_code = 1


class StudyError(LoaderSearchError):
    """The study cannot be created, loaded or joined as asked."""


class DeviceError(LoaderSearchError):
    """The device a measurement must run on cannot be used (e.g. a CUDA study where this process
    sees no GPU); every trial would fail the same way, so the run stops with the reason."""
class NothingFeasibleError(StudyError):
    """Every configuration measured was infeasible here (e.g. over the VRAM cap): the run has
    no answer, and says why in one line (exit 3, as ``bench`` on an infeasible configuration)."""

    exit_code = 3


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or SIGTERM (what Slurm, Kubernetes and systemd send on preemption).

    A ``KeyboardInterrupt``, so that every clean-up written for Ctrl-C (the measurement's
    process group killed, the trial marked for re-run) runs for SIGTERM too. ``requeued``
    lists the trials queued again with the same parameters, for the CLI to say so."""

    def __init__(self, signum: int = signal.SIGINT) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.requeued: list[int] = []

    # Signals the CLI's handler received (it appends before raising): Python swallows an
    # exception raised inside a garbage-collection callback (SQLAlchemy's, say) with only
    # "Exception ignored", so a signal that lands there would be lost; the optimize loop and
    # the CLI check this list and stop anyway.
    received: list[int] = []

    @classmethod
    def pending(cls) -> Interrupted | None:
        """The interruption received but not raised through, or None (and forgets it)."""
        if not cls.received:
            return None
        signum = cls.received[-1]
        cls.received.clear()
        return cls(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM

    @property
    def name(self) -> str:
        return "Ctrl-C" if self.signum == signal.SIGINT else signal.Signals(self.signum).name
