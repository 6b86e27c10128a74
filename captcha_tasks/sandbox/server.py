"""The sandbox's server: :class:`SandboxServer` on a ``ThreadingHTTPServer``.

Standard library only: HTTP/1.1 with keep-alive, one daemon thread per connection,
TLS handshakes done in that thread rather than in the accept loop, and a stop that
ends idle keep-alive connections and held-back answers instead of waiting for them.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import socketserver
import ssl
import threading
import time
from types import TracebackType
from typing import Any

from .config import SandboxConfig
from .handler import SandboxHandler, StatefulHTTPServer
from .state import SandboxState

__all__ = ["SandboxServer"]

logger = logging.getLogger("captcha_tasks.sandbox")


class _HTTPServer(StatefulHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256

    def __init__(
        self, address: tuple[str, int], state: SandboxState, tls: ssl.SSLContext | None
    ) -> None:
        self.state = state
        self.stopping = threading.Event()
        self._live_lock = threading.Lock()
        self._live: dict[threading.Thread, socket.socket] = {}
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, SandboxHandler)
        if tls is not None:
            self.socket = tls.wrap_socket(
                self.socket, server_side=True, do_handshake_on_connect=False
            )

    def server_bind(self) -> None:
        # HTTPServer.server_bind() resolves the host name (getfqdn): slow, and unused here.
        socketserver.TCPServer.server_bind(self)
        self.server_name = str(self.server_address[0])
        self.server_port = int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name="sandbox-connection",
            daemon=True,
        )
        with self._live_lock:
            self._live[thread] = request
        thread.start()

    def _serve_connection(self, request: Any, client_address: Any) -> None:
        try:
            self.process_request_thread(request, client_address)
        finally:
            with self._live_lock:
                self._live.pop(threading.current_thread(), None)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Resets, timeouts and failed TLS handshakes are the client's business.
        logger.debug("sandbox: connection from %s failed", client_address, exc_info=True)

    def close_connections(self, timeout: float) -> None:
        """Wake and end every connection thread (idle keep-alives, slow answers)."""
        self.stopping.set()
        with self._live_lock:
            live = dict(self._live)
        for sock in live.values():
            with contextlib.suppress(OSError):
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        deadline = time.monotonic() + timeout
        for thread in live:
            thread.join(max(0.0, deadline - time.monotonic()))


class SandboxServer:
    """A local in.php/res.php solver. ``port=0`` picks a free port; see ``url``.

    Use ``start()``/``stop()`` (serving in a background thread), ``serve_forever()``
    (in the calling thread, until ``stop()`` from another one), or ``with``.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.state = SandboxState(config or SandboxConfig())
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._serving = False
        self._stopped = False
        self._lock = threading.Lock()

    @property
    def config(self) -> SandboxConfig:
        """The configuration in force (``POST /admin/config`` changes it)."""
        return self.state.config

    @property
    def port(self) -> int:
        return int(self._bind().server_address[1])

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:54321`` (https with TLS)."""
        config = self.state.config
        scheme = "https" if config.tls_cert else "http"
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(config.host, config.host)
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{self.port}"

    def stats(self) -> dict[str, object]:
        return self.state.stats()

    def start(self) -> SandboxServer:
        """Listen and serve in a daemon thread; returns once connections are accepted."""
        httpd = self._bind()
        with self._lock:
            if self._serving:
                return self
            self._serving = True
            self._thread = threading.Thread(
                target=httpd.serve_forever,
                kwargs={"poll_interval": 0.05},
                name="sandbox-server",
                daemon=True,
            )
            self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` is called from another thread."""
        httpd = self._bind()
        with self._lock:
            if self._serving:
                raise RuntimeError("the sandbox is already serving")
            self._serving = True
        try:
            httpd.serve_forever(poll_interval=0.05)
        finally:
            self.stop()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving, end open connections and release the port (idempotent)."""
        with self._lock:
            httpd = self._httpd
            if httpd is None or self._stopped:
                return
            self._stopped = True
            serving = self._serving
        httpd.stopping.set()
        if serving and threading.current_thread() is not self._thread:
            httpd.shutdown()
        httpd.close_connections(timeout)
        httpd.server_close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _bind(self) -> _HTTPServer:
        with self._lock:
            if self._httpd is None:
                if self._stopped:
                    raise RuntimeError("the sandbox was stopped; make a new SandboxServer")
                config = self.state.config
                tls = None
                if config.tls_cert and config.tls_key:
                    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
                    tls.load_cert_chain(config.tls_cert, config.tls_key)
                self._httpd = _HTTPServer((config.host, config.port), self.state, tls)
                logger.debug("sandbox: listening on %s:%s", config.host, self._httpd.server_port)
            return self._httpd
