"""A site's ALTCHA challenge endpoints on loopback, for the tests of ``solve_altcha``."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.servers import BackgroundServer

__all__ = ["AltchaSite", "Challenge"]

#: What a path serves: a challenge, or a function that makes a fresh one on each GET.
Challenge = dict[str, Any] | Callable[[], dict[str, Any]]


class AltchaSite(BackgroundServer):
    """``GET /altcha/<name>`` answers the challenge :meth:`serve` stored under that name
    (404 for any other path); every request is counted in :attr:`requests`."""

    thread_name = "altcha-site"

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0
        self._challenges: dict[str, Challenge] = {}
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server names the method
                with site._lock:
                    site.requests += 1
                    given = site._challenges.get(self.path.removeprefix("/altcha/"))
                if given is None:
                    self.send_error(404)
                    return
                body = json.dumps(given() if callable(given) else given).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port: int = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"

    def serve(self, name: str, challenge: Challenge) -> str:
        """Serve ``challenge`` at ``/altcha/<name>``; that path."""
        with self._lock:
            self._challenges[name] = challenge
        return f"/altcha/{name}"

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.1)

    def _shutdown(self) -> None:
        self._server.shutdown()

    def _cleanup(self) -> None:
        self._server.server_close()
