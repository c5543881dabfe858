"""Where a study's artifacts (the trials' window pictures) live."""

from __future__ import annotations

import io

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
