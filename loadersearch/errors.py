"""Errors a user can fix. The CLI shows their message in one line (no traceback unless --debug)."""

from __future__ import annotations


class LoaderSearchError(Exception):
    """Base class: a problem with the user's input or environment, with the fix in the message."""


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


class StudyError(LoaderSearchError):
    """The study cannot be created, loaded or joined as asked."""


class DeviceError(LoaderSearchError):
    """The device a measurement must run on cannot be used (e.g. a CUDA study where this process
    sees no GPU); every trial would fail the same way, so the run stops with the reason."""
