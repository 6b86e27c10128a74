"""Protocol fidelity for Altcha: every official SDK that has it, against the sandbox (the
set-up of test_official_new_types.py), each payload checked by the reference verifier
(tests/support/altcha_reference.py), as a site would.

What the installed SDKs offer: 2captcha-python 2.1.2 ``altcha()`` (in.php
``method=altcha`` with ``challenge_json``); anticaptchaofficial 1.0.72
``altchaProxyless`` (``AltchaTaskProxyless`` with ``challengeJSON``); capmonstercloudclient
4.3.1 ``AltchaCustomTaskRequest`` (CustomTask, class ``altcha``, the challenge's fields
in ``metadata``). capsolver 1.0.7 and python-anticaptcha 2.0.0 have no Altcha type:
nothing to ask them.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import pytest
from anticaptchaofficial.altchaproxyless import altchaProxyless
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import AltchaCustomTaskRequest

from captcha_tasks_sandbox import SandboxServer, dev_api_key
from tests.support.altcha_reference import create_challenge, verify_solution

from . import test_official_new_types as official
from .test_official_new_types import PAGE, SandboxMaker, _configured, _two_captcha, assert_solved

# The sandboxes of test_official_new_types.py (TLS with a trusted test CA; Anti-Captcha's
# hard-coded host rewritten to the sandbox), as fixtures of this module.
make_sandbox = official.make_sandbox
anticaptcha_sandbox = official.anticaptcha_sandbox

pytestmark = pytest.mark.integration

KEY = "the site's hmac key"
SCALE = 0.1
CHALLENGE = create_challenge(KEY, 31_337, max_number=60_000)


def _number(payload: str) -> int:
    number: int = json.loads(base64.b64decode(payload))["number"]
    return number


def test_2captcha_python_solves_altcha(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    answer = solver.altcha(pageurl=PAGE, challenge_json=json.dumps(CHALLENGE))
    assert verify_solution(answer["code"], KEY)
    assert _number(answer["code"]) == 31_337
    assert_solved(sandbox, {"altcha": 1})


def test_anticaptchaofficial_solves_altcha(anticaptcha_sandbox: SandboxServer) -> None:
    sandbox = anticaptcha_sandbox
    solver = _configured(altchaProxyless())
    solver.set_challenge_json(json.dumps(CHALLENGE))  # challengeURL goes as "" alongside
    token = solver.solve_and_return_solution()
    assert token != 0, solver.err_string
    assert verify_solution(token, KEY)
    assert_solved(sandbox, {"altcha": 1})


def test_capmonstercloudclient_solves_altcha(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )
    request = AltchaCustomTaskRequest(
        websiteUrl=PAGE,
        websiteKey="",
        metadata={
            "challenge": CHALLENGE["challenge"],
            "iterations": str(CHALLENGE["maxnumber"]),
            "salt": CHALLENGE["salt"],
            "signature": CHALLENGE["signature"],
        },
    )
    answer: dict[str, Any] = asyncio.run(client.solve_captcha(request))
    assert verify_solution(answer["token"], KEY)
    assert_solved(sandbox, {"altcha": 1})
