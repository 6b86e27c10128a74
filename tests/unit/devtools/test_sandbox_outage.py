"""The sandbox as a provider that goes away and comes back (the "one provider of two
down" fault row), and the page host it records per captcha (how that row tells a job
sent to two sandboxes speaking different wire formats)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
import requests

from captcha_tasks_sandbox import DEV_API_KEY, SandboxServer, dev_api_key

GOOGLEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"


def _submit_classic(url: str, page: str) -> int:
    params = {
        "key": DEV_API_KEY,
        "method": "userrecaptcha",
        "googlekey": GOOGLEKEY,
        "pageurl": page,
        "json": "1",
    }
    document = requests.post(f"{url}/in.php", data=params, timeout=5).json()
    assert document["status"] == 1, document
    return int(document["request"])


def _captchas(url: str) -> list[dict[str, Any]]:
    return list(requests.get(f"{url}/admin/captchas", timeout=5).json()["captchas"])


def test_a_successor_serves_the_same_port_and_memory_after_an_outage(
    sandbox_factory: Callable[..., SandboxServer],
) -> None:
    first = sandbox_factory(time_scale=0.01, dialect="2captcha", balance=1.0)
    url = first.url
    captcha_id = _submit_classic(url, "https://a.example.com/login")
    requests.post(f"{url}/admin/config", json={"balance": 0.0}, timeout=5).raise_for_status()
    first.stop()
    with pytest.raises(requests.ConnectionError):  # refused while it is down
        requests.get(f"{url}/healthz", timeout=2)
    second = first.successor()
    try:
        second.start()
        assert second.url == url
        time.sleep(0.2)  # recaptcha_v2: 0.15 s at this scale
        params = {"key": DEV_API_KEY, "action": "get", "id": str(captcha_id), "json": "1"}
        answer = requests.get(f"{url}/res.php", params=params, timeout=5).json()
        assert answer["status"] == 1, answer  # the captcha in flight survived
        stats = second.stats()
        assert stats["submitted"] == 1 and stats["balance"] == 0.0  # so did the rest
        refused = requests.post(
            f"{url}/in.php",
            timeout=5,
            data={
                "key": DEV_API_KEY,
                "method": "userrecaptcha",
                "googlekey": GOOGLEKEY,
                "pageurl": "https://b.example.com/",
            },
        )
        assert refused.text == "ERROR_ZERO_BALANCE"
    finally:
        second.stop()


def test_captchas_name_their_page_host_over_both_wire_formats(
    sandbox_factory: Callable[..., SandboxServer],
) -> None:
    classic = sandbox_factory(time_scale=0.01)
    _submit_classic(classic.url, "https://job7.example.com/login?x=1")
    json_api = sandbox_factory(time_scale=0.01, protocol="json", dialect="capsolver")
    task = {
        "type": "ReCaptchaV2TaskProxyLess",
        "websiteURL": "https://job7.example.com/login",
        "websiteKey": GOOGLEKEY,
    }
    body = {"clientKey": dev_api_key("capsolver"), "task": task}
    document = requests.post(f"{json_api.url}/createTask", json=body, timeout=5).json()
    assert document["errorId"] == 0, document
    hosts = [c["hostname"] for c in _captchas(classic.url) + _captchas(json_api.url)]
    assert hosts == ["job7.example.com", "job7.example.com"]
