"""Fixtures of the storage tests: a TCP proxy a test can cut (a database restart).
The storage backends and their fixtures are in tests/conftest.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


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

        # Under the lock, so that a connection being accepted right now is either in the list
        # closed here or sees that its listener is gone (and closes itself): none survives.
        with self._lock:
            listener, self._listener = self._listener, None
            sockets, self._sockets = self._sockets, []
        if listener is not None:
            try:
                listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            listener.close()
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
                live = self._listener is listener
                if live:
                    self._sockets += [client, server]
            if not live:  # stopped while this connection was being made
                client.close()
                server.close()
                return
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src, dst) -> None:
        import socket

        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            # shutdown before close: the other direction's thread, blocked in recv on one of
            # these, wakes, and the client sees the end (a close alone leaves it waiting).
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()


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
