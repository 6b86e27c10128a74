"""The sandbox answering garbage (``garbage_rate``, ``garbage_kinds``) over real HTTP, on
both protocols: each kind's shape, the request taking effect before its answer is
replaced, the counters, the configuration and the command line."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
import requests
from click.testing import CliRunner

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.provider.transport import MAX_RESPONSE_BYTES
from captcha_tasks_sandbox import (
    DEV_API_KEY,
    DEV_CAPSOLVER_KEY,
    SandboxConfig,
    SandboxServer,
    sandbox_command,
)
from captcha_tasks_sandbox import cli as sandbox_cli
from captcha_tasks_sandbox.garbage import GARBAGE_KINDS, HUGE_BYTES

SITEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
CLASSIC_SUBMIT = {
    "key": DEV_API_KEY,
    "method": "userrecaptcha",
    "googlekey": SITEKEY,
    "pageurl": "https://a.example.com/login",
    "json": "1",
}
JSON_TASK = {
    "type": "ReCaptchaV2TaskProxyLess",
    "websiteURL": "https://a.example.com/login",
    "websiteKey": SITEKEY,
}
WRONG_TYPES = ("application/octet-stream", "image/png")

Make = Callable[..., SandboxServer]


def _classic_submit(url: str) -> requests.Response:
    return requests.post(f"{url}/in.php", data=CLASSIC_SUBMIT, timeout=10)


def _json_create(url: str) -> requests.Response:
    body = {"clientKey": DEV_CAPSOLVER_KEY, "task": JSON_TASK}
    return requests.post(f"{url}/createTask", json=body, timeout=10)


def _configure(url: str, **changes: Any) -> dict[str, Any]:
    reply = requests.post(f"{url}/admin/config", json=changes, timeout=5)
    assert reply.status_code == 200, reply.text
    config: dict[str, Any] = reply.json()["config"]
    return config


def _check_shape(kind: str, reply: requests.Response, real: dict[str, Any]) -> None:
    """``reply`` is garbage of ``kind`` standing for the answer ``real``."""
    body, content_type = reply.content, reply.headers["Content-Type"]
    assert reply.status_code == 200
    assert reply.headers["Content-Length"] == str(len(body))  # the framing is sound
    if kind == "truncated":
        assert body and body != json.dumps(real).encode()
        with pytest.raises(ValueError):
            json.loads(body)
        assert content_type == "application/json"
    elif kind == "huge":
        assert len(body) == HUGE_BYTES > MAX_RESPONSE_BYTES
        assert json.loads(body).keys() == real.keys()  # the answer, padded past the cap
    elif kind == "content_type":
        assert content_type in WRONG_TYPES
        assert json.loads(body).keys() == real.keys()
    elif kind == "html":
        assert content_type.startswith("text/html") and body.startswith(b"<!DOCTYPE html")
    elif kind == "empty":
        assert body == b""
    elif kind == "noise":
        assert body[0] >= 0x80 and 16 <= len(body) <= 2048
        with pytest.raises(UnicodeDecodeError):
            body.decode("utf-8")
    else:
        shape = json.loads(body)
        assert content_type == "application/json"
        assert shape != real and (
            isinstance(shape, list) or None in _leaves(shape) or shape == {"status": "banana"}
        )


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    return [value]


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
def test_each_kind_replaces_a_classic_answer_after_the_submit_took_effect(
    sandbox_factory: Make, kind: str
) -> None:
    server = sandbox_factory(time_scale=0.01, garbage_rate=1.0, garbage_kinds=(kind,), seed=3)
    reply = _classic_submit(server.url)
    _check_shape(kind, reply, {"status": 1, "request": 1})
    stats = server.stats()
    # Accepted and billed before the answer was lost: the sandbox holds the captcha.
    assert (stats["submitted"], stats["garbage_injected"], stats[f"garbage_{kind}"]) == (1, 1, 1)
    assert len(requests.get(f"{server.url}/admin/captchas", timeout=5).json()["captchas"]) == 1


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
def test_each_kind_replaces_a_json_answer_and_a_clean_read_finds_the_task(
    sandbox_factory: Make, kind: str
) -> None:
    server = sandbox_factory(
        time_scale=0.01,
        protocol="json",
        dialect="capsolver",
        seed=5,
        garbage_rate=1.0,
        garbage_kinds=(kind,),
    )
    _check_shape(kind, _json_create(server.url), {"errorId": 0, "taskId": 1, "status": 1})
    assert server.stats()["submitted"] == 1
    # Polls only: a create goes through, its first read is garbage, the next is not.
    _configure(server.url, fault_paths=["res.php"], garbage_rate=0.0)
    task_id = _json_create(server.url).json()["taskId"]
    time.sleep(0.3)  # recaptcha_v2: 0.15 s at this scale
    _configure(server.url, garbage_rate=1.0)
    read = {"clientKey": DEV_CAPSOLVER_KEY, "taskId": task_id}
    first = requests.post(f"{server.url}/getTaskResult", json=read, timeout=10)
    _check_shape(kind, first, {"errorId": 0, "taskId": 1, "status": 1, "solution": {}})
    _configure(server.url, garbage_rate=0.0)
    again = requests.post(f"{server.url}/getTaskResult", json=read, timeout=10).json()
    assert again["status"] == "ready" and again["solution"]["gRecaptchaResponse"]
    stats = server.stats()
    assert (stats["submitted"], stats["garbage_injected"], stats["polls"]) == (2, 2, 2)


def test_a_garbled_classic_read_counts_and_the_answer_stays(sandbox_factory: Make) -> None:
    server = sandbox_factory(time_scale=0.01, fault_paths=("res.php",), garbage_rate=1.0)
    captcha_id = _classic_submit(server.url).json()["request"]
    time.sleep(0.3)
    params = {"key": DEV_API_KEY, "action": "get", "id": captcha_id, "json": "1"}
    garbled = requests.get(f"{server.url}/res.php", params=params, timeout=10)
    assert garbled.status_code == 200
    _configure(server.url, garbage_rate=0.0)
    answer = requests.get(f"{server.url}/res.php", params=params, timeout=10).json()
    assert answer["status"] == 1 and answer["request"]
    (captcha,) = requests.get(f"{server.url}/admin/captchas", timeout=5).json()["captchas"]
    assert captcha["polls"] == 2 and captcha["answered_at"] is not None


def test_kinds_are_mixed_counted_reset_and_reproducible(sandbox_factory: Make) -> None:
    def run() -> tuple[list[bytes], dict[str, Any]]:
        kinds = ("html", "noise", "wrong_shape", "empty")
        server = sandbox_factory(time_scale=0.01, garbage_rate=0.5, seed=11, garbage_kinds=kinds)
        params = {"key": DEV_API_KEY, "action": "getbalance", "json": "1"}
        bodies = [
            requests.get(f"{server.url}/res.php", params=params, timeout=5).content
            for _ in range(60)
        ]
        counted = server.stats().items()
        return bodies, {k: v for k, v in counted if k.startswith("garbage") or k == "requests"}

    bodies, stats = run()
    assert (bodies, stats) == run()
    served = {kind: stats[f"garbage_{kind}"] for kind in GARBAGE_KINDS}
    assert sum(served.values()) == stats["garbage_injected"]
    assert 10 < stats["garbage_injected"] < 50 and stats["requests"] == 60
    assert served["truncated"] == served["huge"] == served["content_type"] == 0
    assert all(served[k] > 0 for k in ("html", "noise", "wrong_shape", "empty")), served
    server = sandbox_factory(time_scale=0.01, garbage_rate=1.0)
    for _ in GARBAGE_KINDS:  # the kinds in turn: every one among the first seven
        requests.get(f"{server.url}/res.php", params={"key": DEV_API_KEY}, timeout=5)
    assert all(server.stats()[f"garbage_{kind}"] == 1 for kind in GARBAGE_KINDS)
    requests.post(f"{server.url}/admin/reset", timeout=5).raise_for_status()
    assert server.stats()["garbage_injected"] == 0


def test_garbage_follows_fault_paths_and_spares_the_admin_api(sandbox_factory: Make) -> None:
    server = sandbox_factory(
        time_scale=0.01, garbage_rate=1.0, garbage_kinds=("html",), fault_paths=("res.php",)
    )
    assert _classic_submit(server.url).json()["status"] == 1  # in.php spared
    assert requests.get(f"{server.url}/stats", timeout=5).json()["garbage_injected"] == 0
    assert requests.get(f"{server.url}/healthz", timeout=5).json() == {"ok": True}


def test_configuration_of_garbage() -> None:
    assert SandboxConfig().garbage_kinds == GARBAGE_KINDS and SandboxConfig().garbage_rate == 0
    config = SandboxConfig().updated({"garbage_kinds": "html, empty", "garbage_rate": 0.2})
    assert (config.garbage_kinds, config.garbage_rate) == (("html", "empty"), 0.2)
    assert config.describe()["garbage_kinds"] == ("html", "empty")
    for bad in (
        {"garbage_rate": 1.5},
        {"garbage_kinds": ("html", "gibberish")},
        {"garbage_kinds": ()},
        {"garbage_kinds": 3},
    ):
        with pytest.raises(ConfigurationError, match="garbage"):
            SandboxConfig(**bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="garbage"):
            SandboxConfig().updated(bad)


def test_command_line_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[SandboxConfig] = []
    monkeypatch.setattr(sandbox_cli, "_serve", served.append)
    runner = CliRunner()
    args = [
        "--time-scale",
        "1",
        "--garbage-rate",
        "0.2",
        "--garbage-kind",
        "html",
        "--garbage-kind",
        "huge",
    ]
    assert runner.invoke(sandbox_command, args).exit_code == 0
    assert runner.invoke(sandbox_command, ["--time-scale", "1"]).exit_code == 0
    assert [(c.garbage_rate, c.garbage_kinds) for c in served] == [
        (0.2, ("huge", "html")),
        (0.0, GARBAGE_KINDS),
    ]
    wrong = runner.invoke(sandbox_command, ["--garbage-kind", "spam", "--time-scale", "1"])
    assert wrong.exit_code == 2
    assert "--garbage-rate" in runner.invoke(sandbox_command, ["--help"]).output
