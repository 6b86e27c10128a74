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

from .callbacks import CallbackSender
from .config import SandboxConfig
from .demo_site import DemoHandler, DemoHTTPServer, DemoSite
from .handler import SandboxHandler, StatefulHTTPServer
from .json_api import JsonApi
from .state import SandboxState

__all__ = ["SandboxServer"]

logger = logging.getLogger("captcha_tasks_sandbox")


class _HTTPServer(StatefulHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 256
    handler_class: type[SandboxHandler] = SandboxHandler

    def __init__(
        self, address: tuple[str, int], state: SandboxState, tls: ssl.SSLContext | None
    ) -> None:
        self.state = state
        self.callbacks = CallbackSender(state)
        self.json_api = JsonApi(state, self.callbacks)
        self.stopping = threading.Event()
        self._live_lock = threading.Lock()
        self._live: dict[threading.Thread, socket.socket] = {}
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, self.handler_class)
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


class _DemoServer(_HTTPServer, DemoHTTPServer):
    handler_class = DemoHandler

    def __init__(
        self, address: tuple[str, int], demo: DemoSite, tls: ssl.SSLContext | None
    ) -> None:
        self.demo = demo
        super().__init__(address, demo.state, tls)


class SandboxServer:
    """A local in.php/res.php solver. ``port=0`` picks a free port; see ``url``.

    With ``demo_port`` set, a demo target site (:mod:`.demo_site`) is served too, on its
    own port (``demo_url``), sharing the token store; it starts and stops with the sandbox.

    Use ``start()``/``stop()`` (serving in a background thread), ``serve_forever()``
    (in the calling thread, until ``stop()`` from another one), or ``with``.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        self.state = SandboxState(config or SandboxConfig())
        #: The demo site's state (counters, cookies), or None without ``demo_port``.
        self.demo = DemoSite(self.state) if self.state.config.demo_port is not None else None
        self._httpd: _HTTPServer | None = None
        self._demo_httpd: _DemoServer | None = None
        self._thread: threading.Thread | None = None
        self._demo_thread: threading.Thread | None = None
        self._serving = False
        self._stopped = False
        self._lock = threading.Lock()
        #: The port to bind instead of ``config.port`` (set by :meth:`successor`).
        self._port: int | None = None

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
        return self._url(self.port)

    @property
    def demo_port(self) -> int | None:
        """The demo site's port, or None when it is off."""
        if self.demo is None:
            return None
        self._bind()
        return None if self._demo_httpd is None else int(self._demo_httpd.server_address[1])

    @property
    def demo_url(self) -> str | None:
        """The demo site's base URL (e.g. ``http://127.0.0.1:54322``), or None when off."""
        port = self.demo_port
        return None if port is None else self._url(port)

    def _url(self, port: int) -> str:
        config = self.state.config
        scheme = "https" if config.tls_cert else "http"
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(config.host, config.host)
        if ":" in host:
            host = f"[{host}]"
        return f"{scheme}://{host}:{port}"

    def stats(self) -> dict[str, object]:
        """``GET /stats``: the state's counters and the callbacks' (``callbacks_*``)."""
        httpd = self._httpd
        return {**self.state.stats(), **(httpd.callbacks.stats() if httpd else {})}

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
            self._start_demo()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` is called from another thread."""
        httpd = self._bind()
        with self._lock:
            if self._serving:
                raise RuntimeError("the sandbox is already serving")
            self._serving = True
            self._start_demo()
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
            demo_httpd = self._demo_httpd
        httpd.stopping.set()
        httpd.callbacks.stop()
        if demo_httpd is not None:
            demo_httpd.stopping.set()
            if serving:
                demo_httpd.shutdown()
        if serving and threading.current_thread() is not self._thread:
            httpd.shutdown()
        for server in (httpd, demo_httpd):
            if server is not None:
                server.close_connections(timeout)
                server.server_close()
        for thread in (self._thread, self._demo_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)

    def successor(self) -> SandboxServer:
        """A new server (not started) for this one's port and memory: its captchas in
        flight, balance, counters and configuration. An outage test stops a sandbox (its
        port then refuses connections), waits, and starts the successor."""
        port = self.port
        server = SandboxServer(self.state.config)
        server.state = self.state
        server.demo = self.demo
        server._port = port
        return server

    def _start_demo(self) -> None:
        """Serve the demo site in a daemon thread (lock held, after ``_bind``)."""
        if self._demo_httpd is None:
            return
        self._demo_thread = threading.Thread(
            target=self._demo_httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="sandbox-demo-site",
            daemon=True,
        )
        self._demo_thread.start()

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
                port = config.port if self._port is None else self._port
                httpd = _HTTPServer((config.host, port), self.state, tls)
                if self.demo is not None and config.demo_port is not None:
                    try:
                        self._demo_httpd = _DemoServer(
                            (config.host, config.demo_port), self.demo, tls
                        )
                    except OSError:
                        httpd.server_close()
                        raise
                    logger.debug("sandbox: demo site on port %s", self._demo_httpd.server_port)
                self._httpd = httpd
                logger.debug("sandbox: listening on %s:%s", config.host, httpd.server_port)
            return self._httpd
