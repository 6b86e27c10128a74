"""The sandbox delivers callbacks (pingback, callbackUrl) with configurable faults."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import pytest
import requests

from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import DEV_API_KEY, SandboxServer

GOOGLEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
SCALE = 0.01  # reCAPTCHA v2: 0.15 s


class Received:
    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, str], Any, float]] = []
        self.lock = threading.Lock()

    def __len__(self) -> int:
        with self.lock:
            return len(self.calls)


@pytest.fixture
def receiver() -> Iterator[tuple[str, Received]]:
    got = Received()

    class Handler(BaseHTTPRequestHandler):
        def _any(self) -> None:
            url = urlsplit(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            kind = self.headers.get("Content-Type", "")
            document = json.loads(body) if "json" in kind else None
            fields = dict(parse_qsl(url.query or body.decode()))
            with got.lock:
                got.calls.append((self.command, url.path, fields, document, time.monotonic()))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST = _any

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/cb/tok/task/1", got
    server.shutdown()
    server.server_close()


def _submit(sandbox: SandboxServer, pingback: str) -> str:
    params = {
        "key": DEV_API_KEY,
        "method": "userrecaptcha",
        "googlekey": GOOGLEKEY,
        "pageurl": "https://example.com/",
        "pingback": pingback,
        "json": "1",
    }
    return str(requests.post(f"{sandbox.url}/in.php", data=params, timeout=5).json()["request"])


@pytest.mark.parametrize(("dialect", "method"), [("2captcha", "POST"), ("captchaai", "GET")])
def test_a_pingback_carries_id_and_code_at_the_ready_time(
    sandbox_factory: Callable[..., SandboxServer],
    receiver: tuple[str, Received],
    dialect: str,
    method: str,
) -> None:
    url, got = receiver
    sandbox = sandbox_factory(time_scale=SCALE, dialect=dialect, jitter=0.0)
    captcha_id = _submit(sandbox, url)
    wait_until(lambda: len(got) == 1, timeout=5, what="the pingback")
    verb, path, fields, _, _ = got.calls[0]
    assert (verb, path, fields["id"]) == (method, "/cb/tok/task/1", captcha_id)
    answer = requests.get(
        f"{sandbox.url}/res.php",
        params={"key": DEV_API_KEY, "action": "get", "id": captcha_id},
        timeout=5,
    ).text
    assert answer == f"OK|{fields['code']}"
    stats = requests.get(f"{sandbox.url}/stats", timeout=5).json()
    assert (stats["callbacks_delivered"], stats["polls"]) == (1, 1)


def test_a_callback_url_gets_the_get_task_result_body(
    sandbox_factory: Callable[..., SandboxServer], receiver: tuple[str, Received]
) -> None:
    url, got = receiver
    sandbox = sandbox_factory(time_scale=SCALE, protocol="json", dialect="capmonster")
    task = {
        "type": "RecaptchaV2TaskProxyless",
        "websiteURL": "https://example.com/",
        "websiteKey": GOOGLEKEY,
    }
    body = {"clientKey": DEV_API_KEY, "task": task, "callbackUrl": url}
    assert requests.post(f"{sandbox.url}/createTask", json=body, timeout=5).json()["errorId"] == 0
    wait_until(lambda: len(got) == 1, timeout=5, what="the callback")
    _, _, _, document, _ = got.calls[0]
    assert document["status"] == "ready" and document["solution"]["gRecaptchaResponse"]


def test_faults_drop_duplicate_and_delay_and_are_counted(
    sandbox_factory: Callable[..., SandboxServer], receiver: tuple[str, Received]
) -> None:
    url, got = receiver
    sandbox = sandbox_factory(time_scale=SCALE, dialect="2captcha", threads=50)
    change = {"callback_drop_rate": 1.0}
    assert requests.post(f"{sandbox.url}/admin/config", json=change, timeout=5).ok
    for _ in range(5):
        _submit(sandbox, url)
    time.sleep(0.6)
    assert len(got) == 0
    change = {"callback_drop_rate": 0.0, "callback_duplicate_rate": 1.0}
    assert requests.post(f"{sandbox.url}/admin/config", json=change, timeout=5).ok
    _submit(sandbox, url)
    wait_until(lambda: len(got) == 2, timeout=5, what="a callback and its duplicate")
    change = {
        "callback_duplicate_rate": 0.0,
        "callback_late_rate": 1.0,
        "callback_late_seconds": 0.5,
    }
    assert requests.post(f"{sandbox.url}/admin/config", json=change, timeout=5).ok
    start = time.monotonic()
    _submit(sandbox, url)
    wait_until(lambda: len(got) == 3, timeout=5, what="the late callback")
    assert got.calls[2][4] - start >= 0.5
    stats = requests.get(f"{sandbox.url}/stats", timeout=5).json()
    names = ("scheduled", "dropped", "duplicated", "late", "delivered")
    counted = {name: stats[f"callbacks_{name}"] for name in names}
    assert counted == {"scheduled": 7, "dropped": 5, "duplicated": 1, "late": 1, "delivered": 3}
