"""Requests to the sandbox: routes, wire formats (plain, ``json=1``, multipart).

Routes: ``/in.php`` and ``/res.php`` (the provider protocol), ``POST /siteverify``
(a site-verify API for the tokens handed out), ``GET /stats``, ``GET /healthz``,
``GET|POST /admin/config``, ``POST /admin/reset`` and ``GET /admin/captchas``
(per-captcha submit, ready and collection times, for benchmarks). Responses always carry a
Content-Length, so HTTP/1.1 keep-alive works.
"""

from __future__ import annotations

import email.parser
import email.policy
import email.utils
import json
import logging
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from captcha_tasks.errors import ConfigurationError

from .callbacks import CallbackSender
from .garbage import Garbage
from .json_api import JSON_METHODS, JsonApi, fault_path
from .protocol import (
    NOT_OFFERED_METHODS,
    WITHDRAWN_METHODS,
    ApiError,
    Reply,
    Upload,
    error_text,
    parse_submission,
)
from .state import SandboxState

__all__ = [
    "HANDSHAKE_TIMEOUT",
    "KEEPALIVE_TIMEOUT",
    "MAX_BODY_BYTES",
    "SandboxHandler",
    "StatefulHTTPServer",
]

logger = logging.getLogger("captcha_tasks_sandbox")

#: Largest request body read; bigger ones get 413 (images are refused far below this).
MAX_BODY_BYTES = 16 * 1024 * 1024
#: Idle seconds before a keep-alive connection is closed.
KEEPALIVE_TIMEOUT = 30.0
HANDSHAKE_TIMEOUT = 10.0

_BAD_GATEWAY = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n"
)
_INDEX = (
    b"captcha-tasks solver sandbox\n\n"
    b"/in.php /res.php   the in.php/res.php protocol (CaptchaAI, 2Captcha)\n"
    b"POST /siteverify   check a token once (response=...)\n"
    b"GET /stats         counters\nGET /healthz       liveness\n"
    b"POST /admin/config change settings (JSON)\nPOST /admin/reset  zero the counters\n"
    b"GET /admin/captchas per-captcha submit/ready/answered times (epoch seconds)\n"
)
_JSON_INDEX = _INDEX.replace(
    b"(CaptchaAI, 2Captcha)\n",
    b"(CaptchaAI, 2Captcha)\n"
    b"POST /createTask /getTaskResult /getBalance /report...  the JSON task API\n",
)
_SECRETS_RE = re.compile(r"((?:key|proxy|secret|response|body)=)[^&\s\"]*", re.IGNORECASE)
_JSON = "application/json"
_TEXT = "text/plain; charset=utf-8"
_HTML = "text/html; charset=utf-8"


class StatefulHTTPServer(ThreadingHTTPServer):
    """What the handler needs of its server: the sandbox state and a stop signal."""

    state: SandboxState
    stopping: threading.Event
    json_api: JsonApi
    callbacks: CallbackSender


class _BodyError(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


class SandboxHandler(BaseHTTPRequestHandler):
    """One connection's requests; ``server`` must offer ``state`` and ``stopping``."""

    protocol_version = "HTTP/1.1"
    server_version = "captcha-tasks-sandbox"
    timeout = KEEPALIVE_TIMEOUT
    disable_nagle_algorithm = True
    server: StatefulHTTPServer

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(HANDSHAKE_TIMEOUT)
            self.request.do_handshake()
        super().setup()

    def version_string(self) -> str:
        return self.server_version

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        if self.server.state.config.verbose:
            logger.info("%s %s", self.address_string(), _SECRETS_RE.sub(r"\1***", format % args))

    # -- dispatch -------------------------------------------------------------------

    def _handle(self) -> None:
        url = urlsplit(self.path)
        try:
            body = self._read_body()
        except _BodyError as exc:
            self.close_connection = True
            self._send_json(exc.status, {"error": "bad request body"})
            return
        try:
            self._route(url.path, url.query, body)
        except Exception:
            logger.exception("sandbox: %s %s failed", self.command, url.path)
            self._send(500, b"ERROR_INTERNAL_SERVER_ERROR", _TEXT)

    def _route(self, path: str, query: str, body: bytes) -> None:
        state = self.server.state
        post = self.command == "POST"
        protocol = state.config.protocol
        if path in ("/in.php", "/res.php") and protocol != "json":
            self._api(path, query, body)
        elif path[1:] in JSON_METHODS and post and protocol != "classic":
            self._json(path[1:], body)
        elif path == "/siteverify":
            try:
                params, _ = _form(query, self.headers.get("Content-Type", ""), body)
            except ValueError:
                params = {}
            verdict = state.verify(params.get("response", ""), params.get("sitekey", ""))
            self._send_json(200, verdict)
        elif path == "/stats":
            self._send_json(200, {**state.stats(), **self.server.callbacks.stats()})
        elif path == "/healthz":
            self._send_json(200, {"ok": True})
        elif path == "/admin/config" and post:
            self._admin_config(body)
        elif path == "/admin/config":
            self._send_json(200, {"config": state.config.describe()})
        elif path == "/admin/reset" and post:
            state.reset()
            self.server.callbacks.reset()
            self._send_json(200, {"ok": True})
        elif path == "/admin/reset":
            self._send_json(405, {"error": "use POST"})
        elif path == "/admin/captchas":
            self._send_json(200, {"captchas": self._captchas()})
        elif path == "/":
            self._send(200, _INDEX if protocol == "classic" else _JSON_INDEX, _TEXT)
        else:
            self._send_json(404, {"error": "not found"})

    def _api(self, path: str, query: str, body: bytes) -> None:
        state = self.server.state
        fault = state.begin_request(path.lstrip("/"))
        if fault == "fail":
            self._send(502, _BAD_GATEWAY, _HTML)
            return
        try:
            params, files = _form(query, self.headers.get("Content-Type", ""), body)
        except ValueError:
            params, files = dict(parse_qsl(query, keep_blank_values=True)), {}
            reply = Reply.error("ERROR_UPLOAD")
        else:
            reply = self._api_reply(path, params, files)
        if params.get("json", "").strip() == "1":
            document: dict[str, object] = {"status": reply.status, "request": reply.request}
            document.update(reply.extra)
            if reply.status == 0 and reply.plain.startswith("ERROR"):
                document["error_text"] = error_text(reply.plain)
            payload, content_type = _dumps(document), _JSON
        else:
            payload, content_type = reply.plain.encode(), _TEXT
        headers = {"Access-Control-Allow-Origin": "*"} if params.get("header_acao") == "1" else {}
        if isinstance(fault, Garbage):  # the request took effect; its answer is lost
            payload, content_type = fault.garble(payload, content_type, "classic")
        if fault == "slow":
            # The request took effect; only its answer is late (as when a client times out).
            self.server.stopping.wait(state.config.slow_seconds)
        self._send(200, payload, content_type, headers)

    def _json(self, method: str, body: bytes) -> None:
        """One JSON API call, with the same faults as in.php (createTask) and res.php
        (garbage after the call took effect, as there)."""
        state = self.server.state
        fault = state.begin_request(fault_path(method))
        if fault == "fail":
            self._send(502, _BAD_GATEWAY, _HTML)
            return
        status, document = self.server.json_api.handle(method, body)
        payload, content_type = _dumps(document), _JSON
        if isinstance(fault, Garbage):
            payload, content_type = fault.garble(payload, content_type, "json")
        if fault == "slow":
            self.server.stopping.wait(state.config.slow_seconds)
        self._send(status, payload, content_type)

    def _api_reply(self, path: str, params: dict[str, str], files: dict[str, Upload]) -> Reply:
        state = self.server.state
        try:
            state.check_key(params.get("key", "").strip())
            if path == "/in.php":
                config = state.config
                method = params.get("method", "").strip().lower()
                if method in WITHDRAWN_METHODS.get(config.classic_dialect, ()):
                    state.count("param_errors")
                    raise ApiError("ERROR_METHOD_CALL")
                if method in NOT_OFFERED_METHODS.get(config.classic_dialect, ()):
                    state.count("param_errors")
                    raise ApiError("ERROR_BAD_PARAMETERS")
                try:
                    submission = parse_submission(
                        params, files, config.min_image_bytes, config.max_image_bytes
                    )
                except ApiError:
                    state.count("param_errors")
                    raise
                new_id = state.submit(submission)
                if params.get("pingback", "").strip():
                    self.server.callbacks.pingback(new_id, params["pingback"].strip())
                return Reply.ok(new_id)
            action = params.get("action", "").strip().lower()
            captcha_id = params.get("id", "")
            if not action:
                raise ApiError("ERROR_EMPTY_ACTION")
            if action == "get" and not captcha_id.strip() and params.get("ids", "").strip():
                return state.get_many(params["ids"])
            if action == "get":
                return state.get(captcha_id)
            if action == "getbalance":
                return state.get_balance()
            if action in ("reportbad", "reportgood"):
                return state.report(captcha_id, good=action == "reportgood")
            raise ApiError("ERROR_BAD_PARAMETERS")
        except ApiError as exc:
            return Reply.error(exc.code)

    def _captchas(self) -> list[dict[str, object]]:
        """The state's captchas; those created through the JSON API under another id
        (CapSolver's UUIDs) carry it as ``task_id``: what clients report as the captcha's
        id, how the benchmark finds a result's captcha."""
        wire = self.server.json_api.wire_ids()
        captchas = self.server.state.captchas()
        for captcha in captchas:
            task_id = wire.get(int(str(captcha["id"])))
            if task_id is not None:
                captcha["task_id"] = task_id
        return captchas

    def _admin_config(self, body: bytes) -> None:
        try:
            changes = json.loads(body or b"{}")
            if not isinstance(changes, dict):
                raise ConfigurationError("the body must be a JSON object")
            config = self.server.state.configure(changes)
        except (ValueError, ConfigurationError) as exc:
            self._send_json(400, {"ok": False, "error": str(exc)})
            return
        logger.info("sandbox: config changed: %s", ", ".join(sorted(changes)))
        self._send_json(200, {"ok": True, "config": config.describe()})

    # -- wire -----------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        raw = self.headers.get("Content-Length")
        if raw is None:
            return b""
        try:
            length = int(raw)
        except ValueError:
            raise _BodyError(400) from None
        if length < 0:
            raise _BodyError(400)
        if length > MAX_BODY_BYTES:
            raise _BodyError(413)
        data = self.rfile.read(length)
        if len(data) < length:
            raise _BodyError(400)
        return data

    def _read_chunked(self) -> bytes:
        chunks: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(1024)
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise _BodyError(400) from None
            if size == 0:
                while self.rfile.readline(1024).strip():  # trailers
                    pass
                return b"".join(chunks)
            total += size
            if size < 0 or total > MAX_BODY_BYTES:
                raise _BodyError(413)
            chunk = self.rfile.read(size)
            if len(chunk) < size:
                raise _BodyError(400)
            chunks.append(chunk)
            self.rfile.readline(16)

    def _send_json(self, status: int, document: object) -> None:
        self._send(status, _dumps(document), _JSON)

    def _send(
        self,
        status: int,
        payload: bytes,
        content_type: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            if self.close_connection:
                self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client went away (timed out, reset)
            self.close_connection = True


def _form(query: str, content_type: str, body: bytes) -> tuple[dict[str, str], dict[str, Upload]]:
    """Query string and body merged (the body wins); file parts apart. ValueError if malformed."""
    params = dict(parse_qsl(query, keep_blank_values=True))
    files: dict[str, Upload] = {}
    media_type = content_type.partition(";")[0].strip().lower()
    if media_type == "multipart/form-data":
        _multipart(content_type, body, params, files)
    elif media_type == "application/json" and body:
        document = json.loads(body)
        if not isinstance(document, dict):
            raise ValueError("a JSON body must be an object")
        params.update({str(k): str(v) for k, v in document.items()})
    elif body and media_type in ("application/x-www-form-urlencoded", ""):
        params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return params, files


def _multipart(
    content_type: str, body: bytes, params: dict[str, str], files: dict[str, Upload]
) -> None:
    head = b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n"
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    if not message.is_multipart():
        raise ValueError("malformed multipart body")
    for part in message.iter_parts():
        raw_name = part.get_param("name", header="content-disposition")
        if raw_name is None:
            continue
        name = email.utils.collapse_rfc2231_value(raw_name)
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        filename = part.get_filename()
        if filename is not None or name == "file":
            files[name] = Upload(filename or "", payload)
        else:
            params[name] = _decode(payload, part.get_content_charset())


def _decode(payload: bytes, charset: str | None) -> str:
    try:
        return payload.decode(charset or "utf-8", "replace")
    except LookupError:  # an unknown charset name
        return payload.decode("utf-8", "replace")


def _dumps(document: object) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()
