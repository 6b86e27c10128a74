"""A site on loopback whose pages are huge, compressed huge, or slow: what a page task
must refuse within ``CAPTCHA_TASKS_MAX_PAGE_BYTES`` and ``CAPTCHA_TASKS_PAGE_DEADLINE``.

- ``/huge/<MB>``: that many megabytes of HTML, its ``Content-Length`` announced.
- ``/chunked/<MB>``: the same, chunked (no length said up front).
- ``/bomb/<MB>``: gzip-encoded, a few hundred kB on the wire that decode to that many
  megabytes.
- ``/drip``: the head at once, then one byte every :attr:`HeavySite.drip_every` seconds
  for as long as the reader reads (at most :attr:`HeavySite.drip_for` seconds; from
  :attr:`HeavySite.fade_after` seconds on, nothing more, the connection kept open).
- ``/silent``: the head, then nothing for :attr:`HeavySite.drip_for` seconds.
- ``/small``: a short page.

A POST (a provider's call) is answered as a GET of its path.

:attr:`HeavySite.sent` counts the body bytes each path put on the wire (what a reader
that stops early never asked for is not sent).
"""

from __future__ import annotations

import contextlib
import gzip
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.servers import BackgroundServer

__all__ = ["MB", "HeavySite"]

MB = 1024 * 1024
#: One megabyte of page: a paragraph repeated.
_BLOCK = (b"<p>" + b"x" * 1016 + b"</p>\n") * 1024


class HeavySite(BackgroundServer):
    thread_name = "heavy-site"

    def __init__(
        self, *, drip_every: float = 0.2, drip_for: float = 60.0, fade_after: float = float("inf")
    ) -> None:
        super().__init__()
        self.drip_every = drip_every
        self.drip_for = drip_for
        self.fade_after = fade_after
        self.sent: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # http.server names the method
                self.close_connection = True  # one request a connection: none read after
                kind, _, size = self.path.strip("/").partition("/")
                # A reader that gave up: what it refused is not sent.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    site._answer(self, kind, int(size or 0))

            def do_POST(self) -> None:  # a provider's call: its form read, then as GET
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                self.do_GET()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.host = f"127.0.0.1:{self.port}"

    def _count(self, kind: str, n: int) -> None:
        with self._lock:
            self.sent[kind] += n

    def _answer(self, handler: BaseHTTPRequestHandler, kind: str, megabytes: int) -> None:
        known = ("huge", "chunked", "bomb", "drip", "silent", "small")
        handler.send_response(200 if kind in known else 404)
        handler.send_header("Content-Type", "text/html; charset=utf-8")
        if kind == "small":
            body = b"<html><body><p>a small page</p></body></html>"
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            self._count(kind, len(body))
        elif kind == "huge":
            handler.send_header("Content-Length", str(megabytes * MB))
            handler.end_headers()
            for _ in range(megabytes):
                handler.wfile.write(_BLOCK)
                self._count(kind, MB)
        elif kind == "chunked":
            handler.send_header("Transfer-Encoding", "chunked")
            handler.end_headers()
            for _ in range(megabytes):
                handler.wfile.write(b"%x\r\n%s\r\n" % (MB, _BLOCK))
                self._count(kind, MB)
            handler.wfile.write(b"0\r\n\r\n")
        elif kind == "bomb":
            body = gzip.compress(b"\0" * (megabytes * MB), compresslevel=9)
            handler.send_header("Content-Encoding", "gzip")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
            self._count(kind, len(body))
        elif kind in ("drip", "silent"):
            handler.send_header("Content-Length", str(1_000_000))
            handler.end_headers()
            handler.wfile.flush()
            start = time.monotonic()
            until, fade = start + self.drip_for, start + self.fade_after
            while time.monotonic() < until and not self._stopping.is_set():
                if kind == "drip" and time.monotonic() < fade:
                    handler.wfile.write(b"x")
                    handler.wfile.flush()
                    self._count(kind, 1)
                self._stopping.wait(self.drip_every)
        else:
            handler.send_header("Content-Length", "0")
            handler.end_headers()

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.1)

    def _shutdown(self) -> None:
        self._stopping.set()
        self._server.shutdown()

    def _cleanup(self) -> None:
        self._server.server_close()
