"""The callback receiver's HTTP side: a small threaded server in front of
:class:`~.callbacks.Receiver`, rate-limited, that logs no path (the token is in it)
and no body (the answer is in it).

Every worker of a host may listen on the same port (``SO_REUSEPORT``: the kernel
spreads the connections), since any engine can end any job.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from .callbacks import Outcome, Receiver

__all__ = ["CallbackServer", "RateLimit"]

log = logging.getLogger(__name__)

#: Largest callback body read (a getTaskResult answer is a few kB).
MAX_BODY = 64 * 1024
#: Callbacks per second one receiver takes (burst: twice that): far above any plan's
#: solves per second, low enough that a flood cannot starve the engine.
RATE = 1000.0
#: Refused requests (wrong token, unknown job) per second from one address (burst 20)
#: before that address gets only 429s: guessing costs time.
REFUSED_RATE = 2.0
REFUSED_BURST = 20.0


class RateLimit:
    """Token buckets by key (an address; ``*`` for all): ``take(key)`` is False when empty."""

    def __init__(
        self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _level(self, key: str, now: float) -> float:
        level, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, level + (now - at) * self.rate)

    def allows(self, key: str) -> bool:
        """Whether ``key``'s bucket has a token left (none taken)."""
        with self._lock:
            return self._level(key, self.clock()) >= 1.0

    def take(self, key: str) -> bool:
        with self._lock:
            now = self.clock()
            level = self._level(key, now)
            if len(self._buckets) > 10_000:  # bounded memory under a scan of addresses
                self._buckets = {k: v for k, v in self._buckets.items() if v[0] < self.burst}
            if level < 1.0:
                self._buckets[key] = (level, now)
                return False
            self._buckets[key] = (level - 1.0, now)
            return True


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "captcha-tasks-callbacks"
    timeout = 10

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        """Never: the request line holds the token, a query string the answer."""

    def _handle(self) -> None:
        address = self.client_address[0]
        srv = self.server
        if not srv.refused.allows(address) or not srv.limit.take("*"):
            srv.count("callbacks_rate_limited")
            self._reply(Outcome(429, "too many requests"))
            return
        url = urlsplit(self.path)
        try:
            fields, document = self._read(url.query)
        except ValueError:
            self.close_connection = True
            outcome = Outcome(400, "bad request body", refused=True)
        else:
            try:
                outcome = srv.receiver.handle(url.path, fields, document)
            except Exception as exc:  # Redis away, a bug: the poll fallback still holds
                log.warning("callbacks: a callback failed: %s", type(exc).__name__)
                outcome = Outcome(503, "try later")
        if outcome.refused:
            srv.refused.take(address)
        srv.count(f"callbacks_{outcome.status}")
        self._reply(outcome)

    def _read(self, query: str) -> tuple[dict[str, str], dict[str, Any] | None]:
        fields = dict(parse_qsl(query, keep_blank_values=True))
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY:
            raise ValueError("body too large")
        body = self.rfile.read(length) if length else b""
        if not body.strip():
            return fields, None
        if body.lstrip().startswith(b"{"):
            document = json.loads(body)
            if not isinstance(document, dict):
                raise ValueError("not a JSON object")
            return fields, document
        fields.update(parse_qsl(body.decode("utf-8"), keep_blank_values=True))
        return fields, None

    def _reply(self, outcome: Outcome) -> None:
        payload = outcome.reason.encode()
        self.send_response(outcome.status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver
    limit: RateLimit
    refused: RateLimit
    counts: dict[str, int]
    counts_lock: threading.Lock

    def server_bind(self) -> None:
        if hasattr(socket, "SO_REUSEPORT"):
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        super().server_bind()

    def count(self, name: str) -> None:
        with self.counts_lock:
            self.counts[name] = self.counts.get(name, 0) + 1


class CallbackServer:
    """Serves ``receiver`` on ``address``:``port`` (0: any free port) from a thread."""

    def __init__(self, receiver: Receiver, address: str, port: int) -> None:
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        server_class = type("_CallbackServer", (_Server,), {"address_family": family})
        self._server: _Server = server_class((address, port), _Handler)
        self._server.receiver = receiver
        self._server.limit = RateLimit(RATE, 2 * RATE)
        self._server.refused = RateLimit(REFUSED_RATE, REFUSED_BURST)
        self._server.counts = {}
        self._server.counts_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def counts(self) -> dict[str, int]:
        """Requests by outcome (``callbacks_200``, ``callbacks_404``, ..., rate limited)."""
        with self._server.counts_lock:
            return dict(self._server.counts)

    def start(self) -> CallbackServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="callbacks", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
