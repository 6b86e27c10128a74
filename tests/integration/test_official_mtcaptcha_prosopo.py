"""Protocol fidelity for MTCaptcha and Prosopo: every official SDK that has them, against
the sandbox (the set-up of test_official_new_types.py).

What the installed SDKs offer: 2captcha-python 2.1.2 ``mtcaptcha()`` and ``prosopo()``
(in.php); anticaptchaofficial 1.0.72 ``prosopoProxyless`` (no MTCaptcha module);
capmonstercloudclient 4.3.1 ``MTCaptchaRequest`` and ``ProsopoTaskRequest``; capsolver
1.0.7 takes raw task dicts (``MtCaptchaTaskProxyLess`` in its SUPPORT_TASK_TYPE; no
Prosopo). python-anticaptcha 2.0.0 has neither type: nothing to ask it.
"""

from __future__ import annotations

import asyncio
from typing import Any

import capsolver
import pytest
from anticaptchaofficial.prosopoproxyless import prosopoProxyless
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import MTCaptchaRequest, ProsopoTaskRequest

from captcha_tasks_sandbox import SandboxServer, dev_api_key

from . import test_official_new_types as official
from .test_official_new_types import (
    PAGE,
    SandboxMaker,
    _configured,
    _two_captcha,
    assert_solved,
    verify,
)

# The sandboxes of test_official_new_types.py (TLS with a trusted test CA; Anti-Captcha's
# hard-coded host rewritten to the sandbox), as fixtures of this module.
make_sandbox = official.make_sandbox
anticaptcha_sandbox = official.anticaptcha_sandbox

pytestmark = pytest.mark.integration

MT_KEY = "MTPublic-KzqLY1cKH"
PROSOPO_KEY = "5FxMg5jAF3F8d8PrQezDMZh6ZbZd69kDt6FUVb1KaFpSgS2l"  # Anti-Captcha's example
#: Prosopo's sandbox lifetime (60 s) at this scale outlasts the SDKs' fixed waits.
SCALE = 0.1


def test_2captcha_python_solves_mtcaptcha_and_prosopo(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    mt = solver.mtcaptcha(sitekey=MT_KEY, url=PAGE)
    assert mt["code"].startswith("v1(")
    verify(sandbox, mt["code"])
    prosopo = solver.prosopo(sitekey=PROSOPO_KEY, pageurl=PAGE)
    assert prosopo["code"].startswith("0x0001")
    verify(sandbox, prosopo["code"])
    assert_solved(sandbox, {"mtcaptcha": 1, "prosopo": 1})


def test_anticaptchaofficial_solves_prosopo(anticaptcha_sandbox: SandboxServer) -> None:
    sandbox = anticaptcha_sandbox
    solver = _configured(prosopoProxyless())
    solver.set_website_key(PROSOPO_KEY)
    token = solver.solve_and_return_solution()
    assert token != 0, solver.err_string
    assert token.startswith("0x0001")
    assert solver.user_agent  # Anti-Captcha's solution carries its worker's agent
    verify(sandbox, token)
    assert_solved(sandbox, {"prosopo": 1})


def test_capmonstercloudclient_solves_mtcaptcha_and_prosopo(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )

    async def solve(request: Any) -> dict[str, Any]:
        answer: dict[str, Any] = await client.solve_captcha(request)
        return answer

    mt = asyncio.run(
        solve(
            MTCaptchaRequest(
                websiteUrl=PAGE, websiteKey=MT_KEY, pageAction="login", isInvisible=True
            )
        )
    )
    assert verify(sandbox, mt["token"])["action"] == "login"
    prosopo = asyncio.run(solve(ProsopoTaskRequest(websiteUrl=PAGE, websiteKey=PROSOPO_KEY)))
    verify(sandbox, prosopo["token"])
    assert_solved(sandbox, {"mtcaptcha": 1, "prosopo": 1})


def test_capsolver_sdk_solves_mtcaptcha(
    make_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox("json", "capsolver", time_scale=SCALE)
    monkeypatch.setattr(capsolver, "api_base", sandbox.url)
    monkeypatch.setattr(capsolver, "api_key", dev_api_key("capsolver"))
    mt = capsolver.solve(
        {"type": "MtCaptchaTaskProxyLess", "websiteURL": PAGE, "websiteKey": MT_KEY}
    )
    assert set(mt) == {"token"}
    verify(sandbox, mt["token"])
    assert_solved(sandbox, {"mtcaptcha": 1})
