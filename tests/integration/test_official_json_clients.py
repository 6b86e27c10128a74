"""Protocol fidelity of the JSON task API: each provider's official (or most used) Python SDK
against the sandbox in that provider's dialect, over TLS (CapMonster's over http: see its test).

Each SDK solves reCAPTCHA v2, an image captcha and (where it has one) Turnstile; tokens must
pass the sandbox's ``POST /siteverify`` once, image text must be what the sandbox reads in the
image, and getBalance must show the solves charged. SDK poll intervals are their own (0.2 to
3 s); the sandbox runs at ``time_scale=0.02`` so every captcha is ready by the first or second
poll. Anti-Captcha keeps a result only 60 s after it is solved (1.2 s at 0.02), shorter than
its SDKs' waits in real seconds, so its sandboxes run at 0.1 (results kept 6 s).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anticaptchaofficial.antinetworking as anticaptcha_networking
import capsolver
import pytest
import requests
from anticaptchaofficial.imagecaptcha import imagecaptcha
from anticaptchaofficial.recaptchav2proxyless import recaptchaV2Proxyless
from anticaptchaofficial.turnstileproxyless import turnstileProxyless
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import ImageToTextRequest, RecaptchaV2Request, TurnstileRequest
from python_anticaptcha import AnticaptchaClient, ImageToTextTask, NoCaptchaTaskProxylessTask

from captcha_tasks_sandbox import SandboxServer, dev_api_key, image_answer
from tests.support.sandbox_fixtures import trusted_certificate

pytestmark = pytest.mark.integration

GOOGLEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
PAGE = "https://shop.example.com/login"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
BALANCE = 100.0
PRICE = 0.003
#: reCAPTCHA v2 ready after 1.5 s, kept until 7.5 s: past the SDKs' fixed 3 s first wait.
ANTICAPTCHA_SCALE = 0.1

SandboxMaker = Callable[..., SandboxServer]


@pytest.fixture
def json_sandbox(
    sandbox_factory: Callable[..., SandboxServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> SandboxMaker:
    """``make(dialect)``: a https JSON sandbox whose certificate (for 127.0.0.1) chains to a
    test CA that ``requests`` trusts through REQUESTS_CA_BUNDLE."""
    cert_path, key_path = trusted_certificate(tmp_path, monkeypatch)

    def make(dialect: str, tls: bool = True, time_scale: float = 0.02) -> SandboxServer:
        # At 0.02, reCAPTCHA v2 takes 15 s * 0.02 = 0.3 s, Turnstile 0.16 s, an image 0.06 s.
        fields: dict[str, Any] = {"tls_cert": str(cert_path), "tls_key": str(key_path)}
        return sandbox_factory(
            protocol="json",
            dialect=dialect,
            time_scale=time_scale,
            balance=BALANCE,
            price=PRICE,
            **(fields if tls else {}),
        )

    return make


def assert_token_accepted_once(sandbox: SandboxServer, token: str) -> None:
    """The token is one the sandbox issued for PAGE, and it is good for one use."""
    verify = f"{sandbox.url}/siteverify"
    with requests.Session() as session:
        first = session.post(verify, data={"secret": "s", "response": token}, timeout=5).json()
        assert first["success"] is True, first
        assert first["hostname"] == "shop.example.com"
        second = session.post(verify, data={"secret": "s", "response": token}, timeout=5).json()
        assert second == {"success": False, "error-codes": ["timeout-or-duplicate"]}


def assert_solved(sandbox: SandboxServer, by_type: dict[str, int]) -> None:
    stats = sandbox.stats()
    assert stats["solved"] == sum(by_type.values())
    assert {kind: stats["by_type"].get(kind, 0) for kind in by_type} == by_type
    assert stats["bad_key"] == 0


# --- CapMonster Cloud: capmonstercloudclient (asyncio, aiohttp) ---------------------------


def test_capmonstercloudclient_through_the_sandbox(
    json_sandbox: SandboxMaker,
) -> None:
    # Plain http: the SDK's aiohttp builds its verifying SSL context once, at import, from the
    # system trust store, and ClientOptions takes no CA; the test CA cannot reach it.
    sandbox = json_sandbox("capmonster", tls=False)
    assert sandbox.url.startswith("http://127.0.0.1:")
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )

    async def run() -> tuple[dict[str, Any], dict[str, str], dict[str, str], dict[str, str]]:
        before = await client.get_balance()
        recaptcha = await client.solve_captcha(
            RecaptchaV2Request(websiteUrl=PAGE, websiteKey=GOOGLEKEY)
        )
        turnstile = await client.solve_captcha(
            TurnstileRequest(websiteURL=PAGE, websiteKey=TURNSTILE_KEY)
        )
        image = await client.solve_captcha(ImageToTextRequest(image_bytes=PNG, numeric=1))
        return before, recaptcha, turnstile, image

    before, recaptcha, turnstile, image = asyncio.run(run())
    assert before["balance"] == BALANCE
    assert_token_accepted_once(sandbox, recaptcha["gRecaptchaResponse"])
    assert_token_accepted_once(sandbox, turnstile["token"])
    assert image["text"] == image_answer(PNG, {"numeric": "1"})
    after = asyncio.run(client.get_balance())
    assert after["balance"] == pytest.approx(BALANCE - 3 * PRICE)
    assert_solved(sandbox, {"recaptcha_v2": 1, "turnstile": 1, "image": 1})


# --- CapSolver: capsolver (requests; module-level configuration) -------------------------


def test_capsolver_sdk_through_the_sandbox(
    json_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    sandbox = json_sandbox("capsolver")
    # The SDK reads CAPSOLVER_API_BASE / CAPSOLVER_API_KEY once, at import, into these.
    monkeypatch.setattr(capsolver, "api_base", sandbox.url)
    monkeypatch.setattr(capsolver, "api_key", dev_api_key("capsolver"))

    before = capsolver.balance()
    assert before["balance"] == BALANCE
    recaptcha = capsolver.solve(
        {"type": "ReCaptchaV2TaskProxyLess", "websiteURL": PAGE, "websiteKey": GOOGLEKEY}
    )
    assert_token_accepted_once(sandbox, recaptcha["gRecaptchaResponse"])
    turnstile = capsolver.solve(
        {"type": "AntiTurnstileTaskProxyLess", "websiteURL": PAGE, "websiteKey": TURNSTILE_KEY}
    )
    assert_token_accepted_once(sandbox, turnstile["token"])
    body = base64.b64encode(PNG).decode("ascii")
    image = capsolver.solve({"type": "ImageToTextTask", "body": body})
    assert image["text"] == image_answer(PNG)
    assert capsolver.balance()["balance"] == pytest.approx(BALANCE - 3 * PRICE)
    assert_solved(sandbox, {"recaptcha_v2": 1, "turnstile": 1, "image": 1})


# --- Anti-Captcha: python-anticaptcha (ad-m; requests) -----------------------------------


def test_python_anticaptcha_through_the_sandbox(json_sandbox: SandboxMaker) -> None:
    sandbox = json_sandbox("anticaptcha", time_scale=ANTICAPTCHA_SCALE)
    key = dev_api_key("anticaptcha")
    with AnticaptchaClient(key, host=f"127.0.0.1:{sandbox.port}", use_ssl=True) as client:
        assert client.getBalance() == BALANCE
        # backoff: first pause 1 s instead of the fixed 3 s (the sandbox is ready by then).
        job = client.createTask(NoCaptchaTaskProxylessTask(website_url=PAGE, website_key=GOOGLEKEY))
        job.join(maximum_time=30, backoff=True)
        assert_token_accepted_once(sandbox, job.get_solution_response())
        image_job = client.createTask(ImageToTextTask(PNG, numeric=2, max_length=4))
        image_job.join(maximum_time=30, backoff=True)
        assert image_job.get_captcha_text() == image_answer(PNG, {"numeric": "2", "max_len": "4"})
        assert client.getBalance() == pytest.approx(BALANCE - 2 * PRICE)
    # python-anticaptcha has no Turnstile task.
    assert_solved(sandbox, {"recaptcha_v2": 1, "image": 1})


# --- Anti-Captcha: anticaptchaofficial (requests; URL hard-coded) -------------------------


class _ToSandbox(requests.adapters.HTTPAdapter):
    """Sends what the SDK addresses to https://api.anti-captcha.com/ to the sandbox instead;
    the request itself (method, headers, JSON body) is left as the SDK built it."""

    def __init__(self, base_url: str) -> None:
        super().__init__()
        self._base_url = base_url

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        assert request.url is not None
        request.url = request.url.replace(ANTICAPTCHA_URL, self._base_url + "/", 1)
        return super().send(request, **kwargs)


ANTICAPTCHA_URL = "https://api.anti-captcha.com/"


@pytest.fixture
def anticaptchaofficial_sandbox(
    json_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SandboxServer]:
    """The anticaptcha-dialect sandbox, reached by anticaptchaofficial.

    The SDK has no base URL setting: ``make_request`` posts to a hard-coded
    ``https://api.anti-captcha.com/`` through the module-level ``session``. The only
    redirection is to swap that session for one whose adapter for that prefix rewrites
    the host (nothing else); any other URL still fails, so a leak to the live API would not
    pass unnoticed.
    """
    sandbox = json_sandbox("anticaptcha", time_scale=ANTICAPTCHA_SCALE)
    session = requests.Session()
    session.headers.update(anticaptcha_networking.default_headers)
    session.mount(ANTICAPTCHA_URL, _ToSandbox(sandbox.url))
    monkeypatch.setattr(anticaptcha_networking, "session", session)
    yield sandbox
    session.close()


def _configured(solver: Any) -> Any:
    solver.set_verbose(0)
    solver.set_key(dev_api_key("anticaptcha"))
    solver.set_website_url(PAGE)
    return solver


def test_anticaptchaofficial_through_the_sandbox(
    anticaptchaofficial_sandbox: SandboxServer,
) -> None:
    sandbox = anticaptchaofficial_sandbox
    # The SDK answers failures with 0 (and -1 for the balance) and keeps the reason in
    # err_string: compare with the expected value so a failure shows that reason.
    recaptcha = _configured(recaptchaV2Proxyless())
    assert recaptcha.get_balance() == BALANCE, recaptcha.err_string
    recaptcha.set_website_key(GOOGLEKEY)
    token = recaptcha.solve_and_return_solution()
    assert token != 0, recaptcha.err_string
    assert_token_accepted_once(sandbox, token)

    turnstile = _configured(turnstileProxyless())
    turnstile.set_website_key(TURNSTILE_KEY)
    turnstile_token = turnstile.solve_and_return_solution()
    assert turnstile_token != 0, turnstile.err_string
    assert_token_accepted_once(sandbox, turnstile_token)

    image = _configured(imagecaptcha())
    image.set_numeric(1)
    text = image.solve_and_return_solution(None, body=PNG)
    assert text == image_answer(PNG, {"numeric": "1"}), image.err_string

    assert image.get_balance() == pytest.approx(BALANCE - 3 * PRICE)
    assert_solved(sandbox, {"recaptcha_v2": 1, "turnstile": 1, "image": 1})
