"""Where a study's pictures live: an Optuna file-system artifact store beside the database.

Artifacts (a trial's window picture) are files, not rows, so they need a folder that the
processes running trials and the dashboard all see. Beside a SQLite file that is
``<file>-artifacts/`` (``studies/loadersearch.db-artifacts``); for a server shared by several
machines only the user knows such a folder (a shared file system), so it is
``$LOADERSEARCH_ARTIFACTS`` or none (the trials' notes still carry their windows as text).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, BinaryIO

from loadersearch.storage._sqlite import sqlite_path

if TYPE_CHECKING:
    from optuna.artifacts import FileSystemArtifactStore

ARTIFACTS_ENV = "LOADERSEARCH_ARTIFACTS"


def artifact_dir(url: str) -> str | None:
    """The artifact folder of the storage ``url``; None when there is none to use."""
    chosen = os.environ.get(ARTIFACTS_ENV)
    if chosen:
        return chosen
    path = sqlite_path(url)
    return f"{path}-artifacts" if path else None


def open_artifact_store(url: str, *, create: bool = True) -> FileSystemArtifactStore | None:
    """The artifact store of the storage ``url``, or None. ``create`` (a process that runs
    trials): its folder is created, after the checks a run makes before it creates anything
    (:func:`~loadersearch.storage._open.check_run_storage`: a read-only disk or another
    application's database is refused in one line). Without, for a reader (``dashboard``):
    None unless the folder is there, so that reading a study leaves no folder beside it."""
    from optuna.artifacts import FileSystemArtifactStore

    folder = artifact_dir(url)
    if folder is None:
        return None
    if create:
        from loadersearch.storage._open import check_run_storage

        check_run_storage(url)
        return _created_on_write(folder)
    if not os.path.isdir(folder):
        return None
    return FileSystemArtifactStore(folder)


def _created_on_write(folder: str) -> FileSystemArtifactStore:
    """An artifact store whose folder is made at its first write: a run refused after the
    storage check (a read-only cache directory, say) leaves no empty folder behind."""
    from optuna.artifacts import FileSystemArtifactStore

    class CreatedOnWrite(FileSystemArtifactStore):
        def write(self, artifact_id: str, content_body: BinaryIO) -> None:
            os.makedirs(self._base_path, exist_ok=True)
            super().write(artifact_id, content_body)

    return CreatedOnWrite(folder)
