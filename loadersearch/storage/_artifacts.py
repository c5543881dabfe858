"""Where a study's pictures live: an Optuna file-system artifact store's folder beside the
database (:func:`~loadersearch.storage._open.open_artifact_store` opens the store).

Artifacts (a trial's window picture) are files, not rows, so they need a folder that the
processes running trials and the dashboard all see. Beside a SQLite file that is
``<file>-artifacts/`` (``studies/loadersearch.db-artifacts``); for a server shared by several
machines only the user knows such a folder (a shared file system), so it is
``$LOADERSEARCH_ARTIFACTS`` or none (the trials' notes still carry their windows as text).
"""

from __future__ import annotations

import os

from loadersearch.storage._sqlite import sqlite_path

ARTIFACTS_ENV = "LOADERSEARCH_ARTIFACTS"


def artifact_dir(url: str) -> str | None:
    """The artifact folder of the storage ``url``; None when there is none to use."""
    chosen = os.environ.get(ARTIFACTS_ENV)
    if chosen:
        return chosen
    path = sqlite_path(url)
    return f"{path}-artifacts" if path else None
