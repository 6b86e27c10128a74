"""Protocol fidelity for Yidun, Binance and Tencent: every official SDK that has them,
against the sandbox (the set-up of test_official_new_types.py).

What the installed SDKs offer: 2captcha-python 2.1.2 ``yidun()``, ``binance()`` and
``tencent()`` (in.php); capmonstercloudclient 4.3.1 ``YidunRequest``,
``BinanceTaskRequest`` and ``TenDiCustomTaskRequest``.
anticaptchaofficial 1.0.72, python-anticaptcha
2.0.0 and capsolver 1.0.7 have no such type (nor do their providers): nothing to ask them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import (
    BinanceTaskRequest,
    TenDiCustomTaskRequest,
    YidunRequest,
)

from captcha_tasks_sandbox import dev_api_key

from . import test_official_new_types as official
from .test_official_new_types import PAGE, SandboxMaker, _two_captcha, assert_solved, verify

# The sandboxes of test_official_new_types.py (TLS with a trusted test CA), as a fixture
# of this module.
make_sandbox = official.make_sandbox

pytestmark = pytest.mark.integration

YIDUN_KEY = "07e2387ab53a4d6f930b8d9a9be71bdf"
YIDUN_LIB = "https://cstaticdun.126.net/load.min.js"
VALIDATE_ID = "cb0bfefa598b4d3a8e3f6a40b5a7e9c1"
APP_ID = "189123456"
AGENT = official.AGENT
#: The sandbox's lifetimes (two minutes) at this scale outlast the SDKs' fixed waits.
SCALE = 0.1


def test_2captcha_python_solves_yidun(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    plain = solver.yidun(sitekey=YIDUN_KEY, pageurl=PAGE)
    assert plain["code"].startswith("CN31_")
    verify(sandbox, plain["code"])
    enterprise = solver.yidun(
        sitekey=YIDUN_KEY,
        pageurl=PAGE,
        yidun_get_lib=YIDUN_LIB,
        yidun_api_server_subdomain="c.dun.163.com",
        challenge="d0c2f9b0a1",
        hcg="7b6f5a",
        hct=1733571234567,
        useragent=AGENT,
    )
    verify(sandbox, enterprise["code"])
    assert_solved(sandbox, {"yidun": 2})


def _capmonster(make_sandbox: SandboxMaker) -> tuple[Any, CapMonsterClient]:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    options = ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    return sandbox, CapMonsterClient(options)


def _solve(client: CapMonsterClient, request: Any) -> dict[str, Any]:
    async def solve() -> dict[str, Any]:
        answer: dict[str, Any] = await client.solve_captcha(request)
        return answer

    return asyncio.run(solve())


def test_capmonstercloudclient_solves_yidun(make_sandbox: SandboxMaker) -> None:
    sandbox, client = _capmonster(make_sandbox)
    plain = _solve(client, YidunRequest(websiteUrl=PAGE, websiteKey=YIDUN_KEY))
    assert set(plain) == {"token"} and plain["token"].startswith("CN31_")
    verify(sandbox, plain["token"])
    enterprise = YidunRequest(
        websiteUrl=PAGE,
        websiteKey=YIDUN_KEY,
        userAgent=AGENT,
        yidunGetLib=YIDUN_LIB,
        yidunApiServerSubdomain="c.dun.163.com",
        challenge="d0c2f9b0a1",
        hcg="7b6f5a",
        hct=1733571234567,
    )
    verify(sandbox, _solve(client, enterprise)["token"])
    assert_solved(sandbox, {"yidun": 2})


def test_2captcha_python_solves_binance(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    plain = solver.binance(pageurl=PAGE, sitekey="login", validate_id=VALIDATE_ID)
    assert plain["code"].startswith("captcha#")
    verify(sandbox, plain["code"])
    with_agent = solver.binance(
        pageurl=PAGE, sitekey="login", validate_id=VALIDATE_ID, useragent=AGENT
    )
    verify(sandbox, with_agent["code"])
    assert_solved(sandbox, {"binance": 2})


def test_capmonstercloudclient_solves_binance(make_sandbox: SandboxMaker) -> None:
    sandbox, client = _capmonster(make_sandbox)
    request = BinanceTaskRequest(
        websiteUrl=PAGE, websiteKey="login", validateId=VALIDATE_ID, userAgent=AGENT
    )
    answer = _solve(client, request)
    # CapMonster's binance page: the token and the user agent it was solved as.
    assert answer["userAgent"] == AGENT and answer["token"].startswith("captcha#")
    verify(sandbox, answer["token"])
    plain = BinanceTaskRequest(websiteUrl=PAGE, websiteKey="login", validateId=VALIDATE_ID)
    assert _solve(client, plain)["userAgent"]  # its workers' own
    assert_solved(sandbox, {"binance": 2})


def test_2captcha_python_solves_tencent(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    answer = solver.tencent(app_id=APP_ID, url=PAGE)
    # res.php's answer as JSON text (2captcha-javascript: "the response in JSON"), the
    # fields of 2Captcha's TencentTask.
    fields = json.loads(answer["code"])
    assert (fields["appid"], fields["ret"]) == (APP_ID, 0)
    assert fields["randstr"].startswith("@")
    verify(sandbox, fields["ticket"])
    assert_solved(sandbox, {"tencent": 1})


def test_capmonstercloudclient_solves_tencent(make_sandbox: SandboxMaker) -> None:
    sandbox, client = _capmonster(make_sandbox)
    request = TenDiCustomTaskRequest(
        websiteUrl=PAGE,
        websiteKey=APP_ID,
        userAgent=AGENT,
        metadata={"captchaUrl": "https://turing.captcha.qcloud.com/TCaptcha-global.js"},
    )
    answer = _solve(client, request)
    # CapMonster's tendi page: the ticket and randstr in data, the agent in headers.
    assert set(answer) == {"data", "headers"}
    assert answer["headers"] == {"User-Agent": AGENT}
    assert set(answer["data"]) == {"ticket", "randstr"}
    verify(sandbox, answer["data"]["ticket"])
    plain = _solve(client, TenDiCustomTaskRequest(websiteUrl=PAGE, websiteKey=APP_ID))
    verify(sandbox, plain["data"]["ticket"])
    assert_solved(sandbox, {"tencent": 2})
