"""Protocol fidelity for Cloudflare's challenge page: every official SDK that has it,
against the sandbox (the set-up of test_official_new_types.py), the cookie each hands
back checked against the sandbox's record (good for the user agent it was passed as, and
no other), and read by the product into its one solution shape.

What the installed SDKs offer: capsolver 1.0.7 ``AntiCloudflareTask`` (its
SUPPORT_TASK_TYPE; its check wants a ``metadata`` object, which the current docs no
longer name: sent, and ignored); capmonstercloudclient 4.3.1 ``TurnstileRequest`` with
``cloudflareTaskType="cf_clearance"`` (its validator requires ``htmlPageBase64``, a proxy
and ``userAgent``). 2captcha-python, anticaptchaofficial and python-anticaptcha have no
cf_clearance task: nothing to ask them.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import capsolver
import pytest
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import ProxyInfo, TurnstileRequest

from captcha_tasks.provider.answers import json_solution
from captcha_tasks.provider.captchas import for_type
from captcha_tasks_sandbox import SandboxServer, dev_api_key
from captcha_tasks_sandbox.demo_widgets import cloudflare_page

from . import test_official_new_types as official
from .test_official_new_types import PAGE, SandboxMaker, assert_solved

make_sandbox = official.make_sandbox

pytestmark = pytest.mark.integration

UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/131.0.0.0"
HTML, _ = cloudflare_page("shop.example.com", "/")
SCALE = 0.1


def assert_bound(sandbox: SandboxServer, answer: dict[str, Any]) -> None:
    """The answer reads as the product's shape, its cookie one the sandbox issued, good
    for ``UA`` only."""
    shape = for_type("cloudflare_challenge", json_solution(answer), user_agent=UA)  # type: ignore[arg-type]
    clearance = shape["cookies"]["cf_clearance"]  # type: ignore[index,call-overload]
    assert shape["headers"] == {"User-Agent": UA}  # type: ignore[index,call-overload]
    assert sandbox.state.cookie_ok("cloudflare_challenge", clearance, UA) is None
    assert sandbox.state.cookie_ok("cloudflare_challenge", clearance, UA + " other") is not None


def test_capsolver_sdk_passes_the_challenge_page(
    make_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox("json", "capsolver", time_scale=SCALE)
    # The SDK reads CAPSOLVER_API_BASE / CAPSOLVER_API_KEY once, at import, into these.
    monkeypatch.setattr(capsolver, "api_base", sandbox.url)
    monkeypatch.setattr(capsolver, "api_key", dev_api_key("capsolver"))
    task = {
        "type": "AntiCloudflareTask",
        "websiteURL": PAGE,
        "proxy": "10.1.2.3:8080:cf-user:cf-pass",
        "userAgent": UA,
        "html": HTML,
        "metadata": {"type": "challenge"},
    }
    answer = capsolver.solve(task)
    assert set(answer) == {"cookies", "token", "userAgent"}
    assert answer["token"] == answer["cookies"]["cf_clearance"] and answer["userAgent"] == UA
    assert_bound(sandbox, answer)
    assert_solved(sandbox, {"cloudflare_challenge": 1})


def test_capmonstercloudclient_passes_the_challenge_page(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )
    request = TurnstileRequest(
        websiteURL=PAGE,
        websiteKey="xxxxxxxxxx",
        cloudflareTaskType="cf_clearance",
        htmlPageBase64=base64.b64encode(HTML.encode()).decode(),
        userAgent=UA,
        proxy=ProxyInfo(
            proxyType="http",
            proxyAddress="10.1.2.3",
            proxyPort=8080,
            proxyLogin="cf-user",
            proxyPassword="cf-pass",
        ),
    )
    answer: dict[str, Any] = asyncio.run(client.solve_captcha(request))
    assert set(answer) == {"cf_clearance"}
    assert_bound(sandbox, answer)
    assert_solved(sandbox, {"cloudflare_challenge": 1})
