"""One list of storage backends and one fixture parametrised over it (Optuna's shape): every
storage test runs on a SQLite file and, when ``$LOADERSEARCH_TEST_POSTGRES`` /
``$LOADERSEARCH_TEST_MYSQL`` name a server (``.ci/run`` sets both), on PostgreSQL and MariaDB.
Studies are named uniquely per test and deleted afterwards, so runs never see each other's.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

# (backend id, environment variable with its URL; None for the SQLite file in tmp_path)
BACKENDS = [
    ("sqlite", None),
    ("postgresql", "LOADERSEARCH_TEST_POSTGRES"),
    ("mysql", "LOADERSEARCH_TEST_MYSQL"),
]
SERVER_BACKENDS = [b for b in BACKENDS if b[1] is not None]


def server_url(env_var: str) -> str:
    """The URL in ``env_var``, or skip the test (a user's machine may have no server)."""
    url = os.environ.get(env_var)
    if not url:
        pytest.skip(f"${env_var} is not set (no test server for this backend)")
    return url


def _delete_studies(url: str, prefix: str) -> None:
    import optuna

    storage = optuna.storages.RDBStorage(url)
    try:
        for study in storage.get_all_studies():
            if study.study_name.startswith(prefix):
                storage.delete_study(study._study_id)
    finally:
        storage.engine.dispose()


@pytest.fixture
def study_name() -> str:
    """A study name no other test (or earlier run) uses."""
    return f"lstest-{uuid.uuid4().hex[:12]}"


def _url_for(backend: tuple[str, str | None], tmp_path) -> str:
    name, env_var = backend
    if env_var is None:
        return f"sqlite:///{tmp_path / 'studies.db'}"
    return server_url(env_var)


@pytest.fixture(params=BACKENDS, ids=[b[0] for b in BACKENDS])
def storage_url(request, tmp_path, study_name) -> Iterator[str]:
    """A storage URL of each backend; studies named with ``study_name``'s prefix are deleted
    after the test."""
    url = _url_for(request.param, tmp_path)
    yield url
    _delete_studies(url, study_name)


@pytest.fixture
def postgres_url(study_name) -> Iterator[str]:
    """The PostgreSQL test server (skips without one); the test's studies are deleted after."""
    url = server_url("LOADERSEARCH_TEST_POSTGRES")
    yield url
    _delete_studies(url, study_name)


class TcpProxy:
    """A loopback TCP proxy to a database server that a test can stop (every connection
    dropped, new ones refused) and start again on the same port: a server restart, without
    touching the real server that other tests use."""

    def __init__(self, upstream_host: str, upstream_port: int) -> None:
        import socket

        self.upstream = (upstream_host, upstream_port)
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        self.port = probe.getsockname()[1]
        probe.close()
        self._listener = None
        self._sockets: list = []
        self._lock = __import__("threading").Lock()

    def start(self) -> None:
        import socket
        import threading

        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        import socket

        listener, self._listener = self._listener, None
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def _accept(self, listener) -> None:
        import socket
        import threading

        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=5)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.close()
                except OSError:
                    pass


@pytest.fixture
def postgres_proxy(postgres_url) -> Iterator[tuple[TcpProxy, str]]:
    """(proxy, URL through it with a password) to the PostgreSQL test server."""
    from sqlalchemy.engine import make_url

    real = make_url(postgres_url)
    proxy = TcpProxy(real.host or "127.0.0.1", real.port or 5432)
    proxy.start()
    url = real.set(port=proxy.port, password="s3cr3t-pw").render_as_string(hide_password=False)
    yield proxy, url
    proxy.stop()
