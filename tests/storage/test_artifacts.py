"""Where a study's artifacts (the trials' window pictures) live."""

from __future__ import annotations

import io

import pytest

from loadersearch.storage import ARTIFACTS_ENV, artifact_dir, open_artifact_store


def test_a_sqlite_file_keeps_its_artifacts_beside_it(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    assert artifact_dir(url) == f"{tmp_path / 'a.db'}-artifacts"
    store = open_artifact_store(url)
    assert store is not None
    # The folder is made at the first write (a run refused before it wrote leaves none).
    assert not (tmp_path / "a.db-artifacts").exists()
    store.write("x", io.BytesIO(b"window"))
    assert (tmp_path / "a.db-artifacts" / "x").read_bytes() == b"window"


def test_a_server_has_artifacts_only_where_the_user_names_a_folder(tmp_path, monkeypatch) -> None:
    url = "postgresql+psycopg://user@db.example/studies"
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    assert artifact_dir(url) is None and open_artifact_store(url) is None
    assert artifact_dir("sqlite:///:memory:") is None
    monkeypatch.setenv(ARTIFACTS_ENV, str(tmp_path / "shared"))
    assert artifact_dir(url) == str(tmp_path / "shared")


def test_a_full_disk_under_the_artifacts_names_their_folder_and_spares_the_trial(
    tmp_path, monkeypatch, caplog
) -> None:
    """A red team's find (stop 50): a full disk under the artifact folder raised a nameless
    OSError ("writing ." in the message) and failed the trial. The error names the folder; a
    window picture that cannot be stored is a warning, and the trial goes on."""
    import errno

    import optuna
    from optuna.artifacts import FileSystemArtifactStore

    from loadersearch.measure import MeasureResult, Window
    from loadersearch.report import window_artifact_hook

    def full(self, artifact_id, content_body):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(FileSystemArtifactStore, "write", full)
    monkeypatch.delenv(ARTIFACTS_ENV, raising=False)
    store = open_artifact_store(f"sqlite:///{tmp_path / 'a.db'}")
    with pytest.raises(OSError) as failed:
        store.write("x", io.BytesIO(b"window"))
    assert failed.value.filename == f"{tmp_path / 'a.db'}-artifacts"

    study = optuna.create_study()
    trial = study.ask()
    result = MeasureResult.__new__(MeasureResult)
    windows = [Window(i, 0, 64, 1.0, 0.1, 0.8, 0.0) for i in range(2)]
    result.__dict__.update(config=_config(), windows=windows)
    window_artifact_hook(store)(trial, result)  # no exception: the trial goes on
    assert "window picture was not stored: no space left" in caplog.text


def _config():
    from loadersearch import LoaderConfig

    return LoaderConfig(2, 16)
