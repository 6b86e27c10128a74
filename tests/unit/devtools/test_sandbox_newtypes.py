"""The sandbox's in.php/res.php for more types: FunCaptcha, GeeTest v4,
Amazon WAF, image to coordinates and Turnstile challenge mode, over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from captcha_tasks_sandbox import SandboxServer, coordinates_answer, image_answer
from captcha_tasks_sandbox.answers import DEFAULT_USER_AGENT

from .test_sandbox import GIF, JPEG, PNG, SUBMITS, Api, error_of

SCALE = 0.01
NEW_KINDS = ("funcaptcha", "geetest_v4", "aws_waf", "coordinates")
PUBLICKEY = SUBMITS["funcaptcha"]["publickey"]
ARKOSE = "https%3A%2F%2Fclient-api.arkoselabs.com"
FUNCAPTCHA_TOKEN = re.compile(
    r"[0-9a-f]{17}\.\d{10}\|r=eu-west-1\|meta=3\|pk="
    + PUBLICKEY
    + rf"\|at=40\|ag=101\|cdn_url={ARKOSE}%2Fcdn%2Ffc\|surl={ARKOSE}"
)
GEETEST_V4_KEYS = {"captcha_id", "lot_number", "pass_token", "gen_time", "captcha_output"}
UA = "Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0"
CHALLENGE = {
    **SUBMITS["turnstile"],
    "pagedata": "chlPageData-3f9a",
    "userAgent": UA,
}


@pytest.fixture
def make_api(sandbox_factory: Callable[..., SandboxServer]) -> Iterator[Callable[..., Api]]:
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


def spec_points(image: bytes) -> list[dict[str, int]]:
    """NEWTYPES.md's formula, written out again so the test does not trust the code."""
    d = hashlib.sha256(image).digest()
    return [{"x": 1 + d[2 * i + 1] % 300, "y": 1 + d[2 * i + 2] % 200} for i in range(1 + d[0] % 3)]


# -- answers in both wire forms -------------------------------------------------------


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_new_kinds_answer_in_both_wire_forms(api: Api, kind: str) -> None:
    captcha_id = api.submit_ok(**SUBMITS[kind])
    document = api.wait(captcha_id)
    assert set(document) == {"status", "request"}
    answer = document["request"]
    plain = api.res(action="get", id=captcha_id).text
    assert "ERROR" not in plain.upper()
    if kind == "funcaptcha":
        assert FUNCAPTCHA_TOKEN.fullmatch(answer), answer
        assert plain == f"OK|{answer}"
    elif kind == "coordinates":
        points = spec_points(PNG)
        assert answer == [{"x": str(p["x"]), "y": str(p["y"])} for p in points]
        text = ";".join(f"x={p['x']},y={p['y']}" for p in points)
        assert plain == f"OK|coordinates:{text}"
    else:
        keys = GEETEST_V4_KEYS if kind == "geetest_v4" else {"captcha_voucher", "existing_token"}
        assert set(answer) == keys
        assert all(isinstance(v, str) and v for v in answer.values())
        assert plain.startswith("OK|{") and json.loads(plain[3:]) == answer
    if kind == "geetest_v4":
        assert answer["captcha_id"] == SUBMITS["geetest_v4"]["captcha_id"]
        assert re.fullmatch(r"[0-9a-f]{32}", answer["lot_number"])
        assert answer["gen_time"].isdigit()
    if kind == "aws_waf":
        assert answer["captcha_voucher"].startswith("eyJ")
        cookie = r"[0-9a-f-]{36}:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+"
        assert re.fullmatch(cookie, answer["existing_token"])
    stats = api.stats()
    assert (stats["submitted"], stats["solved"], stats["by_type"][kind]) == (1, 1, 1)


def test_coordinates_answer_follows_the_spec_for_any_image(api: Api) -> None:
    rng = random.Random(14)
    images = [b"\x89PNG\r\n\x1a\n" + rng.randbytes(300) for _ in range(12)]
    assert {len(spec_points(image)) for image in images} == {1, 2, 3}
    for image in images:
        assert coordinates_answer(image) == spec_points(image)
    for image in images[:3]:  # multipart upload, as method=post sends it
        files = {"file": ("c.png", image)}
        captcha_id = api.submit_ok(method="post", coordinatescaptcha="1", files=files)
        points = api.answer(captcha_id)
        assert [{"x": int(p["x"]), "y": int(p["y"])} for p in points] == spec_points(image)
    for image in (GIF, JPEG):
        body = base64.b64encode(image).decode()
        captcha_id = api.submit_ok(method="base64", coordinatescaptcha="1", body=body)
        assert len(api.answer(captcha_id)) == len(spec_points(image))


def test_coordinatescaptcha_other_than_1_is_an_image_captcha(api: Api) -> None:
    params = {**SUBMITS["coordinates"], "coordinatescaptcha": "0"}
    assert api.answer(api.submit_ok(**params)) == image_answer(PNG)
    assert api.stats()["by_type"]["image"] == 1


def test_turnstile_challenge_mode_answers_a_useragent(api: Api) -> None:
    challenge_id = api.submit_ok(**CHALLENGE)
    document = api.wait(challenge_id)
    assert set(document) == {"status", "request", "useragent"}
    assert document["useragent"] == UA
    assert document["request"].startswith("0.")
    assert api.res(action="get", id=challenge_id).text == f"OK|{document['request']}"
    no_agent = {k: v for k, v in CHALLENGE.items() if k != "userAgent"}
    assert api.wait(api.submit_ok(**no_agent))["useragent"] == DEFAULT_USER_AGENT
    plain = api.wait(api.submit_ok(**SUBMITS["turnstile"], userAgent=UA))
    assert set(plain) == {"status", "request"}  # not challenge mode: no useragent
    verdict = api.verify(document["request"], sitekey=CHALLENGE["sitekey"])
    assert (verdict["success"], verdict["action"], verdict["cdata"]) == (True, "signup", "cdata-42")


# -- errors -----------------------------------------------------------------------------


def _without(kind: str, name: str) -> dict[str, str]:
    return {k: v for k, v in SUBMITS[kind].items() if k != name}


FUN, V4, AWS, COORD = (SUBMITS[k] for k in NEW_KINDS)


def test_turnstile_challenge_mode_takes_2captcha_pythons_useragent_spelling(api: Api) -> None:
    """2captcha-python documents ``turnstile(..., useragent=...)`` and sends it as given."""
    lower = {k: v for k, v in CHALLENGE.items() if k != "userAgent"} | {"useragent": UA}
    assert api.wait(api.submit_ok(**lower))["useragent"] == UA
    both = CHALLENGE | {"useragent": "Other/1.0"}
    assert api.wait(api.submit_ok(**both))["useragent"] == UA  # the documented name wins


@pytest.mark.parametrize(
    ("params", "code"),
    [
        (_without("funcaptcha", "publickey"), "ERROR_BAD_PARAMETERS"),
        ({**FUN, "publickey": "69A21A01-CC7B-B9C6-0F9A"}, "ERROR_BAD_PARAMETERS"),
        ({**FUN, "publickey": "g9A21A01-CC7B-B9C6-0F9A-E7FA06677FFC"}, "ERROR_BAD_PARAMETERS"),
        (_without("funcaptcha", "pageurl"), "ERROR_PAGEURL"),
        ({**FUN, "pageurl": "shop.example.com"}, "ERROR_PAGEURL"),
        ({**FUN, "surl": "https://bad host"}, "ERROR_BAD_PARAMETERS"),
        ({**FUN, "data[blob]": "has space"}, "ERROR_BAD_PARAMETERS"),
        ({**FUN, "data[blob]": "x" * 16385}, "ERROR_BAD_PARAMETERS"),
        ({**FUN, "proxy": "nope"}, "ERROR_BAD_PROXY"),
        (_without("geetest_v4", "captcha_id"), "ERROR_BAD_PARAMETERS"),
        ({**V4, "captcha_id": "e392e1d7fd421dc63325744d5a2b9c7"}, "ERROR_BAD_PARAMETERS"),
        ({**V4, "captcha_id": "z" * 32}, "ERROR_BAD_PARAMETERS"),
        ({**V4, "pageurl": "ftp://shop.example.com/"}, "ERROR_PAGEURL"),
        ({**V4, "api_server": "bad/host"}, "ERROR_BAD_PARAMETERS"),
        (_without("aws_waf", "sitekey"), "ERROR_BAD_PARAMETERS"),
        ({**AWS, "sitekey": "AQIDAHjcYu"}, "ERROR_BAD_PARAMETERS"),
        (_without("aws_waf", "iv"), "ERROR_BAD_PARAMETERS"),
        ({**AWS, "iv": "short"}, "ERROR_BAD_PARAMETERS"),
        ({**AWS, "context": "has a space in it"}, "ERROR_BAD_PARAMETERS"),
        (_without("aws_waf", "pageurl"), "ERROR_PAGEURL"),
        ({**AWS, "challenge_script": "javascript:alert(1)"}, "ERROR_BAD_PARAMETERS"),
        ({**AWS, "captcha_script": "//no-scheme.example.com/c.js"}, "ERROR_BAD_PARAMETERS"),
        ({**COORD, "body": ""}, "ERROR_ZERO_CAPTCHA_FILESIZE"),
        ({**COORD, "body": "!!not base64!!"}, "ERROR_UPLOAD"),
        (
            {**COORD, "body": base64.b64encode(b"BM" + bytes(500)).decode()},
            "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
        ),
        ({**COORD, "textinstructions": "x" * 141}, "ERROR_BAD_PARAMETERS"),
        ({k: v for k, v in CHALLENGE.items() if k != "action"}, "ERROR_BAD_PARAMETERS"),
        ({k: v for k, v in CHALLENGE.items() if k != "data"}, "ERROR_BAD_PARAMETERS"),
    ],
)
def test_malformed_submits_get_the_providers_code(
    api: Api, params: dict[str, str], code: str
) -> None:
    assert api.submit(**params).text == code
    assert error_of(api.submit(json=1, **params)) == code
    stats = api.stats()
    assert (stats["param_errors"], stats["submitted"]) == (2, 0)


def test_coordinates_by_multipart_are_checked_like_images(api: Api) -> None:
    bmp = {"file": ("c.bmp", PNG)}
    assert api.submit(method="post", coordinatescaptcha="1", files=bmp).text == (
        "ERROR_WRONG_FILE_EXTENSION"
    )
    assert api.submit(method="post", coordinatescaptcha="1").text == "ERROR_ZERO_CAPTCHA_FILESIZE"


# -- batch reads, counters, billing, threads, reports, tokens ----------------------------


def test_batch_reads_answer_each_kind_in_its_plain_form(api: Api) -> None:
    kinds = ("image", *NEW_KINDS)
    ids = [api.submit_ok(**SUBMITS[kind]) for kind in kinds]
    plains = []
    for captcha_id in ids:
        api.wait(captcha_id)
        plains.append(api.res(action="get", id=captcha_id).text.removeprefix("OK|"))
    joined = api.res(action="get", ids=",".join(map(str, ids))).text
    assert joined == "|".join(plains)
    assert plains[0] == image_answer(PNG)
    assert plains[-1].startswith("coordinates:x=")
    assert json.loads(plains[2])["captcha_id"] == SUBMITS["geetest_v4"]["captcha_id"]
    # A FunCaptcha token carries "|" itself: a batch holding one has more "|" than ids.
    assert joined.count("|") > len(ids) - 1
    assert api.res(action="get", ids=",".join(map(str, ids)), json=1).json() == {
        "status": 1,
        "request": joined,
    }


def test_duplicates_billing_and_threads_cover_the_new_kinds(make_api: Callable[..., Api]) -> None:
    api = make_api(
        dialect="2captcha",
        balance=1.0,
        price=0.1,
        threads=4,
        latency=dict.fromkeys(NEW_KINDS, 300.0),
    )
    for kind in NEW_KINDS:
        api.submit_ok(**SUBMITS[kind])
    assert api.submit(**SUBMITS["funcaptcha"]).text == "ERROR_NO_SLOT_AVAILABLE"
    assert api.res(action="getbalance").text == "0.6000"
    stats = api.stats()
    assert (stats["in_flight"], stats["no_slot"]) == (4, 1)
    assert {k: stats["by_type"][k] for k in NEW_KINDS} == dict.fromkeys(NEW_KINDS, 1)
    again = make_api(threads=10)
    for _ in range(2):
        again.submit_ok(**SUBMITS["aws_waf"])
        again.submit_ok(**CHALLENGE)
    again.submit_ok(**{**CHALLENGE, "pagedata": "other"})
    assert again.stats()["duplicates"] == 2


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_unsolvable_new_kinds_are_refunded(make_api: Callable[..., Api], kind: str) -> None:
    api = make_api(unsolvable_rate=1.0, dialect="2captcha", balance=1.0, price=0.5)
    captcha_id = api.submit_ok(**SUBMITS[kind])
    assert api.wait(captcha_id)["request"] == "ERROR_CAPTCHA_UNSOLVABLE"
    assert api.res(action="getbalance").text == "1.0000"


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_reports_for_the_new_kinds(api: Api, kind: str) -> None:
    good, bad = (api.submit_ok(**{**SUBMITS[kind], "soft_id": str(n)}) for n in range(2))
    api.wait(good)
    api.wait(bad)
    assert api.res(action="reportgood", id=good).text == "OK_REPORT_RECORDED"
    assert api.res(action="reportbad", id=bad).text == "OK_REPORT_RECORDED"
    assert api.res(action="reportbad", id=bad).text == "ERROR_DUPLICATE_REPORT"
    stats = api.stats()
    assert (stats["reports_good"], stats["reports_bad"], stats["reports_refused"]) == (1, 1, 1)


def test_funcaptcha_and_aws_waf_tokens_verify_once(api: Api) -> None:
    token = api.answer(api.submit_ok(**SUBMITS["funcaptcha"]))
    assert api.verify(token, sitekey="11111111-2222-3333-4444-555555555555")["success"] is False
    verdict = api.verify(token, sitekey=PUBLICKEY)
    assert (verdict["success"], verdict["hostname"]) == (True, "shop.example.com")
    assert api.verify(token)["error-codes"] == ["timeout-or-duplicate"]
    cookie = api.answer(api.submit_ok(**SUBMITS["aws_waf"]))["existing_token"]
    assert api.verify(cookie, sitekey=SUBMITS["aws_waf"]["sitekey"])["success"] is True
    geetest = api.answer(api.submit_ok(**SUBMITS["geetest_v4"]))
    assert api.verify(geetest["pass_token"])["error-codes"] == ["invalid-input-response"]


def test_seeded_answers_repeat(make_api: Callable[..., Api]) -> None:
    def run() -> list[Any]:
        api = make_api(seed=99)
        answers = [api.answer(api.submit_ok(**SUBMITS[kind])) for kind in NEW_KINDS]
        for answer in answers:
            if isinstance(answer, dict):
                answer.pop("gen_time", None)  # the clock, not the generator
        return answers

    assert run() == run()
