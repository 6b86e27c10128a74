"""Protocol fidelity for DataDome: every official SDK that has it, against the sandbox
(the set-up of test_official_new_types.py), the cookie each hands back checked against
the sandbox's record (good for the user agent it was solved as, and no other).

What the installed SDKs offer: 2captcha-python 2.1.2 ``datadome()`` (in.php
``method=datadome`` with its proxy); capsolver 1.0.7 ``DataDomeSliderTask`` (its
SUPPORT_TASK_TYPE; proxy and userAgent required by its check); capmonstercloudclient
4.3.1 ``DataDomeCustomTaskRequest`` (CustomTask, class ``DataDome``, own proxy and
``metadata.datadomeCookie`` required). anticaptchaofficial 1.0.72 and python-anticaptcha
2.0.0 have no DataDome: nothing to ask them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import capsolver
import pytest
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import DataDomeCustomTaskRequest, ProxyInfo

from captcha_tasks.provider.answers import json_solution
from captcha_tasks.provider.captchas import for_type
from captcha_tasks_sandbox import SandboxServer, dev_api_key

from . import test_official_new_types as official
from .test_official_new_types import PAGE, SandboxMaker, _two_captcha, assert_solved

make_sandbox = official.make_sandbox

pytestmark = pytest.mark.integration

URL = (
    "https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA1QGvUmJwyYoAwpyjNg%3D%3D"
    "&hash=789361B674144528D0B7EE76B35826&cid=6QAEcL8coBYTi9tYLmjCdyKmNNyHz1x&t=fe"
    "&referer=https%3A%2F%2Fshop.example.com&s=40070&e=3e531bd3b30650f2e810ac72cd80adb5"
)
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0.0.0"
SCALE = 0.1


def assert_bound(sandbox: SandboxServer, cookie: dict[str, str]) -> None:
    """The cookie is one the sandbox solved, good for ``UA`` only."""
    assert cookie["name"] == "datadome" and cookie["domain"] == ".shop.example.com"
    assert sandbox.state.datadome_cookie_ok(cookie["value"], UA) is None
    assert sandbox.state.datadome_cookie_ok(cookie["value"], UA + " other") is not None


def test_2captcha_python_solves_datadome(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    proxy = {"type": "HTTP", "uri": "dd-user:dd-pass@10.1.2.3:8080"}
    answer = solver.datadome(captcha_url=URL, pageurl=PAGE, userAgent=UA, proxy=proxy)
    assert answer["code"].startswith("datadome=")
    assert_bound(sandbox, for_type("datadome", answer["code"]))  # type: ignore[arg-type]
    assert_solved(sandbox, {"datadome": 1})


def test_capsolver_sdk_solves_datadome(
    make_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox("json", "capsolver", time_scale=SCALE)
    # The SDK reads CAPSOLVER_API_BASE / CAPSOLVER_API_KEY once, at import, into these.
    monkeypatch.setattr(capsolver, "api_base", sandbox.url)
    monkeypatch.setattr(capsolver, "api_key", dev_api_key("capsolver"))
    task = {
        "type": "DataDomeSliderTask",
        "websiteURL": PAGE,
        "captchaUrl": URL,
        "userAgent": UA,
        "proxy": "10.1.2.3:8080:dd-user:dd-pass",
    }
    answer = capsolver.solve(task)
    assert set(answer) == {"cookie"} and answer["cookie"].startswith("datadome=")
    assert_bound(sandbox, json_solution(answer))  # type: ignore[arg-type]
    assert_solved(sandbox, {"datadome": 1})


def test_capmonstercloudclient_solves_datadome(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )
    request = DataDomeCustomTaskRequest(
        websiteUrl=PAGE,
        userAgent=UA,
        metadata={"captchaUrl": URL, "datadomeCookie": "datadome=6BvxqELMoorFNoo7GT1"},
        proxy=ProxyInfo(
            proxyType="http",
            proxyAddress="10.1.2.3",
            proxyPort=8080,
            proxyLogin="dd-user",
            proxyPassword="dd-pass",
        ),
    )
    answer: dict[str, Any] = asyncio.run(client.solve_captcha(request))
    assert set(answer["domains"]) == {"shop.example.com"}
    assert_bound(sandbox, json_solution(answer))  # type: ignore[arg-type]
    assert_solved(sandbox, {"datadome": 1})
