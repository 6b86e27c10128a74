"""Protocol fidelity for Friendly Captcha: every official SDK that has it, against the
sandbox (the set-up of test_official_new_types.py).

What the installed SDKs offer: 2captcha-python 2.1.2 ``friendly_captcha()`` (in.php
``method=friendly_captcha``); anticaptchaofficial 1.0.72 ``friendlyCaptchaProxyless``;
capmonstercloudclient 4.3.1 ``FriendlyCustomTaskRequest`` (CustomTask, class
``friendly``, ``metadata.apiGetLib``). capsolver 1.0.7's SUPPORT_TASK_TYPE has no
``FriendlyCaptchaTaskProxyless`` yet (its docs have it), and python-anticaptcha 2.0.0 has
no such type: nothing to ask them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from anticaptchaofficial.friendlycaptchaproxyless import friendlyCaptchaProxyless
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import FriendlyCustomTaskRequest

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

KEY = "FCMDESUD3M34857N"  # Anti-Captcha's example
SCRIPT = "https://cdn.jsdelivr.net/npm/friendly-challenge@0.9.12/widget.module.min.js"
SCALE = 0.1
PREFIX = "72b43902"


def test_2captcha_python_solves_friendly_captcha(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    answer = solver.friendly_captcha(sitekey=KEY, url=PAGE)
    assert answer["code"].startswith(PREFIX)
    verify(sandbox, answer["code"])
    assert_solved(sandbox, {"friendly_captcha": 1})


def test_anticaptchaofficial_solves_friendly_captcha(anticaptcha_sandbox: SandboxServer) -> None:
    sandbox = anticaptcha_sandbox
    solver = _configured(friendlyCaptchaProxyless())
    solver.set_website_key(KEY)
    token = solver.solve_and_return_solution()
    assert token != 0, solver.err_string
    assert token.startswith(PREFIX)
    assert solver.user_agent  # Anti-Captcha's solution carries its worker's agent
    verify(sandbox, token)
    assert_solved(sandbox, {"friendly_captcha": 1})


def test_capmonstercloudclient_solves_friendly_captcha(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )
    request = FriendlyCustomTaskRequest(
        websiteUrl=PAGE, websiteKey=KEY, metadata={"apiGetLib": SCRIPT}
    )
    answer: dict[str, Any] = asyncio.run(client.solve_captcha(request))
    assert answer["token"].startswith(PREFIX)
    verify(sandbox, answer["token"])
    assert_solved(sandbox, {"friendly_captcha": 1})
