"""A minimal in.php/res.php provider over real HTTP, written apart from the package.

It imports nothing from ``captcha_tasks`` on purpose: the client is checked against
this independent reading of the protocol, not against its own assumptions.

By default it behaves like a tiny provider (ids are JSON integers, as live CaptchaAI
sends them; every captcha is solved at once). Tests queue raw answers with
:meth:`ProviderDouble.script` to reproduce live quirks, and read
:attr:`ProviderDouble.requests` to see exactly what the client sent.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import threading
from collections import deque
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from tests.support.servers import BackgroundServer

__all__ = ["ProviderDouble", "Received", "Scripted", "Upload"]

DEFAULT_KEY = "0123456789abcdef0123456789abcdef"


@dataclasses.dataclass(frozen=True)
class Upload:
    filename: str | None
    content_type: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class Received:
    """One request as the double saw it."""

    method: str
    path: str  # the raw request target, query string included
    endpoint: str  # "/in.php" or "/res.php"
    query: dict[str, str]
    body_params: dict[str, str]
    params: dict[str, str]  # query and body merged (the body wins), like the providers do
    files: dict[str, Upload]
    content_type: str
    headers: dict[str, str]


@dataclasses.dataclass(frozen=True)
class Scripted:
    """A raw answer: sent as is, after ``delay`` seconds, or byte by byte every ``drip``."""

    status: int = 200
    content_type: str = "text/plain"
    body: bytes | str = b""
    delay: float = 0.0
    drip: float = 0.0
    drop: bool = False  # close the connection without answering
    headers: tuple[tuple[str, str], ...] = ()


class ProviderDouble(BackgroundServer):
    thread_name = "provider-double"

    def __init__(self, *, api_key: str = DEFAULT_KEY, balance: str = "12.3400") -> None:
        self.api_key = api_key
        self.balance = balance
        self.requests: list[Received] = []
        self._script: deque[Scripted] = deque()
        self._ids = itertools.count(3397637370)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        handler = type("Handler", (_Handler,), {"double": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = False
        self._server.block_on_close = True  # close() joins every handler thread
        super().__init__()

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)

    def _shutdown(self) -> None:
        self._stopping.set()  # wakes handlers sleeping in a scripted delay
        self._server.shutdown()
        self._server.server_close()

    def script(self, *answers: Scripted) -> None:
        """Queue raw answers, used in order before the default behaviour resumes."""
        with self._lock:
            self._script.extend(answers)

    # -- the default, minimal provider ------------------------------------------------

    def _answer(self, request: Received) -> Scripted:
        with self._lock:
            if self._script:
                return self._script.popleft()
        params = request.params
        json_mode = params.get("json") == "1"

        def reply(status: int, value: object) -> Scripted:
            if json_mode:
                return Scripted(
                    200, "application/json", json.dumps({"status": status, "request": value})
                )
            single = request.endpoint == "/in.php" or (
                params.get("action") == "get" and "ids" not in params
            )
            plain = f"OK|{value}" if status == 1 and single else str(value)
            return Scripted(200, "text/html", plain)  # PHP's default type

        if params.get("key") != self.api_key:
            return reply(0, "ERROR_KEY_DOES_NOT_EXIST")
        if request.endpoint == "/in.php":
            if params.get("method") not in {
                "userrecaptcha",
                "turnstile",
                "base64",
                "post",
                "geetest",
                "hcaptcha",
            }:
                return reply(0, "ERROR_BAD_PARAMETERS")
            return reply(1, next(self._ids))  # an int: JSON mode sends it as a JSON integer
        action = params.get("action")
        if action == "getbalance":
            return (
                Scripted(200, "text/html", self.balance)
                if not json_mode
                else reply(1, self.balance)
            )
        if action in ("reportgood", "reportbad"):
            return reply(1, "OK_REPORT_RECORDED")
        if action == "get" and "ids" in params:
            return reply(1, "|".join(f"token-{i}" for i in params["ids"].split(",")))
        if action == "get" and params.get("id", "").isdigit():
            return reply(1, f"token-{params['id']}")
        return reply(0, "ERROR_WRONG_CAPTCHA_ID")


class _Handler(BaseHTTPRequestHandler):
    double: ProviderDouble
    protocol_version = "HTTP/1.0"  # one request per connection: nothing lingers at close
    timeout = 5  # a stuck client cannot hold a handler thread

    def do_GET(self) -> None:
        self._handle(b"")

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        self._handle(self.rfile.read(length))

    def _handle(self, body: bytes) -> None:
        request = self._record(body)
        answer = self.double._answer(request)
        stopping = self.double._stopping
        if answer.delay and stopping.wait(answer.delay):
            return
        if answer.drop:
            self.close_connection = True
            return
        data = answer.body.encode() if isinstance(answer.body, str) else answer.body
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            if not answer.drip:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if stopping.wait(answer.drip):
                    return
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up first: that is what some tests check

    def _record(self, body: bytes) -> Received:
        target = urlsplit(self.path)
        query = dict(parse_qsl(target.query, keep_blank_values=True))
        content_type = self.headers.get("Content-Type", "")
        body_params: dict[str, str] = {}
        files: dict[str, Upload] = {}
        if content_type.startswith("multipart/form-data"):
            head = f"Content-Type: {content_type}\r\n\r\n".encode()
            message = BytesParser(policy=policy.HTTP).parsebytes(head + body)
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                payload = part.get_payload(decode=True) or b""
                if part.get_filename() is not None:
                    files[str(name)] = Upload(part.get_filename(), part.get_content_type(), payload)
                else:
                    body_params[str(name)] = payload.decode()
        elif body:
            body_params = dict(parse_qsl(body.decode(), keep_blank_values=True))
        received = Received(
            method=self.command,
            path=self.path,
            endpoint=target.path,
            query=query,
            body_params=body_params,
            params={**query, **body_params},
            files=files,
            content_type=content_type,
            headers=dict(self.headers.items()),
        )
        with self.double._lock:
            self.double.requests.append(received)
        return received

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep test output clean
