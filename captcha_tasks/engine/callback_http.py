"""The callback receiver's HTTP side: a small threaded server in front of
:class:`~.callbacks.Receiver`, rate-limited, that logs no path (a job's mac is in it)
and no body (the answer is in it).

Requests are limited by what their path proves, never by the address they come from
(behind a reverse proxy every caller has the proxy's). A path whose mac is its job's
(a proven :class:`~.callbacks.Claim`) is read and handled within the overall
:data:`RATE`, whatever else arrives. Any other path is refused with ``404`` unread,
no Redis touched, within buckets of its own: :data:`REFUSED_RATE` per job it names and
:data:`REFUSED_TOTAL_RATE` for all such requests together, ``429`` past either. Guessing
a mac costs time; no number of wrong requests delays a right one.

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

from .callbacks import Claim, Outcome, Receiver

__all__ = [
    "BUCKET_KEY_LENGTH",
    "MAX_BUCKETS",
    "RATE",
    "REFUSED_BURST",
    "REFUSED_RATE",
    "REFUSED_TOTAL_RATE",
    "CallbackServer",
    "RateLimit",
]

log = logging.getLogger(__name__)

#: Largest callback body read (a getTaskResult answer is a few kB).
MAX_BODY = 64 * 1024
#: Proven callbacks per second one receiver takes (burst: twice that): far above any
#: plan's solves per second, low enough that a flood cannot starve the engine.
RATE = 1000.0
#: Unproven requests (no mac, or not the job's) per second that name one job (burst 20)
#: before those get only 429s: guessing one job's mac costs time.
REFUSED_RATE = 2.0
REFUSED_BURST = 20.0
#: Unproven requests per second, whatever job they name (burst: twice that). It bounds
#: the buckets kept per job too: one is made at most this often and is full again, and
#: dropped, ``REFUSED_BURST / REFUSED_RATE`` seconds later.
REFUSED_TOTAL_RATE = 50.0
#: Characters of a claimed task id that name its refusals' bucket.
BUCKET_KEY_LENGTH = 64
#: Buckets a :class:`RateLimit` keeps before it drops the full ones.
MAX_BUCKETS = 10_000


class RateLimit:
    """Token buckets by key (a claimed job; ``*`` for all): ``take(key)`` is False when
    empty. A bucket refilled to ``burst`` is dropped once :data:`MAX_BUCKETS` are kept."""

    def __init__(
        self, rate: float, burst: float, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self._buckets: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def _level(self, key: str, now: float) -> float:
        level, at = self._buckets.get(key, (self.burst, now))
        return min(self.burst, level + (now - at) * self.rate)

    def __len__(self) -> int:
        """Buckets kept."""
        with self._lock:
            return len(self._buckets)

    def take(self, key: str) -> bool:
        with self._lock:
            now = self.clock()
            level = self._level(key, now)
            if len(self._buckets) > MAX_BUCKETS:  # bounded memory under a scan of keys
                self._buckets = {
                    k: v for k, v in self._buckets.items() if self._level(k, now) < self.burst
                }
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
        """Never: the request line holds a job's mac, a query string the answer."""

    def _handle(self) -> None:
        srv = self.server
        url = urlsplit(self.path)
        claim = srv.receiver.claim(url.path)
        if claim is None or not claim.proven:
            self._refuse(claim)
            return
        if not srv.limit.take("*"):
            srv.count("callbacks_rate_limited")
            self._reply(Outcome(429, "too many requests"), close=True)
            return
        try:
            fields, document = self._read(url.query)
        except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
            srv.count("callbacks_400")
            self._reply(Outcome(400, "bad request body"), close=True)
            return
        try:
            outcome = srv.receiver.handle(url.path, fields, document)
        except Exception as exc:  # Redis away, a bug: the poll fallback still holds
            log.warning("callbacks: a callback failed: %s", type(exc).__name__)
            outcome = Outcome(503, "try later")
        srv.count(f"callbacks_{outcome.status}")
        self._reply(outcome)

    def _refuse(self, claim: Claim | None) -> None:
        """An unproven path: ``404``, or ``429`` once its buckets are empty (the total's
        first, so that buckets per job are made at its rate only). Its body is not read:
        the connection closes after the answer."""
        srv = self.server
        job = claim.task_id[:BUCKET_KEY_LENGTH] if claim is not None else ""
        if srv.refused_total.take("*") and srv.refused.take(job):
            srv.count("callbacks_404")
            self._reply(Outcome(404, "not found"), close=True)
        else:
            srv.count("callbacks_rate_limited")
            self._reply(Outcome(429, "too many requests"), close=True)

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

    def _reply(self, outcome: Outcome, *, close: bool = False) -> None:
        """Send ``outcome``; ``close``: and close the connection (a body left unread)."""
        payload = outcome.reason.encode()
        self.send_response(outcome.status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        if close:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    receiver: Receiver
    limit: RateLimit
    refused: RateLimit
    refused_total: RateLimit
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
        self._server.refused_total = RateLimit(REFUSED_TOTAL_RATE, 2 * REFUSED_TOTAL_RATE)
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
