"""Protocol fidelity for the six newer types (FunCaptcha, GeeTest v4, AWS WAF, coordinates,
Turnstile challenge mode): the providers' official SDKs against the sandbox, over TLS.

The older types' fidelity tests (tests/integration/test_official_client.py,
test_official_json_clients.py) set the scene; this file asks the same SDKs for the new
types. Each answer is checked for what the sandbox served: tokens pass its ``/siteverify``
once, coordinates are :func:`coordinates_answer` of the image, GeeTest v4 echoes the
captcha id. Where an SDK cannot ask for a type, the test says why instead of faking it.
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
from anticaptchaofficial.amazonproxyless import amazonProxyless
from anticaptchaofficial.funcaptchaproxyless import funcaptchaProxyless
from anticaptchaofficial.geetestproxyless import geetestProxyless
from anticaptchaofficial.imagetocoordinates import imagetocoordinates
from anticaptchaofficial.turnstileproxyless import turnstileProxyless
from capmonstercloudclient import CapMonsterClient, ClientOptions
from capmonstercloudclient.requests import (
    AmazonWafRequest,
    FuncaptchaRequest,
    GeetestRequest,
    TurnstileRequest,
)
from capmonstercloudclient.requests.proxy_info import ProxyInfo
from python_anticaptcha import AnticaptchaClient, FunCaptchaProxylessTask
from twocaptcha import TwoCaptcha

from captcha_tasks_sandbox import (
    DEV_API_KEY,
    SandboxServer,
    coordinates_answer,
    dev_api_key,
)
from tests.support.sandbox_fixtures import trusted_certificate

from .test_official_json_clients import ANTICAPTCHA_URL, _ToSandbox

pytestmark = pytest.mark.integration

PAGE = "https://shop.example.com/login"
FUN_KEY = "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC"
FUN_HOST = "client-api.arkoselabs.com"
GEETEST_ID = "e392e1d7fd421dc63325744d5a2b9c73"
GEETEST_V4_KEYS = {"captcha_id", "lot_number", "pass_token", "gen_time", "captcha_output"}
AWS_KEY = "AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTbNg96AHDh0IR5vgzHNceHYqZR+GVAAAAfjB8"
AWS_IV = "CgAHbCe2GgAAAAAj"
AWS_CONTEXT = "qoJYgnKscYGpSGw2ZvhUFUV7ctVwTQm3hobZh7P3xg9VaL0P7aormh/dYYK+Y="
AWS_CHALLENGE = "https://41bcdd4fb3cb.610cd090.us-east-1.token.awswaf.com/41bcdd4fb3cb/challenge.js"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
AGENT = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/125.0 Safari/537.36"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
#: Anti-Captcha keeps a result only 60 s after it is solved: its SDKs' fixed 3 s first
#: wait must fall inside that (see test_official_json_clients.py).
ANTICAPTCHA_SCALE = 0.1

SandboxMaker = Callable[..., SandboxServer]


@pytest.fixture
def make_sandbox(
    sandbox_factory: Callable[..., SandboxServer],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> SandboxMaker:
    """``make(protocol, dialect, tls=True, time_scale=0.02)``: a sandbox whose https
    certificate chains to a test CA that ``requests`` trusts (REQUESTS_CA_BUNDLE)."""
    cert_path, key_path = trusted_certificate(tmp_path, monkeypatch)

    def make(
        protocol: str, dialect: str, tls: bool = True, time_scale: float = 0.02
    ) -> SandboxServer:
        fields: dict[str, Any] = {"tls_cert": str(cert_path), "tls_key": str(key_path)}
        return sandbox_factory(
            protocol=protocol, dialect=dialect, time_scale=time_scale, **(fields if tls else {})
        )

    return make


def verify(sandbox: SandboxServer, token: str) -> dict[str, Any]:
    """The sandbox's ``/siteverify`` verdict on ``token`` (a second use must fail)."""
    url = f"{sandbox.url}/siteverify"
    with requests.Session() as session:
        first: dict[str, Any] = session.post(url, data={"response": token}, timeout=5).json()
        again = session.post(url, data={"response": token}, timeout=5).json()
    assert first["success"] is True, first
    assert first["hostname"] == "shop.example.com"
    assert again == {"success": False, "error-codes": ["timeout-or-duplicate"]}
    return first


def assert_geetest_v4(answer: object) -> None:
    assert isinstance(answer, dict), answer
    assert set(answer) == GEETEST_V4_KEYS
    assert all(isinstance(value, str) and value for value in answer.values()), answer
    assert answer["captcha_id"] == GEETEST_ID


def assert_solved(sandbox: SandboxServer, by_type: dict[str, int]) -> None:
    stats = sandbox.stats()
    assert {kind: stats["by_type"].get(kind, 0) for kind in by_type} == by_type
    assert stats["solved"] == sum(by_type.values())
    assert stats["bad_key"] == 0


# --- 2Captcha: 2captcha-python (classic in.php / res.php) ----------------------------------


def _two_captcha(sandbox: SandboxServer, extended: bool) -> TwoCaptcha:
    # pollingInterval is truncated to int by the SDK: 1 s is its shortest pause.
    return TwoCaptcha(
        DEV_API_KEY,
        server=f"127.0.0.1:{sandbox.port}",
        pollingInterval=1,
        defaultTimeout=30,
        extendedResponse=extended or None,
    )


def test_2captcha_python_solves_the_new_token_types(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha")
    plain = _two_captcha(sandbox, extended=False)
    fun = plain.funcaptcha(sitekey=FUN_KEY, url=PAGE, surl=f"https://{FUN_HOST}")
    assert f"|pk={FUN_KEY}|" in fun["code"]
    verify(sandbox, fun["code"])

    # json=0: the answer after OK| is the object as JSON text; json=1: the object.
    extended = _two_captcha(sandbox, extended=True)
    geetest = extended.geetest_v4(captcha_id=GEETEST_ID, url=PAGE)
    assert_geetest_v4(geetest["code"])

    aws = extended.amazon_waf(
        sitekey=AWS_KEY, iv=AWS_IV, context=AWS_CONTEXT, url=PAGE, challenge_script=AWS_CHALLENGE
    )
    assert set(aws["code"]) == {"captcha_voucher", "existing_token"}
    verify(sandbox, aws["code"]["existing_token"])  # the aws-waf-token cookie
    assert_solved(sandbox, {"funcaptcha": 1, "geetest_v4": 1, "aws_waf": 1})


def test_2captcha_python_solves_turnstile_challenge_mode(make_sandbox: SandboxMaker) -> None:
    sandbox = make_sandbox("classic", "2captcha")
    # The useragent comes back as a top-level field of res.php's json=1 answer only.
    solver = _two_captcha(sandbox, extended=True)
    result = solver.turnstile(
        sitekey=TURNSTILE_KEY,
        url=PAGE,
        action="managed",
        data="cdata-42",
        pagedata="chl-page-data",
        useragent=AGENT,  # the SDK's documented spelling (its API docs say userAgent)
    )
    assert result["useragent"] == AGENT
    checked = verify(sandbox, result["code"])
    assert (checked["action"], checked["cdata"]) == ("managed", "cdata-42")


def test_2captcha_python_solves_coordinates(make_sandbox: SandboxMaker, tmp_path: Path) -> None:
    sandbox = make_sandbox("classic", "2captcha")
    points = coordinates_answer(PNG)
    image = tmp_path / "click.png"
    image.write_bytes(PNG)
    plain = _two_captcha(sandbox, extended=False).coordinates(
        str(image), textinstructions="click the cat"
    )
    text = ";".join(f"x={p['x']},y={p['y']}" for p in points)
    assert plain["code"] == f"coordinates:{text}"
    b64 = base64.b64encode(PNG).decode("ascii")
    extended = _two_captcha(sandbox, extended=True).coordinates(b64, hintText="click the cat")
    assert extended["code"] == [{"x": str(p["x"]), "y": str(p["y"])} for p in points]
    assert_solved(sandbox, {"coordinates": 2})


# --- Anti-Captcha: anticaptchaofficial (requests; URL hard-coded) --------------------------


@pytest.fixture
def anticaptcha_sandbox(
    make_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> Iterator[SandboxServer]:
    """The anticaptcha-dialect sandbox, reached by anticaptchaofficial through a session
    whose adapter rewrites only the hard-coded API host (test_official_json_clients.py)."""
    sandbox = make_sandbox("json", "anticaptcha", time_scale=ANTICAPTCHA_SCALE)
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


def test_anticaptchaofficial_solves_funcaptcha_and_geetest_v4(
    anticaptcha_sandbox: SandboxServer,
) -> None:
    sandbox = anticaptcha_sandbox
    # The SDK answers a failure with 0 and keeps the reason in err_string.
    fun = _configured(funcaptchaProxyless())
    fun.set_website_key(FUN_KEY)
    fun.set_js_api_domain(FUN_HOST)
    # No blob set: the SDK still sends "data": "" (and that must be accepted).
    token = fun.solve_and_return_solution()
    assert token != 0, fun.err_string
    verify(sandbox, token)
    fun.set_data_blob('{"blob":"Xq1.Zx9/k+="}')  # the SDK's docs: a JSON string
    blob_token = fun.solve_and_return_solution()
    assert blob_token != 0, fun.err_string
    verify(sandbox, blob_token)

    geetest = _configured(geetestProxyless())
    geetest.set_gt_key(GEETEST_ID)  # v4: gt carries the captcha id
    geetest.set_version(4)
    # Anti-Captcha's documented v4 example; no captcha_id in it.
    geetest.set_init_parameters({"riskType": "slide"})
    answer = geetest.solve_and_return_solution()
    assert answer != 0, geetest.err_string
    assert_geetest_v4(answer)
    assert_solved(sandbox, {"funcaptcha": 2, "geetest_v4": 1})


def test_anticaptchaofficial_solves_coordinates_and_turnstile_challenge(
    anticaptcha_sandbox: SandboxServer,
) -> None:
    sandbox = anticaptcha_sandbox
    clicks = _configured(imagetocoordinates())
    clicks.set_comment("click the cat")
    points = clicks.solve_and_return_solution(None, body=PNG)
    assert points == [[p["x"], p["y"]] for p in coordinates_answer(PNG)], clicks.err_string

    turnstile = _configured(turnstileProxyless())
    turnstile.set_website_key(TURNSTILE_KEY)
    turnstile.set_action("managed")
    turnstile.set_cdata("cdata-42")
    turnstile.set_chlpagedata("chl-page-data")
    token = turnstile.solve_and_return_solution()
    assert token != 0, turnstile.err_string
    checked = verify(sandbox, token)
    assert (checked["action"], checked["cdata"]) == ("managed", "cdata-42")
    assert turnstile.user_agent  # challenge mode: the solution carries the worker's agent
    assert_solved(sandbox, {"coordinates": 1, "turnstile": 1})


def test_anticaptchaofficial_solves_amazon_waf(anticaptcha_sandbox: SandboxServer) -> None:
    aws = _configured(amazonProxyless())
    aws.set_website_key(AWS_KEY)
    aws.set_iv(AWS_IV)
    aws.set_context(AWS_CONTEXT)
    aws.set_challenge_script(AWS_CHALLENGE)
    # Anti-Captcha answers the aws-waf-token cookie's value as solution["token"] (its
    # AmazonTaskProxyless page; the SDK reads that key).
    token = aws.solve_and_return_solution()
    assert token != 0, aws.err_string
    verify(anticaptcha_sandbox, token)


# --- Anti-Captcha: python-anticaptcha (ad-m) -----------------------------------------------


def test_python_anticaptcha_solves_funcaptcha(make_sandbox: SandboxMaker) -> None:
    # python-anticaptcha 2.0 has FunCaptcha only among the new types: its GeeTest tasks
    # always send a v3 task (challenge required; no version, no initParameters) and it has
    # no Amazon, coordinates or Turnstile task.
    sandbox = make_sandbox("json", "anticaptcha", time_scale=ANTICAPTCHA_SCALE)
    key = dev_api_key("anticaptcha")
    with AnticaptchaClient(key, host=f"127.0.0.1:{sandbox.port}", use_ssl=True) as client:
        job = client.createTask(FunCaptchaProxylessTask(PAGE, FUN_KEY, subdomain=FUN_HOST))
        job.join(maximum_time=30, backoff=True)
        verify(sandbox, job.get_token_response())
    assert_solved(sandbox, {"funcaptcha": 1})


# --- CapMonster Cloud: capmonstercloudclient -----------------------------------------------


def test_capmonstercloudclient_solves_the_new_types(make_sandbox: SandboxMaker) -> None:
    # Plain http: the SDK's aiohttp cannot be given the test CA (test_official_json_clients).
    sandbox = make_sandbox("json", "capmonster", tls=False)
    client = CapMonsterClient(
        ClientOptions(api_key=dev_api_key("capmonster"), service_url=sandbox.url)
    )
    # The SDK refuses a FuncaptchaRequest without a proxy (CapMonster's docs: optional).
    proxy = ProxyInfo(
        proxyType="http",
        proxyAddress="203.0.113.7",
        proxyPort=3128,
        proxyLogin="user",
        proxyPassword="pass",
    )
    requests_ = [
        FuncaptchaRequest(
            websiteUrl=PAGE,
            websitePublicKey=FUN_KEY,
            funcaptchaApiJSSubdomain=FUN_HOST,
            data='{"blob":"Xq1.Zx9/k+="}',
            userAgent=AGENT,
            proxy=proxy,
        ),
        GeetestRequest(websiteUrl=PAGE, gt=GEETEST_ID, version=4),
        # cookieSolution: CapMonster's docs answer the voucher pair without it.
        AmazonWafRequest(
            websiteUrl=PAGE,
            challengeScript=AWS_CHALLENGE,
            websiteKey=AWS_KEY,
            context=AWS_CONTEXT,
            iv=AWS_IV,
            cookieSolution=True,
        ),
        TurnstileRequest(
            websiteURL=PAGE,
            websiteKey=TURNSTILE_KEY,
            cloudflareTaskType="token",
            pageAction="managed",
            data="cdata-42",
            pageData="chl-page-data",
            userAgent=AGENT,
        ),
    ]

    async def solve(request: Any) -> dict[str, Any]:
        answer: dict[str, Any] = await client.solve_captcha(request)
        return answer

    # Each answer is checked as soon as it comes: the SDK's own waits (seconds, unscaled)
    # outlast a token's scaled lifetime.
    fun = asyncio.run(solve(requests_[0]))
    assert fun["userAgent"] == AGENT
    verify(sandbox, fun["token"])
    assert_geetest_v4(asyncio.run(solve(requests_[1])))
    aws = asyncio.run(solve(requests_[2]))
    assert set(aws) == {"cookies", "userAgent"}
    verify(sandbox, aws["cookies"]["aws-waf-token"])
    turnstile = asyncio.run(solve(requests_[3]))
    assert turnstile["userAgent"] == AGENT
    checked = verify(sandbox, turnstile["token"])
    assert (checked["action"], checked["cdata"]) == ("managed", "cdata-42")
    assert_solved(sandbox, {"funcaptcha": 1, "geetest_v4": 1, "aws_waf": 1, "turnstile": 1})


# --- CapSolver: capsolver (raw task dicts) -------------------------------------------------


def test_capsolver_sdk_solves_aws_waf_and_geetest_v4(
    make_sandbox: SandboxMaker, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CapSolver offers neither FunCaptcha, coordinates nor Turnstile challenge mode.
    sandbox = make_sandbox("json", "capsolver")
    monkeypatch.setattr(capsolver, "api_base", sandbox.url)
    monkeypatch.setattr(capsolver, "api_key", dev_api_key("capsolver"))
    aws = capsolver.solve(
        {
            "type": "AntiAwsWafTaskProxyLess",
            "websiteURL": PAGE,
            "awsKey": AWS_KEY,
            "awsIv": AWS_IV,
            "awsContext": AWS_CONTEXT,
            "awsChallengeJS": AWS_CHALLENGE,
        }
    )
    assert set(aws) == {"cookie"}
    verify(sandbox, aws["cookie"])
    geetest = capsolver.solve(
        {"type": "GeeTestTaskProxyLess", "websiteURL": PAGE, "captchaId": GEETEST_ID}
    )
    assert_geetest_v4(geetest)
    assert_solved(sandbox, {"aws_waf": 1, "geetest_v4": 1})
