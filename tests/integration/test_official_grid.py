"""Protocol fidelity for image grids: every official SDK that has one, against the sandbox
(the set-up of test_official_new_types.py), each reading its provider's numbering.

What the installed SDKs offer: 2captcha-python 2.1.2 ``grid()`` (in.php ``recaptcha=1``,
answer ``click:...`` from 1); capsolver 1.0.7 ``solve()`` of ``ReCaptchaV2Classification``
(in its SUPPORT_TASK_TYPE; answered in the createTask reply, ``objects`` from 0);
capmonstercloudclient 4.3.1 ``RecaptchaComplexImageTaskRequest`` (ComplexImageTask, class
``recaptcha``, ``answer``: a boolean per tile). anticaptchaofficial 1.0.72 and
python-anticaptcha 2.0.0 have no grid task: nothing to ask them.
"""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import capsolver
import pytest
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import RecaptchaComplexImageTaskRequest

from captcha_tasks_sandbox import dev_api_key
from captcha_tasks_sandbox.answers import grid_answer

from . import test_official_new_types as official
from .test_official_new_types import SandboxMaker, _two_captcha, assert_solved

make_sandbox = official.make_sandbox

pytestmark = pytest.mark.integration

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) + b"official grid"
B64 = base64.b64encode(PNG).decode("ascii")
BUSES = "/m/01bjv"
SCALE = 0.1
#: The sandbox's tiles for PNG, from 1 (in.php's numbering).
CLICKED = [int(tile) for tile in grid_answer(PNG, 9).removeprefix("click:").split("/")]


def test_2captcha_python_solves_a_grid(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha", time_scale=SCALE)
    solver = _two_captcha(sandbox, extended=False)
    answer = solver.grid(B64, hintText="Select all images with buses", rows=3, cols=3)
    assert answer["code"] == "click:" + "/".join(map(str, CLICKED))
    assert_solved(sandbox, {"grid": 1})


def test_capsolver_sdk_solves_a_grid(
    make_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = make_sandbox("json", "capsolver", time_scale=SCALE)
    monkeypatch.setattr(capsolver, "api_base", sandbox.url)
    monkeypatch.setattr(capsolver, "api_key", dev_api_key("capsolver"))
    solved = capsolver.solve({"type": "ReCaptchaV2Classification", "image": B64, "question": BUSES})
    assert solved == {"type": "multi", "objects": [tile - 1 for tile in CLICKED]}
    assert_solved(sandbox, {"grid": 1})


def test_capmonstercloudclient_solves_a_grid(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False, time_scale=SCALE)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )
    request = RecaptchaComplexImageTaskRequest(
        imagesBase64=[B64], metadata={"Grid": "3x3", "TaskDefinition": BUSES}
    )
    answer: dict[str, Any] = asyncio.run(client.solve_captcha(request))
    assert answer == {"answer": [tile + 1 in CLICKED for tile in range(9)]}
    assert_solved(sandbox, {"grid": 1})
