"""A minimal JSON task API provider over real HTTP (createTask / getTaskResult /
getBalance / reports), written apart from the package.

It imports nothing from ``captcha_tasks`` on purpose: the client is checked against
this independent reading of docs/PROVIDERS.md, not against its own assumptions.
Tests queue answers per path with :meth:`JsonDouble.script` (used in order, then the
default behaviour resumes) and read :attr:`JsonDouble.requests` to see exactly what
the client sent. By default every task is accepted with an integer id beyond 2^31 and
is ready at the first read.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from collections import defaultdict, deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.servers import BackgroundServer

__all__ = ["JsonDouble", "JsonReceived", "JsonReply"]


@dataclasses.dataclass(frozen=True)
class JsonReply:
    """An answer: ``body`` is sent as JSON unless it is ``str`` / ``bytes`` (sent raw)."""

    body: Any = None
    status: int = 200
    delay: float = 0.0  # seconds before the answer (the request is already read)
    drop: bool = False  # close the connection without answering
    content_type: str = "application/json"


@dataclasses.dataclass(frozen=True)
class JsonReceived:
    """One request as the double saw it."""

    method: str
    path: str
    content_type: str
    raw: bytes
    body: Any  # the parsed JSON, or None if it was not JSON

    @property
    def key(self) -> Any:
        return self.body.get("clientKey") if isinstance(self.body, dict) else None


class JsonDouble(BackgroundServer):
    thread_name = "json-provider-double"

    def __init__(self, *, balance: Any = 12.34) -> None:
        self.balance = balance
        self.requests: list[JsonReceived] = []
        self._scripts: defaultdict[str, deque[JsonReply]] = defaultdict(deque)
        self._ids = itertools.count(74372499131)  # 2Captcha's ids exceed 2^31
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        handler = type("Handler", (_Handler,), {"double": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = False
        self._server.block_on_close = True
        super().__init__()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def _shutdown(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()

    def script(self, path: str, *replies: JsonReply | dict[str, Any]) -> None:
        """Queue answers for ``path`` (``/createTask``, ...); a dict is a 200 JSON body."""
        with self._lock:
            for reply in replies:
                self._scripts[path].append(
                    reply if isinstance(reply, JsonReply) else JsonReply(reply)
                )

    def sent(self, path: str) -> list[Any]:
        """The JSON bodies received on ``path``, in order."""
        with self._lock:
            return [r.body for r in self.requests if r.path == path]

    def _answer(self, request: JsonReceived) -> JsonReply:
        with self._lock:
            queue = self._scripts.get(request.path)
            if queue:
                return queue.popleft()
        if request.path == "/createTask":
            return JsonReply({"errorId": 0, "taskId": next(self._ids)})
        if request.path == "/getTaskResult":
            solution = {"gRecaptchaResponse": f"token-{request.body.get('taskId')}"}
            return JsonReply({"errorId": 0, "status": "ready", "solution": solution})
        if request.path == "/getBalance":
            return JsonReply({"errorId": 0, "balance": self.balance})
        if request.path.startswith("/report") or request.path == "/feedbackTask":
            return JsonReply({"errorId": 0, "status": "success"})
        return JsonReply("not found", 404, content_type="text/plain")


class _Handler(BaseHTTPRequestHandler):
    double: JsonDouble
    protocol_version = "HTTP/1.0"
    timeout = 5

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        request = JsonReceived("POST", self.path, self.headers.get("Content-Type", ""), raw, body)
        with self.double._lock:
            self.double.requests.append(request)
        answer = self.double._answer(request)
        if answer.delay and self.double._stopping.wait(answer.delay):
            return
        if answer.drop:
            self.close_connection = True
            return
        data = answer.body
        if not isinstance(data, str | bytes):
            data = json.dumps(data)
        data = data.encode() if isinstance(data, str) else data
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, format: str, *args: object) -> None:
        pass
