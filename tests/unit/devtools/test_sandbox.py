"""The solver sandbox over real HTTP: protocol, timing, limits, billing, faults, tokens."""

from __future__ import annotations

import base64
import concurrent.futures
import hashlib
import http.client
import json
import logging
import random
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from captcha_tasks.errors import ConfigurationError
from captcha_tasks_sandbox import (
    DEFAULT_LATENCY,
    DEV_API_KEY,
    KINDS,
    SandboxConfig,
    SandboxServer,
    image_answer,
)
from captcha_tasks_sandbox.answers import grid_answer
from captcha_tasks_sandbox.protocol import NOT_OFFERED_METHODS
from tests.support.altcha_reference import create_challenge, verify_solution

GOOGLEKEY = "6LeIxAcTAAAAAJcZVRqyHh71UMIEGNQ_MXjiZKhI"
PAGEURL = "https://shop.example.com/login?next=/cart"
ALTCHA_KEY = "sandbox test key"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2
GIF = b"GIF89a" + bytes(200)
JPEG = b"\xff\xd8\xff\xe0" + bytes(300)
SCALE = 0.01  # recaptcha_v2 takes 0.15 s, an image 0.03 s

SUBMITS: dict[str, dict[str, str]] = {
    "recaptcha_v2": {"method": "userrecaptcha", "googlekey": GOOGLEKEY, "pageurl": PAGEURL},
    "recaptcha_v3": {
        "method": "userrecaptcha",
        "googlekey": GOOGLEKEY,
        "pageurl": PAGEURL,
        "version": "v3",
        "action": "login",
        "min_score": "0.7",
    },
    "turnstile": {
        "method": "turnstile",
        "sitekey": "0x4AAAAAAAC3DHQFLr1GavRN",
        "pageurl": PAGEURL,
        "action": "signup",
        "data": "cdata-42",
    },
    "image": {"method": "base64", "body": base64.b64encode(PNG).decode(), "numeric": "0"},
    "geetest": {
        "method": "geetest",
        "gt": "81dc9bdb52d04dc20036dbd8313ed055",
        "challenge": "d93591bdf7860e1e4ee2fca799911215",
        "pageurl": PAGEURL,
        "api_server": "api-na.geetest.com",
    },
    "hcaptcha": {
        "method": "hcaptcha",
        "sitekey": "10000000-ffff-ffff-ffff-000000000001",
        "pageurl": PAGEURL,
    },
    "funcaptcha": {
        "method": "funcaptcha",
        "publickey": "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC",
        "pageurl": PAGEURL,
        "surl": "https://client-api.arkoselabs.com",
    },
    "geetest_v4": {
        "method": "geetest_v4",
        "captcha_id": "e392e1d7fd421dc63325744d5a2b9c73",
        "pageurl": PAGEURL,
    },
    "aws_waf": {
        "method": "amazon_waf",
        "sitekey": "AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTp9mmBQG==",
        "iv": "CgAHbCe2GgAAAAAj",
        "context": "9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6flVbuFxm3gy==",
        "pageurl": PAGEURL,
    },
    "coordinates": {
        "method": "base64",
        "coordinatescaptcha": "1",
        "body": base64.b64encode(PNG).decode(),
        "textinstructions": "click the cats",
    },
    "grid": {
        "method": "base64",
        "recaptcha": "1",
        "body": base64.b64encode(PNG).decode(),
        "textinstructions": "Select all images with buses",
        "recaptcharows": "4",
        "recaptchacols": "4",
    },
    "mtcaptcha": {"method": "mt_captcha", "sitekey": "MTPublic-KzqLY1cKH", "pageurl": PAGEURL},
    "prosopo": {
        "method": "prosopo",
        "sitekey": "5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm",
        "pageurl": PAGEURL,
    },
    "friendly_captcha": {
        "method": "friendly_captcha",
        "sitekey": "FCMDESUD3M34857N",
        "pageurl": PAGEURL,
    },
    "altcha": {
        "method": "altcha",
        "pageurl": PAGEURL,
        "challenge_json": json.dumps(create_challenge(ALTCHA_KEY, 777)),
    },
    "datadome": {
        "method": "datadome",
        "captcha_url": "https://geo.captcha-delivery.com/captcha/?initialCid=AHrl&cid=6Q&t=fe",
        "pageurl": PAGEURL,
        "userAgent": "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0",
        "proxy": "user:pw@10.1.2.3:8080",
        "proxytype": "HTTP",
    },
    "cloudflare_challenge": {
        "method": "cloudflare_challenge",
        "pageurl": PAGEURL,
        "proxy": "user:pw@10.1.2.3:8080",
        "proxytype": "HTTP",
    },
    "binance": {
        "method": "binance",
        "sitekey": "login",
        "pageurl": PAGEURL,
        "validate_id": "cb0bfefa598b4d3a8e3f6a40b5a7e9c1",
    },
    "tencent": {"method": "tencent", "app_id": "189123456", "pageurl": PAGEURL},
    "yidun": {"method": "yidun", "sitekey": "07e2387ab53a4d6f930b8d9a9be71bdf", "pageurl": PAGEURL},
}


class Api:
    """A requests session speaking in.php/res.php to one sandbox."""

    def __init__(self, server: SandboxServer) -> None:
        self.server = server
        self.url = server.url
        self.session = requests.Session()

    def close(self) -> None:
        self.session.close()

    def submit(
        self, files: dict[str, Any] | None = None, key: str = DEV_API_KEY, **params: Any
    ) -> requests.Response:
        return self.session.post(
            f"{self.url}/in.php", data={"key": key, **params}, files=files, timeout=5
        )

    def res(self, key: str = DEV_API_KEY, **params: Any) -> requests.Response:
        return self.session.get(f"{self.url}/res.php", params={"key": key, **params}, timeout=5)

    def submit_ok(self, **params: Any) -> int:
        document = self.submit(json=1, **params).json()
        assert document["status"] == 1, document
        assert isinstance(document["request"], int)
        return int(document["request"])

    def wait(self, captcha_id: int, timeout: float = 5.0) -> dict[str, Any]:
        """Poll (json) until the captcha is no longer CAPCHA_NOT_READY."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            document: dict[str, Any] = self.res(action="get", id=captcha_id, json=1).json()
            if document["request"] != "CAPCHA_NOT_READY":
                return document
            time.sleep(0.005)
        raise AssertionError(f"captcha {captcha_id} not ready after {timeout} s")

    def answer(self, captcha_id: int) -> Any:
        document = self.wait(captcha_id)
        assert document["status"] == 1, document
        return document["request"]

    def verify(self, token: str, **fields: str) -> dict[str, Any]:
        reply = self.session.post(
            f"{self.url}/siteverify", data={"response": token, "secret": "s", **fields}, timeout=5
        )
        assert reply.status_code == 200
        return dict(reply.json())

    def admin(self, **changes: Any) -> requests.Response:
        return self.session.post(f"{self.url}/admin/config", json=changes, timeout=5)

    def stats(self) -> dict[str, Any]:
        return dict(self.session.get(f"{self.url}/stats", timeout=5).json())

    def captchas(self) -> list[dict[str, Any]]:
        reply = self.session.get(f"{self.url}/admin/captchas", timeout=5)
        assert reply.status_code == 200
        return list(reply.json()["captchas"])


@pytest.fixture
def make_api(sandbox_factory: Callable[..., SandboxServer]) -> Iterator[Callable[..., Api]]:
    """Start a sandbox (time scale 0.01 unless given) and open a session to it."""
    apis: list[Api] = []

    def make(**config: Any) -> Api:
        api = Api(sandbox_factory(**{"time_scale": SCALE, **config}))
        apis.append(api)
        return api

    yield make
    for api in apis:
        api.close()


@pytest.fixture
def api(make_api: Callable[..., Api]) -> Api:
    return make_api()


def error_of(reply: requests.Response) -> str:
    document = reply.json()
    assert document["status"] == 0, document
    return str(document["request"])


# -- solving ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_answered_after_its_scaled_latency(
    make_api: Callable[..., Api], kind: str
) -> None:
    # CaptchaAI (the sandbox's default dialect) has neither Altcha, DataDome nor Yidun:
    # 2Captcha's has.
    api = make_api(
        jitter=0.0,
        **({"dialect": "2captcha"} if kind in NOT_OFFERED_METHODS["captchaai"] else {}),
    )
    started = time.monotonic()
    captcha_id = api.submit_ok(**SUBMITS[kind])
    answer = api.answer(captcha_id)
    elapsed = time.monotonic() - started
    latency = DEFAULT_LATENCY[kind] * SCALE
    assert latency <= elapsed < latency + 2.0
    if kind == "image":
        assert answer == hashlib.sha256(PNG).hexdigest()[:6].upper() == image_answer(PNG)
    elif kind == "geetest":
        assert set(answer) == {"geetest_challenge", "geetest_validate", "geetest_seccode"}
        assert answer["geetest_challenge"].startswith(SUBMITS["geetest"]["challenge"])
        assert answer["geetest_seccode"] == answer["geetest_validate"] + "|jordan"
    elif kind == "grid":
        assert answer == grid_answer(PNG, 16) and answer.startswith("click:")
    elif kind == "tencent":
        # 2Captcha's TencentTask answer (python-rucaptcha), res.php's assumed the same.
        assert set(answer) == {"appid", "ret", "ticket", "randstr"} and answer["ret"] == 0
        assert answer["appid"] == "189123456" and answer["ticket"].startswith("tr03")
    elif kind in ("geetest_v4", "aws_waf", "coordinates", "funcaptcha"):
        assert answer  # shapes: test_sandbox_newtypes.py
    elif kind == "altcha":
        assert verify_solution(answer, ALTCHA_KEY)  # a real payload, not a random token
    elif kind == "datadome":
        # 2Captcha's res.php answer: the cookie's Set-Cookie line.
        assert re.fullmatch(r"datadome=[A-Za-z0-9_~]{100,}; Max-Age=31536000; .*", answer)
    elif kind == "cloudflare_challenge":
        # CaptchaAI's answer (CaptchaAI-Examples): the cf_clearance value, Cloudflare's shape.
        assert re.fullmatch(r"[A-Za-z0-9_-]{43}-\d{10}-1\.2\.1\.1-[A-Za-z0-9_-]{160}", answer)
    elif kind in ("mtcaptcha", "prosopo", "friendly_captcha", "yidun", "binance"):
        prefixes = {
            "mtcaptcha": "v1(",
            "prosopo": "0x0001",
            "yidun": "CN31_",
            "binance": "captcha#",
        }
        prefix = prefixes.get(kind, "72b43902")
        assert isinstance(answer, str) and answer.startswith(prefix), answer
        assert len(answer) > 100 and "ERROR" not in answer.upper()
    else:
        assert isinstance(answer, str)
        assert len(answer) >= 300
        assert "ERROR" not in answer.upper()
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+", answer)
    stats = api.stats()
    assert stats["submitted"] == stats["solved"] == 1
    assert stats["by_type"][kind] == 1
    assert stats["in_flight"] == 0


def test_not_ready_until_the_ready_time_then_answered(make_api: Callable[..., Api]) -> None:
    api = make_api(latency={"recaptcha_v2": 40.0}, jitter=0.0)  # 0.4 s
    captcha_id = api.submit_ok(**SUBMITS["recaptcha_v2"])
    assert api.res(action="get", id=captcha_id).text == "CAPCHA_NOT_READY"
    not_ready = api.res(action="get", id=captcha_id, json=1).json()
    assert not_ready == {"status": 0, "request": "CAPCHA_NOT_READY"}
    assert api.stats()["in_flight"] == 1
    assert api.answer(captcha_id).startswith("03AFcWeA")
    assert api.stats()["polls"] >= 3


def test_plain_mode_shapes(api: Api) -> None:
    reply = api.submit(**SUBMITS["image"])
    assert reply.headers["Content-Type"].startswith("text/plain")
    assert re.fullmatch(r"OK\|\d{10}", reply.text)
    image_id = reply.text[3:]
    geetest_id = api.submit(**SUBMITS["geetest"]).text[3:]
    api.wait(int(geetest_id))
    assert api.res(action="get", id=image_id).text == f"OK|{image_answer(PNG)}"
    geetest = api.res(action="get", id=geetest_id).text
    assert geetest.startswith("OK|{") and " " not in geetest
    assert set(json.loads(geetest[3:])) == {
        "geetest_challenge",
        "geetest_validate",
        "geetest_seccode",
    }
    assert api.submit(method="nope").text == "ERROR_BAD_PARAMETERS"


def test_json_mode_ids_are_integers_and_errors_carry_text(api: Api) -> None:
    reply = api.submit(json=1, **SUBMITS["turnstile"])
    assert reply.headers["Content-Type"] == "application/json"
    assert isinstance(reply.json()["request"], int)
    assert re.fullmatch(r'\{"status":1,"request":\d{10}\}', reply.text)
    error = api.submit(json=1, method="userrecaptcha", pageurl=PAGEURL).json()
    assert error["status"] == 0
    assert error["request"] == "ERROR_GOOGLEKEY"
    assert error["error_text"]


def test_submit_by_get_query_and_merged_query_and_body(api: Api) -> None:
    query = {"key": DEV_API_KEY, "json": "1", **SUBMITS["recaptcha_v2"]}
    reply = api.session.get(f"{api.url}/in.php", params=query, timeout=5)
    assert reply.json()["status"] == 1
    reply = api.session.post(
        f"{api.url}/in.php?key={DEV_API_KEY}&json=1", data=SUBMITS["hcaptcha"], timeout=5
    )
    assert reply.json()["status"] == 1
    assert api.stats()["by_type"]["hcaptcha"] == 1


def test_multipart_images_keep_their_bytes_and_hints_shape_the_answer(api: Api) -> None:
    rng = random.Random(7)
    image = b"\x89PNG\r\n\x1a\n" + rng.randbytes(5000) + b"\r\n--\r\n\r\n" + rng.randbytes(99)
    plain_id = api.submit_ok(method="post", files={"file": ("captcha.png", image)})
    numeric_id = api.submit_ok(
        method="post", numeric="1", min_len="8", files={"file": ("c.png", image)}
    )
    assert api.answer(plain_id) == image_answer(image)
    assert api.answer(numeric_id) == image_answer(image, {"numeric": "1", "min_len": "8"})
    gif_id = api.submit_ok(method="post", files={"file": ("c.gif", GIF)})
    jpeg_id = api.submit_ok(method="base64", body=base64.b64encode(JPEG).decode())
    assert api.answer(gif_id) == image_answer(GIF)
    assert api.answer(jpeg_id) == image_answer(JPEG)


def test_image_answer_is_documented_and_deterministic() -> None:
    digest = hashlib.sha256(PNG).hexdigest()
    assert image_answer(PNG) == digest[:6].upper()
    assert image_answer(PNG, {"numeric": "1"}) == str(int(digest, 16))[:6]
    assert image_answer(PNG, {"numeric": "2"}).isalpha()
    assert len(image_answer(PNG, {"min_len": "9"})) == 9
    assert len(image_answer(PNG, {"max_len": "4"})) == 4


def test_official_client_extras_are_ignored(api: Api) -> None:
    extras = {"soft_id": "4580", "version": "v2", "enterprise": "0", "invisible": "1"}
    captcha_id = api.submit_ok(**SUBMITS["recaptcha_v2"], **extras)
    assert api.answer(captcha_id).startswith("03AFcWeA")


def test_proxies_are_validated(api: Api) -> None:
    good = {"proxy": "user:pa55@10.0.0.1:3128", "proxytype": "socks5"}
    assert api.submit(json=1, **SUBMITS["turnstile"], **good).json()["status"] == 1
    assert api.submit(json=1, **SUBMITS["hcaptcha"], proxy="10.0.0.1:8080").json()["status"] == 1
    for bad in (
        {"proxy": "not a proxy", "proxytype": "HTTP"},
        {"proxy": "10.0.0.1:99999", "proxytype": "HTTP"},
        {"proxy": "user:pw@10.0.0.1:3128", "proxytype": "FTP"},
    ):
        assert error_of(api.submit(json=1, **SUBMITS["recaptcha_v2"], **bad)) == "ERROR_BAD_PROXY"


# -- errors -------------------------------------------------------------------------

B64 = base64.b64encode


@pytest.mark.parametrize(
    ("params", "files", "code"),
    [
        ({"method": "userrecaptcha", "pageurl": PAGEURL}, None, "ERROR_GOOGLEKEY"),
        (
            {"method": "userrecaptcha", "googlekey": "bad key!", "pageurl": PAGEURL},
            None,
            "ERROR_WRONG_GOOGLEKEY",
        ),
        ({"method": "userrecaptcha", "googlekey": GOOGLEKEY}, None, "ERROR_PAGEURL"),
        (
            {"method": "userrecaptcha", "googlekey": GOOGLEKEY, "pageurl": "example.com"},
            None,
            "ERROR_PAGEURL",
        ),
        (
            {"method": "userrecaptcha", "googlekey": GOOGLEKEY, "pageurl": "ftp://example.com/"},
            None,
            "ERROR_PAGEURL",
        ),
        ({**SUBMITS["recaptcha_v2"], "version": "v9"}, None, "ERROR_BAD_PARAMETERS"),
        ({**SUBMITS["recaptcha_v3"], "min_score": "high"}, None, "ERROR_BAD_PARAMETERS"),
        ({"method": "turnstile", "pageurl": PAGEURL}, None, "ERROR_BAD_PARAMETERS"),
        ({**SUBMITS["hcaptcha"], "pageurl": "javascript:alert(1)"}, None, "ERROR_PAGEURL"),
        ({**SUBMITS["geetest"], "challenge": ""}, None, "ERROR_BAD_PARAMETERS"),
        ({"method": "base64", "body": ""}, None, "ERROR_ZERO_CAPTCHA_FILESIZE"),
        ({"method": "base64", "body": "!!not base64!!"}, None, "ERROR_UPLOAD"),
        ({"method": "base64", "body": B64(PNG[:60]).decode()}, None, "ERROR_ZERO_CAPTCHA_FILESIZE"),
        (
            {"method": "base64", "body": B64(PNG + bytes(100_000)).decode()},
            None,
            "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
        ),
        (
            {"method": "base64", "body": B64(b"BM" + bytes(500)).decode()},
            None,
            "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
        ),
        ({**SUBMITS["image"], "numeric": "9"}, None, "ERROR_BAD_PARAMETERS"),
        ({"method": "post"}, None, "ERROR_ZERO_CAPTCHA_FILESIZE"),
        ({"method": "post"}, {"file": ("c.png", b"")}, "ERROR_ZERO_CAPTCHA_FILESIZE"),
        ({"method": "post"}, {"file": ("c.bmp", PNG)}, "ERROR_WRONG_FILE_EXTENSION"),
        ({"method": "post"}, {"file": ("c.png", b"x" * 500)}, "ERROR_IMAGE_TYPE_NOT_SUPPORTED"),
        (
            {"method": "post"},
            {"file": ("c.png", PNG + bytes(100_000))},
            "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
        ),
        ({}, None, "ERROR_BAD_PARAMETERS"),
        ({"method": "funcaptcha"}, None, "ERROR_BAD_PARAMETERS"),
    ],
)
def test_submit_parameter_errors(
    api: Api, params: dict[str, str], files: dict[str, Any] | None, code: str
) -> None:
    assert api.submit(files=files, **params).text == code
    document = api.submit(files=files, json=1, **params).json()
    assert document == {"status": 0, "request": code, "error_text": document["error_text"]}
    stats = api.stats()
    assert stats["param_errors"] == 2
    assert stats["submitted"] == 0


def test_image_size_limits_are_configurable(make_api: Callable[..., Api]) -> None:
    api = make_api(max_image_bytes=1000, min_image_bytes=1)
    assert api.submit(method="post", files={"file": ("a.gif", b"GIF89a")}).text.startswith("OK|")
    big = {"file": ("a.png", PNG + bytes(1000 - len(PNG) + 1))}
    assert api.submit(method="post", files=big).text == "ERROR_TOO_BIG_CAPTCHA_FILESIZE"


def test_keys(make_api: Callable[..., Api]) -> None:
    extra = "A1" * 16
    api = make_api(api_keys=(extra,))
    assert api.submit(key="short", **SUBMITS["image"]).text == "ERROR_WRONG_USER_KEY"
    assert api.submit(key="", **SUBMITS["image"]).text == "ERROR_WRONG_USER_KEY"
    assert api.submit(key="-" * 32, **SUBMITS["image"]).text == "ERROR_WRONG_USER_KEY"
    assert api.submit(key="b" * 32, **SUBMITS["image"]).text == "ERROR_KEY_DOES_NOT_EXIST"
    assert api.res(key="b" * 32, action="getbalance").text == "ERROR_KEY_DOES_NOT_EXIST"
    assert api.submit(key=extra, **SUBMITS["image"]).text.startswith("OK|")
    stats = api.stats()
    assert stats["bad_key"] == 5
    assert stats["submitted"] == 1


def test_res_php_errors(api: Api) -> None:
    assert api.res().text == "ERROR_EMPTY_ACTION"
    assert api.res(action="get").text == "ERROR_WRONG_ID_FORMAT"
    assert api.res(action="get", id="12ab").text == "ERROR_WRONG_ID_FORMAT"
    assert api.res(action="get", id="1234567890").text == "ERROR_WRONG_CAPTCHA_ID"
    assert api.res(action="frobnicate").text == "ERROR_BAD_PARAMETERS"
    assert error_of(api.res(action="get", id="x", json=1)) == "ERROR_WRONG_ID_FORMAT"


# -- threads, billing ---------------------------------------------------------------


def test_thread_limit_holds_until_the_ready_time_collected_or_not(
    make_api: Callable[..., Api],
) -> None:
    api = make_api(threads=2, latency={"image": 50.0}, jitter=0.0)  # 0.5 s
    first = api.submit_ok(**SUBMITS["image"])
    api.submit_ok(**SUBMITS["image"])
    assert api.submit(**SUBMITS["image"]).text == "ERROR_NO_SLOT_AVAILABLE"
    assert error_of(api.submit(json=1, **SUBMITS["image"])) == "ERROR_NO_SLOT_AVAILABLE"
    stats = api.stats()
    assert (stats["in_flight"], stats["max_in_flight"], stats["no_slot"]) == (2, 2, 2)
    api.wait(first)  # the second one is never collected: it frees its thread all the same
    deadline = time.monotonic() + 5
    while api.stats()["in_flight"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert api.stats()["in_flight"] == 0
    api.submit_ok(**SUBMITS["image"])
    api.submit_ok(**SUBMITS["image"])
    stats = api.stats()
    assert (stats["in_flight"], stats["max_in_flight"], stats["submitted"]) == (2, 2, 4)


def test_concurrent_submits_never_exceed_the_thread_limit(make_api: Callable[..., Api]) -> None:
    api = make_api(threads=3, latency={"image": 300.0})  # 3 s: nothing frees during the burst

    def submit(_: int) -> str:
        data = {"key": DEV_API_KEY, **SUBMITS["image"]}
        return requests.post(f"{api.url}/in.php", data=data, timeout=5).text

    with concurrent.futures.ThreadPoolExecutor(max_workers=10) as pool:
        answers = list(pool.map(submit, range(30)))
    assert sum(a.startswith("OK|") for a in answers) == 3
    assert answers.count("ERROR_NO_SLOT_AVAILABLE") == 27
    stats = api.stats()
    assert (stats["in_flight"], stats["max_in_flight"], stats["no_slot"]) == (3, 3, 27)


def test_over_limit_code_can_be_captchaais_zero_balance(make_api: Callable[..., Api]) -> None:
    api = make_api(threads=1, over_limit_code="ERROR_ZERO_BALANCE", latency={"image": 300.0})
    api.submit_ok(**SUBMITS["image"])
    assert api.submit(**SUBMITS["image"]).text == "ERROR_ZERO_BALANCE"
    assert api.stats()["no_slot"] == 1


def test_getbalance_in_both_modes(make_api: Callable[..., Api]) -> None:
    api = make_api(balance=12.34)
    assert api.res(action="getbalance").text == "12.3400"
    assert api.res(action="getbalance", json=1).json() == {"status": 1, "request": "12.3400"}
    assert api.stats()["balance_calls"] == 2


def test_2captcha_dialect_bills_and_refuses_without_funds(make_api: Callable[..., Api]) -> None:
    api = make_api(dialect="2captcha", balance=0.005, price=0.003)
    api.submit_ok(**SUBMITS["image"])
    assert api.res(action="getbalance").text == "0.0020"
    document = api.submit(json=1, **SUBMITS["image"]).json()
    assert document["request"] == "ERROR_ZERO_BALANCE"
    assert "error_text" in document
    assert api.stats()["zero_balance"] == 1


def test_captchaai_dialect_balance_is_informational(make_api: Callable[..., Api]) -> None:
    api = make_api(balance=0.0)
    api.submit_ok(**SUBMITS["image"])
    api.submit_ok(**SUBMITS["image"])
    assert api.res(action="getbalance").text == "0.0000"


# -- faults -------------------------------------------------------------------------


def test_unsolvable_captchas_fail_at_their_ready_time_unbilled(
    make_api: Callable[..., Api],
) -> None:
    api = make_api(unsolvable_rate=1.0, dialect="2captcha", balance=1.0, price=0.5)
    captcha_id = api.submit_ok(**SUBMITS["recaptcha_v2"])
    assert api.res(action="getbalance").text == "0.5000"
    assert api.wait(captcha_id)["request"] == "ERROR_CAPTCHA_UNSOLVABLE"
    assert api.res(action="get", id=captcha_id).text == "ERROR_CAPTCHA_UNSOLVABLE"
    assert api.res(action="getbalance").text == "1.0000"
    stats = api.stats()
    assert (stats["unsolvable"], stats["solved"]) == (1, 0)


def test_fail_rate_serves_html_502_pages(make_api: Callable[..., Api]) -> None:
    api = make_api(fail_rate=1.0)
    for reply in (api.submit(**SUBMITS["image"]), api.res(action="getbalance")):
        assert reply.status_code == 502
        assert reply.headers["Content-Type"].startswith("text/html")
        assert "502 Bad Gateway" in reply.text
    assert api.session.get(f"{api.url}/healthz", timeout=5).json() == {"ok": True}
    stats = api.stats()
    assert (stats["errors_injected"], stats["submitted"]) == (2, 0)
    assert api.admin(fail_rate=0.0).status_code == 200
    assert api.submit(**SUBMITS["image"]).status_code == 200


def test_slow_answers_beat_client_timeouts_but_take_effect(make_api: Callable[..., Api]) -> None:
    api = make_api(slow_rate=1.0, slow_seconds=2.0)
    started = time.monotonic()
    with pytest.raises(requests.ReadTimeout):
        api.session.post(
            f"{api.url}/in.php", data={"key": DEV_API_KEY, **SUBMITS["image"]}, timeout=0.3
        )
    assert time.monotonic() - started < 1.5
    stats = api.stats()
    assert (stats["slow_injected"], stats["submitted"]) == (1, 1)


def test_fault_injection_is_reproducible_with_a_seed(make_api: Callable[..., Api]) -> None:
    def run() -> list[int]:
        api = make_api(fail_rate=0.5, seed=1234)
        return [api.res(action="getbalance").status_code for _ in range(40)]

    first = run()
    assert first == run()
    assert 5 < first.count(502) < 35


# -- tokens -------------------------------------------------------------------------


def test_tokens_verify_once(api: Api) -> None:
    token = api.answer(api.submit_ok(**SUBMITS["recaptcha_v2"]))
    first = api.verify(token, remoteip="127.0.0.1")
    assert first["success"] is True
    assert first["hostname"] == "shop.example.com"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", first["challenge_ts"])
    assert "score" not in first
    assert api.verify(token) == {"success": False, "error-codes": ["timeout-or-duplicate"]}
    assert api.verify("03AFcWeAunknown") == {
        "success": False,
        "error-codes": ["invalid-input-response"],
    }
    assert api.verify("")["error-codes"] == ["missing-input-response"]
    stats = api.stats()
    assert (stats["tokens_verified"], stats["tokens_rejected"]) == (1, 3)


def test_v3_and_turnstile_verdicts_carry_action_score_and_cdata(api: Api) -> None:
    v3 = api.verify(api.answer(api.submit_ok(**SUBMITS["recaptcha_v3"])))
    assert (v3["success"], v3["action"], v3["score"]) == (True, "login", 0.7)
    turnstile_token = api.answer(api.submit_ok(**SUBMITS["turnstile"]))
    mismatch = api.verify(turnstile_token, sitekey="0x4AAAAAAAotherkey")
    assert mismatch["success"] is False
    turnstile = api.verify(turnstile_token, sitekey=SUBMITS["turnstile"]["sitekey"])
    assert (turnstile["action"], turnstile["cdata"]) == ("signup", "cdata-42")
    hcaptcha = api.verify(api.answer(api.submit_ok(**SUBMITS["hcaptcha"])))
    assert hcaptcha["success"] is True


def test_tokens_expire_at_their_scaled_lifetime(make_api: Callable[..., Api]) -> None:
    scale = 0.005  # reCAPTCHA lives 0.6 s, Turnstile 1.5 s
    api = make_api(time_scale=scale, jitter=0.0)
    ids = {
        name: api.submit_ok(**SUBMITS[kind])
        for name, kind in (("early", "recaptcha_v2"), ("late", "recaptcha_v2"))
    }
    turnstile_id = api.submit_ok(**SUBMITS["turnstile"])
    tokens = {name: api.answer(captcha_id) for name, captcha_id in ids.items()}
    ready = time.monotonic()  # both reCAPTCHAs were ready before this moment
    turnstile_token = api.answer(turnstile_id)
    time.sleep(max(0.0, ready + 0.25 - time.monotonic()))
    assert api.verify(tokens["early"])["success"] is True
    time.sleep(max(0.0, ready + 120 * scale + 0.1 - time.monotonic()))
    assert api.verify(tokens["late"]) == {
        "success": False,
        "error-codes": ["timeout-or-duplicate"],
    }
    assert api.verify(turnstile_token)["success"] is True  # 300 s, not 120 s


# -- reports ------------------------------------------------------------------------


def test_reports_once_per_captcha_within_the_window(make_api: Callable[..., Api]) -> None:
    api = make_api(report_window=50.0, jitter=0.0, latency={"recaptcha_v2": 300.0})  # 0.5 s
    good, bad, late = (api.submit_ok(**SUBMITS["image"]) for _ in range(3))
    submitted = time.monotonic()
    pending = api.submit_ok(**SUBMITS["recaptcha_v2"])
    api.wait(late)
    assert api.res(action="reportgood", id=good).text == "OK_REPORT_RECORDED"
    assert api.res(action="reportbad", id=good).text == "ERROR_DUPLICATE_REPORT"
    bad_report = api.res(action="reportbad", id=bad, json=1).json()
    assert bad_report == {"status": 1, "request": "OK_REPORT_RECORDED"}
    assert api.res(action="reportbad", id=pending).text == "ERROR_REPORT_NOT_RECORDED"
    time.sleep(max(0.0, submitted + 0.55 - time.monotonic()))
    assert api.res(action="reportbad", id=late).text == "ERROR_REPORT_NOT_RECORDED"
    assert api.res(action="reportbad", id="42").text == "ERROR_WRONG_CAPTCHA_ID"
    assert api.res(action="reportgood", id="x").text == "ERROR_WRONG_ID_FORMAT"
    stats = api.stats()
    assert (stats["reports_good"], stats["reports_bad"], stats["reports_refused"]) == (1, 1, 3)


# -- multi-get, duplicates, admin ---------------------------------------------------


def test_get_many_ids(make_api: Callable[..., Api]) -> None:
    api = make_api(latency={"recaptcha_v2": 300.0})
    first = api.submit_ok(**SUBMITS["image"])
    second = api.submit_ok(method="base64", body=base64.b64encode(GIF).decode())
    slow = api.submit_ok(**SUBMITS["recaptcha_v2"])
    api.wait(first)
    api.wait(second)
    ids = f"{first},{second},{slow},1234567890"
    expected = f"{image_answer(PNG)}|{image_answer(GIF)}|CAPCHA_NOT_READY|ERROR_WRONG_CAPTCHA_ID"
    assert api.res(action="get", ids=ids).text == expected
    assert api.res(action="get", ids=ids, json=1).json() == {"status": 1, "request": expected}
    assert api.res(action="get", ids=f"{first},abc").text == "ERROR_WRONG_ID_FORMAT"


def test_duplicates_count_equal_parameters(make_api: Callable[..., Api]) -> None:
    api = make_api(threads=10)
    api.submit_ok(**SUBMITS["recaptcha_v2"], soft_id="1")
    assert api.submit(**SUBMITS["recaptcha_v2"], soft_id="2", header_acao="1").text[:3] == "OK|"
    api.submit_ok(**{**SUBMITS["recaptcha_v2"], "pageurl": "https://other.example.com/"})
    api.submit_ok(**SUBMITS["image"])
    api.submit_ok(method="post", files={"file": ("a.png", PNG)})
    api.submit_ok(method="post", files={"file": ("a.png", PNG)})
    assert api.stats()["duplicates"] == 2


def test_admin_config_changes_the_running_sandbox(api: Api) -> None:
    reply = api.admin(threads=1, latency={"image": 300.0}, balance=7.5)
    assert reply.status_code == 200
    assert reply.json()["config"]["threads"] == 1
    api.submit_ok(**SUBMITS["image"])
    assert api.submit(**SUBMITS["image"]).text == "ERROR_NO_SLOT_AVAILABLE"
    assert api.res(action="getbalance").text == "7.5000"
    assert api.admin(over_limit_code="ERROR_ZERO_BALANCE").status_code == 200
    assert api.submit(**SUBMITS["image"]).text == "ERROR_ZERO_BALANCE"
    assert api.admin(threads=5, dialect="2captcha", balance=0).status_code == 200
    assert api.submit(**SUBMITS["image"]).text == "ERROR_ZERO_BALANCE"
    current = api.session.get(f"{api.url}/admin/config", timeout=5).json()["config"]
    assert (current["dialect"], current["latency"]["image"], current["api_keys"]) == (
        "2captcha",
        300.0,
        0,
    )
    for bad in ({"threads": "many"}, {"threads": 0}, {"fail_rate": 2}, {"port": 1}):
        reply = api.admin(**bad)
        assert reply.status_code == 400
        assert reply.json()["ok"] is False
    raw = api.session.post(f"{api.url}/admin/config", data=b"not json", timeout=5)
    assert raw.status_code == 400


def test_admin_reset_zeroes_the_counters(make_api: Callable[..., Api]) -> None:
    api = make_api(latency={"image": 300.0})
    api.submit_ok(**SUBMITS["image"])
    api.submit_ok(**SUBMITS["image"])
    api.res(action="getbalance")
    assert api.session.post(f"{api.url}/admin/reset", timeout=5).json() == {"ok": True}
    stats = api.stats()
    assert stats["submitted"] == stats["duplicates"] == stats["balance_calls"] == 0
    assert sum(stats["by_type"].values()) == 0
    assert (stats["in_flight"], stats["max_in_flight"]) == (2, 2)
    api.submit_ok(**SUBMITS["image"])
    assert api.stats()["duplicates"] == 0


def test_admin_captchas_lists_submit_ready_and_first_answer_times(
    make_api: Callable[..., Api],
) -> None:
    api = make_api(latency={"recaptcha_v2": 40.0, "image": 300.0}, jitter=0.0)  # 0.4 s, 3 s
    assert api.captchas() == []
    started = time.time()
    solved = api.submit_ok(**SUBMITS["recaptcha_v2"])
    idle = api.submit_ok(**SUBMITS["recaptcha_v2"])  # never asked for
    pending = api.submit_ok(**SUBMITS["image"])  # asked for, never ready
    polls = 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        polls += 1
        if api.res(action="get", id=solved).text != "CAPCHA_NOT_READY":
            break
        time.sleep(0.02)
    first_answered = time.time()
    assert polls >= 2  # at least one CAPCHA_NOT_READY before the answer
    joined = api.res(action="get", ids=f"{solved},{pending}").text  # one more ask for each
    assert joined.endswith("|CAPCHA_NOT_READY")
    listed = api.captchas()
    assert [c["id"] for c in listed] == [str(solved), str(idle), str(pending)]  # submit order
    by_id = {c["id"]: c for c in listed}
    slack = 0.01  # epoch conversion and rounding to the microsecond
    done = by_id[str(solved)]
    assert done["kind"] == "recaptcha_v2"
    assert done["unsolvable"] is False
    assert started - slack <= done["submitted_at"] <= done["ready_at"] <= done["answered_at"]
    assert done["answered_at"] <= first_answered + slack  # the first answer, not the last
    assert done["ready_at"] - done["submitted_at"] == pytest.approx(0.4, abs=1e-5)
    assert done["latency"] == pytest.approx(0.4)
    assert done["polls"] == polls + 1
    assert (by_id[str(idle)]["answered_at"], by_id[str(idle)]["polls"]) == (None, 0)
    waiting = by_id[str(pending)]
    assert (waiting["kind"], waiting["answered_at"], waiting["polls"]) == ("image", None, 1)
    assert waiting["submitted_at"] <= waiting["ready_at"]
    assert waiting["ready_at"] > time.time()


def test_admin_captchas_count_an_unsolvable_answer(make_api: Callable[..., Api]) -> None:
    api = make_api(unsolvable_rate=1.0)
    captcha_id = api.submit_ok(**SUBMITS["image"])
    assert api.wait(captcha_id)["request"] == "ERROR_CAPTCHA_UNSOLVABLE"
    (listed,) = api.captchas()
    assert listed["unsolvable"] is True
    assert listed["submitted_at"] <= listed["ready_at"] <= listed["answered_at"]
    assert listed["polls"] >= 1


def test_stats_keys_and_healthz(api: Api) -> None:
    stats = api.stats()
    assert {
        "submitted",
        "polls",
        "solved",
        "unsolvable",
        "no_slot",
        "in_flight",
        "max_in_flight",
        "errors_injected",
        "slow_injected",
        "bad_key",
        "reports_bad",
        "reports_good",
        "balance_calls",
        "tokens_verified",
        "tokens_rejected",
        "balance",
        "duplicates",
        "by_type",
    } <= set(stats)
    assert set(stats["by_type"]) == set(KINDS)
    direct = api.server.stats()
    assert {k: v for k, v in direct.items() if k != "uptime"} == {
        k: v for k, v in stats.items() if k != "uptime"
    }
    assert api.session.get(f"{api.url}/healthz", timeout=5).json() == {"ok": True}
    assert api.session.get(f"{api.url}/nowhere", timeout=5).status_code == 404


# -- HTTP -----------------------------------------------------------------------------


def test_keep_alive_and_content_length(sandbox: SandboxServer) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", sandbox.port, timeout=5)
    try:
        for _ in range(3):
            conn.request("GET", f"/res.php?key={DEV_API_KEY}&action=getbalance")
            reply = conn.getresponse()
            body = reply.read()
            assert reply.version == 11
            assert reply.getheader("Content-Length") == str(len(body))
            assert not reply.will_close
        conn.request("POST", "/in.php", body=b"x", headers={"Content-Length": "999999999"})
        assert conn.getresponse().status == 413
    finally:
        conn.close()


def test_chunked_bodies_and_cors(api: Api) -> None:
    body = "&".join(f"{k}={v}" for k, v in {"key": DEV_API_KEY, **SUBMITS["hcaptcha"]}.items())
    reply = api.session.post(
        f"{api.url}/in.php",
        data=iter([body.encode()[:10], body.encode()[10:]]),
        headers={"Content-Type": "application/x-www-form-urlencoded"},
        timeout=5,
    )
    assert reply.text.startswith("OK|")
    cors = api.res(action="getbalance", header_acao=1)
    assert cors.headers["Access-Control-Allow-Origin"] == "*"


def test_logs_are_quiet_and_never_show_keys_or_proxy_passwords(
    make_api: Callable[..., Api], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="captcha_tasks_sandbox")
    quiet = make_api()
    quiet.res(action="getbalance")
    assert not [r for r in caplog.records if r.name == "captcha_tasks_sandbox"]
    loud = make_api(verbose=True)
    loud.session.get(
        f"{loud.url}/in.php",
        params={"key": DEV_API_KEY, **SUBMITS["turnstile"], "proxy": "u:hunter2@1.2.3.4:80"},
        timeout=5,
    )
    lines = [r.getMessage() for r in caplog.records if r.name == "captcha_tasks_sandbox"]
    assert any("/in.php" in line for line in lines)
    assert DEV_API_KEY not in caplog.text
    assert "hunter2" not in caplog.text


def test_stop_ends_idle_keep_alive_connections_promptly() -> None:
    server = SandboxServer(SandboxConfig(time_scale=SCALE)).start()
    with requests.Session() as session:
        assert session.get(f"{server.url}/healthz", timeout=5).ok
        started = time.monotonic()
        server.stop()
        assert time.monotonic() - started < 2.0
    server.stop()  # idempotent
    with SandboxServer() as again, requests.Session() as session:
        assert again.url.startswith("http://127.0.0.1:")
        assert session.get(f"{again.url}/healthz", timeout=5).ok


@pytest.mark.parametrize(
    "fields",
    [
        {"latency": {"keycaptcha": 1.0}},
        {"threads": 0},
        {"fail_rate": 1.5},
        {"jitter": -0.1},
        {"dialect": "anticaptcha"},
        {"over_limit_code": "ERROR_X"},
        {"tls_cert": "cert.pem"},
        {"api_keys": ("short",)},
    ],
)
def test_config_rejects_bad_values(fields: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        SandboxConfig(**fields)


def test_config_latency_merges_over_defaults() -> None:
    config = SandboxConfig(latency={"image": 1.0})
    assert config.latency["image"] == 1.0
    assert config.latency["recaptcha_v2"] == DEFAULT_LATENCY["recaptcha_v2"]
    assert dict(config.updated({"latency": 2}).latency) == dict.fromkeys(KINDS, 2.0)


def test_faults_can_target_only_submits_or_only_polls(make_api: Callable[..., Api]) -> None:
    assert SandboxConfig().fault_paths == ("in.php", "res.php")  # the default: both
    api = make_api(fail_rate=1.0, fault_paths=("res.php",))
    captcha_id = api.submit_ok(**SUBMITS["image"])
    assert api.res(action="get", id=captcha_id, json=1).status_code == 502
    reply = api.admin(fault_paths=["in.php"])
    assert reply.status_code == 200 and reply.json()["config"]["fault_paths"] == ["in.php"]
    assert api.submit(**SUBMITS["image"]).status_code == 502
    assert api.answer(captcha_id)  # polls answer again
    stats = api.stats()
    assert (stats["errors_injected"], stats["submitted"]) == (2, 1)
    # Slow answers follow the same selector; a comma-separated string works too.
    assert api.admin(fail_rate=0.0, slow_rate=1.0, slow_seconds=2.0).status_code == 200
    assert api.admin(fault_paths="/in.php, in.php").json()["config"]["fault_paths"] == ["in.php"]
    started = time.monotonic()
    assert api.res(action="getbalance").status_code == 200
    assert time.monotonic() - started < 1.0
    with pytest.raises(requests.ReadTimeout):
        api.session.post(
            f"{api.url}/in.php", data={"key": DEV_API_KEY, **SUBMITS["image"]}, timeout=0.3
        )
    stats = api.stats()
    assert (stats["slow_injected"], stats["submitted"]) == (1, 2)  # it took effect
    for bad in (["foo.php"], 3, [1]):
        assert api.admin(fault_paths=bad).status_code == 400
    with pytest.raises(ConfigurationError):
        SandboxConfig(fault_paths=("admin",))


def test_captchaai_answers_datadome_as_a_method_it_does_not_have(
    make_api: Callable[..., Api],
) -> None:
    api = make_api()  # CaptchaAI: no DataDome in its lists (provider/offers.py SOURCES)
    document = api.submit(json=1, **SUBMITS["datadome"]).json()
    assert (document["status"], document["request"]) == (0, "ERROR_BAD_PARAMETERS")
    assert api.submit(json=1, **SUBMITS["prosopo"]).json()["status"] == 1  # others go on
    stats = api.stats()
    assert stats["submitted"] == 1 and stats["param_errors"] == 1
