"""The sandbox's JSON task API for FunCaptcha, GeeTest v4, AWS WAF and coordinates, per
dialect: type names, fields, solution shapes, refusals of what a dialect does not offer,
and the shared counters, reports and tokens."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from captcha_tasks_sandbox import DEV_API_KEY, SandboxServer, coordinates_answer
from captcha_tasks_sandbox.answers import DEFAULT_USER_AGENT

from .test_sandbox_json import PASSWORD, PNG, PROXY, SCALE, SITEKEY, URL, JApi
from .test_sandbox_newtypes import FUNCAPTCHA_TOKEN, GEETEST_V4_KEYS, PUBLICKEY, spec_points

CAPTCHA_ID = "e392e1d7fd421dc63325744d5a2b9c73"
UA = "Mozilla/5.0 (X11; Linux x86_64) Firefox/126.0"
TURNSTILE_KEY = "0x4AAAAAAAC3DHQFLr1GavRN"
AWS = {
    "key": "AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTp9mmBQG==",
    "iv": "CgAHbCe2GgAAAAAj",
    "context": "9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6flVbuFxm3gy==",
}
BODY = base64.b64encode(PNG).decode()
FUN = {
    "websiteURL": URL,
    "websitePublicKey": PUBLICKEY,
    "funcaptchaApiJSSubdomain": "client-api.arkoselabs.com",
    "data": '{"blob":"abc+/="}',
}
AMAZON = {
    "websiteURL": URL,
    "websiteKey": AWS["key"],
    "iv": AWS["iv"],
    "context": AWS["context"],
    "challengeScript": "https://x.token.awswaf.com/x/challenge.js",
    "captchaScript": "https://x.captcha.awswaf.com/x/captcha.js",
}
CAPSOLVER_AWS = {
    "websiteURL": URL,
    "awsKey": AWS["key"],
    "awsIv": AWS["iv"],
    "awsContext": AWS["context"],
    "awsChallengeJS": AMAZON["challengeScript"],
    "awsApiJs": AMAZON["captchaScript"],
}
V4 = {"websiteURL": URL, "version": 4, "gt": CAPTCHA_ID}
TURNSTILE = {"websiteURL": URL, "websiteKey": TURNSTILE_KEY}

#: (dialect, kind) -> a good task in that dialect's names.
TASKS: dict[tuple[str, str], dict[str, Any]] = {
    ("2captcha-v2", "funcaptcha"): {"type": "FunCaptchaTaskProxyless", **FUN},
    ("anticaptcha", "funcaptcha"): {"type": "FunCaptchaTaskProxyless", **FUN},
    ("capmonster", "funcaptcha"): {"type": "FunCaptchaTask", **FUN, "userAgent": UA},
    ("2captcha-v2", "geetest_v4"): {
        "type": "GeeTestTaskProxyless",
        **V4,
        "initParameters": {"captcha_id": CAPTCHA_ID},
    },
    ("anticaptcha", "geetest_v4"): {"type": "GeeTestTaskProxyless", **V4},
    ("capsolver", "geetest_v4"): {
        "type": "GeeTestTaskProxyLess",
        "websiteURL": URL,
        "captchaId": CAPTCHA_ID,
    },
    ("capmonster", "geetest_v4"): {"type": "GeeTestTask", **V4},
    ("2captcha-v2", "aws_waf"): {"type": "AmazonTaskProxyless", **AMAZON},
    ("anticaptcha", "aws_waf"): {"type": "AmazonTaskProxyless", **AMAZON},
    ("capsolver", "aws_waf"): {"type": "AntiAwsWafTaskProxyLess", **CAPSOLVER_AWS},
    ("capmonster", "aws_waf"): {"type": "AmazonTask", **AMAZON},
    ("2captcha-v2", "coordinates"): {
        "type": "CoordinatesTask",
        "body": BODY,
        "comment": "click the cats",
    },
    ("anticaptcha", "coordinates"): {
        "type": "ImageToCoordinatesTask",
        "body": BODY,
        "comment": "click the cats",
        "mode": "points",
    },
    ("2captcha-v2", "challenge"): {
        "type": "TurnstileTaskProxyless",
        **TURNSTILE,
        "action": "signup",
        "data": "cd-1",
        "pagedata": "pd-1",
        "userAgent": UA,
    },
    ("anticaptcha", "challenge"): {
        "type": "TurnstileTaskProxyless",
        **TURNSTILE,
        "action": "signup",
        "cData": "cd-1",
        "chlPageData": "pd-1",
        "userAgent": UA,
    },
    ("capmonster", "challenge"): {
        "type": "TurnstileTask",
        **TURNSTILE,
        "cloudflareTaskType": "token",
        "pageAction": "signup",
        "data": "cd-1",
        "pageData": "pd-1",
        "userAgent": UA,
    },
}


@pytest.fixture
def make_api(sandbox_factory: Callable[..., SandboxServer]) -> Iterator[Callable[..., JApi]]:
    apis: list[JApi] = []

    def make(dialect: str = "2captcha-v2", **config: Any) -> JApi:
        fields = {"time_scale": SCALE, "protocol": "json", "dialect": dialect, **config}
        api = JApi(sandbox_factory(**fields))
        apis.append(api)
        return api

    yield make
    for api in apis:
        api.session.close()


def check_solution(dialect: str, kind: str, sol: dict[str, Any]) -> None:
    if kind == "funcaptcha":
        assert FUNCAPTCHA_TOKEN.fullmatch(sol["token"])
        assert sol == (
            {"token": sol["token"], "userAgent": UA}
            if dialect == "capmonster"
            else {"token": sol["token"]}
        )
    elif kind == "geetest_v4":
        assert set(sol) == GEETEST_V4_KEYS and sol["captcha_id"] == CAPTCHA_ID
        assert all(isinstance(value, str) for value in sol.values())
    elif kind == "aws_waf" and dialect in ("2captcha-v2", "capmonster"):
        # CapMonster too, unless the task asks cookieSolution: true (test below).
        assert set(sol) == {"captcha_voucher", "existing_token"}
    elif kind == "aws_waf" and dialect == "capsolver":
        assert set(sol) == {"cookie"} and sol["cookie"].count(":") == 2
    elif kind == "aws_waf":  # Anti-Captcha: the cookie's value as "token"
        assert set(sol) == {"token"} and sol["token"].count(":") == 2
    elif kind == "coordinates":
        points = spec_points(PNG)
        assert points == coordinates_answer(PNG)
        if dialect == "anticaptcha":
            assert sol == {"coordinates": [[p["x"], p["y"]] for p in points]}
        else:
            assert sol == {"coordinates": points}
    else:  # Anti-Captcha ignores the task's user agent and answers its own
        agent = DEFAULT_USER_AGENT if dialect == "anticaptcha" else UA
        assert sol["token"].startswith("0.") and sol["userAgent"] == agent
        assert set(sol) == {"token", "userAgent"}
    assert "ERROR" not in json.dumps(sol).upper()


@pytest.mark.parametrize(("dialect", "kind"), list(TASKS))
def test_each_dialect_solves_the_new_kinds_in_its_shapes(
    make_api: Callable[..., JApi], dialect: str, kind: str
) -> None:
    api = make_api(dialect)
    done = api.wait(api.create(TASKS[dialect, kind])["taskId"])
    assert done["status"] == "ready", done
    check_solution(dialect, kind, done["solution"])
    stats = api.stats()
    counted = "turnstile" if kind == "challenge" else kind
    assert (stats["submitted"], stats["solved"], stats["by_type"][counted]) == (1, 1, 1)


def test_capmonster_answers_the_aws_cookie_only_when_asked(
    make_api: Callable[..., JApi],
) -> None:
    # Its docs: cookieSolution defaults to false, and then the voucher pair comes back.
    api = make_api("capmonster")
    task = {**TASKS["capmonster", "aws_waf"], "cookieSolution": True}
    done = api.wait(api.create(task)["taskId"])
    assert done["status"] == "ready", done
    assert set(done["solution"]) == {"cookies", "userAgent"}
    assert set(done["solution"]["cookies"]) == {"aws-waf-token"}


def test_challenge_mode_without_a_user_agent_answers_the_default_one(
    make_api: Callable[..., JApi],
) -> None:
    api = make_api("2captcha-v2")
    task = {k: v for k, v in TASKS["2captcha-v2", "challenge"].items() if k != "userAgent"}
    sol = api.wait(api.create(task)["taskId"])["solution"]
    assert sol["userAgent"] == DEFAULT_USER_AGENT
    anticaptcha = make_api("anticaptcha")
    plain = {"type": "TurnstileTaskProxyless", **TURNSTILE}  # not challenge mode
    assert set(anticaptcha.wait(anticaptcha.create(plain)["taskId"])["solution"]) == {"token"}


@pytest.mark.parametrize(
    ("dialect", "kind", "change"),
    [
        # anticaptchaofficial's funcaptchaProxyless sends both empty when not set.
        ("anticaptcha", "funcaptcha", {"data": "", "funcaptchaApiJSSubdomain": ""}),
        # anticaptchaofficial's geetestProxyless sends {} unless set; Anti-Captcha's own
        # v4 example sends the widget's parameters, not the captcha id.
        ("anticaptcha", "geetest_v4", {"initParameters": {}, "challenge": ""}),
        ("anticaptcha", "geetest_v4", {"initParameters": {"riskType": "slide"}}),
        ("capmonster", "geetest_v4", {"initParameters": {"riskType": "slide"}}),
    ],
)
def test_what_the_official_sdks_send_by_default_is_accepted(
    make_api: Callable[..., JApi], dialect: str, kind: str, change: dict[str, Any]
) -> None:
    api = make_api(dialect)
    done = api.wait(api.create({**TASKS[dialect, kind], **change})["taskId"])
    assert done["status"] == "ready", done
    if kind == "funcaptcha":
        assert FUNCAPTCHA_TOKEN.fullmatch(done["solution"]["token"])
    else:
        check_solution(dialect, kind, done["solution"])


NOT_OFFERED = "ERROR_TASK_NOT_SUPPORTED"


@pytest.mark.parametrize(
    ("dialect", "task", "code"),
    [
        ("capsolver", {"type": "FunCaptchaTaskProxyLess", **FUN}, NOT_OFFERED),
        ("capsolver", {"type": "FunCaptchaTaskProxyless", **FUN}, NOT_OFFERED),
        ("capsolver", {"type": "CoordinatesTask", "body": BODY}, NOT_OFFERED),
        ("capsolver", {"type": "ImageToCoordinatesTask", "body": BODY}, NOT_OFFERED),
        ("capmonster", {"type": "CoordinatesTask", "body": BODY}, NOT_OFFERED),
        ("capmonster", {"type": "ImageToCoordinatesTask", "body": BODY}, NOT_OFFERED),
        ("anticaptcha", {"type": "CoordinatesTask", "body": BODY}, NOT_OFFERED),
        ("2captcha-v2", {"type": "CoordinatesTaskProxyless", "body": BODY}, NOT_OFFERED),
        ("2captcha-v2", {"type": "AntiAwsWafTaskProxyLess", **CAPSOLVER_AWS}, NOT_OFFERED),
        ("capsolver", {"type": "AmazonTaskProxyless", **AMAZON}, NOT_OFFERED),
        ("anticaptcha", {**TASKS["anticaptcha", "coordinates"], "mode": "rectangles"}, NOT_OFFERED),
        (
            "capmonster",
            {**TASKS["capmonster", "challenge"], "cloudflareTaskType": "wait_room"},
            NOT_OFFERED,
        ),
        (
            "capsolver",
            {"type": "AntiTurnstileTaskProxyLess", **TURNSTILE, "pageData": "pd"},
            "ERROR_INVALID_TASK_DATA",
        ),
        (
            "capsolver",
            {
                "type": "AntiTurnstileTaskProxyLess",
                **TURNSTILE,
                "metadata": {"action": "a", "cdata": "c", "pagedata": "pd"},
            },
            "ERROR_INVALID_TASK_DATA",
        ),
    ],
)
def test_what_a_dialect_does_not_offer_is_refused(
    make_api: Callable[..., JApi], dialect: str, task: dict[str, Any], code: str
) -> None:
    api = make_api(dialect)
    status, _, got = api.error(api.call("createTask", task=task))
    assert got == code
    assert status == (400 if dialect == "capsolver" else 200)
    stats = api.stats()
    assert (stats["param_errors"], stats["submitted"]) == (1, 0)


BAD = "ERROR_INCORRECT_SESSION_DATA"


@pytest.mark.parametrize(
    ("dialect", "key", "change", "code"),
    [
        ("2captcha-v2", "funcaptcha", {"websitePublicKey": "nope"}, BAD),
        ("anticaptcha", "funcaptcha", {"data": {"blob": "abc"}}, BAD),  # not a JSON string
        ("anticaptcha", "funcaptcha", {"data": "not json"}, BAD),
        ("capmonster", "funcaptcha", {"websiteURL": "nowhere"}, BAD),
        ("capmonster", "funcaptcha", {"funcaptchaApiJSSubdomain": "bad host"}, BAD),
        ("2captcha-v2", "geetest_v4", {"initParameters": None}, BAD),
        ("2captcha-v2", "geetest_v4", {"initParameters": {"captcha_id": "f" * 32}}, BAD),
        ("anticaptcha", "geetest_v4", {"gt": "short"}, BAD),
        ("anticaptcha", "geetest_v4", {"initParameters": {"captcha_id": "f" * 32}}, BAD),
        ("capmonster", "geetest_v4", {"initParameters": "captcha_id"}, BAD),
        ("capmonster", "geetest_v4", {"version": 5}, BAD),
        ("capsolver", "geetest_v4", {"captchaId": "xyz"}, "ERROR_INVALID_TASK_DATA"),
        ("2captcha-v2", "aws_waf", {"iv": None}, BAD),
        ("anticaptcha", "aws_waf", {"websiteKey": "short"}, BAD),
        ("capmonster", "aws_waf", {"challengeScript": "ftp://x.example.com/c.js"}, BAD),
        ("capsolver", "aws_waf", {"awsContext": None}, "ERROR_INVALID_TASK_DATA"),
        (
            "2captcha-v2",
            "coordinates",
            {"body": base64.b64encode(b"BM" + bytes(300)).decode()},
            "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
        ),
        ("anticaptcha", "coordinates", {"comment": "x" * 141}, BAD),
        ("2captcha-v2", "challenge", {"data": None}, BAD),
        ("anticaptcha", "challenge", {"action": None}, BAD),
        ("capmonster", "challenge", {"cloudflareTaskType": None}, BAD),
        ("capmonster", "challenge", {"pageData": None}, BAD),
    ],
)
def test_malformed_new_tasks_get_the_dialects_code(
    make_api: Callable[..., JApi], dialect: str, key: str, change: dict[str, Any], code: str
) -> None:
    api = make_api(dialect)
    task = {**TASKS[dialect, key], **change}
    task = {k: v for k, v in task.items() if v is not None}
    assert api.error(api.call("createTask", task=task))[2] == code
    assert api.stats()["submitted"] == 0


@pytest.mark.parametrize(
    ("dialect", "task", "ok"),
    [
        ("2captcha-v2", {**TASKS["2captcha-v2", "funcaptcha"], "type": "FunCaptchaTask"}, False),
        (
            "2captcha-v2",
            {**TASKS["2captcha-v2", "funcaptcha"], "type": "FunCaptchaTask", **PROXY},
            True,
        ),
        ("anticaptcha", {**TASKS["anticaptcha", "aws_waf"], "type": "AmazonTask", **PROXY}, True),
        ("capmonster", {**TASKS["capmonster", "aws_waf"], **PROXY}, True),
        ("capsolver", {**TASKS["capsolver", "aws_waf"], "type": "AntiAwsWafTask"}, False),
        (
            "capsolver",
            {
                **TASKS["capsolver", "aws_waf"],
                "type": "AntiAwsWafTask",
                "proxy": f"203.0.113.7:3128:user:{PASSWORD}",
            },
            True,
        ),
        ("capmonster", {**TASKS["capmonster", "geetest_v4"], **PROXY}, True),
    ],
)
def test_proxy_variants_of_the_new_types(
    make_api: Callable[..., JApi], dialect: str, task: dict[str, Any], ok: bool
) -> None:
    api = make_api(dialect)
    reply = api.call("createTask", task=task)
    assert (reply.json()["errorId"] == 0) == ok, reply.json()
    if ok:
        done = api.wait(reply.json()["taskId"])
        assert done["status"] == "ready" and PASSWORD not in json.dumps(done)


@pytest.mark.parametrize(
    ("dialect", "kind", "method", "extra"),
    [
        ("2captcha-v2", "aws_waf", "reportIncorrect", {}),
        ("2captcha-v2", "coordinates", "reportCorrect", {}),
        ("anticaptcha", "coordinates", "reportIncorrectImageCaptcha", {}),
        ("capmonster", "funcaptcha", "reportIncorrectTokenCaptcha", {}),
        ("capmonster", "geetest_v4", "reportIncorrectTokenCaptcha", {}),
        ("capsolver", "aws_waf", "feedbackTask", {"result": {"invalid": True}}),
    ],
)
def test_reports_for_the_new_kinds(
    make_api: Callable[..., JApi], dialect: str, kind: str, method: str, extra: dict[str, Any]
) -> None:
    api = make_api(dialect)
    task_id = api.create(TASKS[dialect, kind])["taskId"]
    api.wait(task_id)
    assert api.call(method, taskId=task_id, **extra).json()["errorId"] == 0
    assert api.call(method, taskId=task_id, **extra).json()["errorId"] > 0  # once per task
    stats = api.stats()
    assert stats["reports_good"] + stats["reports_bad"] == 1


def test_anticaptcha_has_no_report_for_funcaptcha(make_api: Callable[..., JApi]) -> None:
    api = make_api("anticaptcha")
    task_id = api.create(TASKS["anticaptcha", "funcaptcha"])["taskId"]
    api.wait(task_id)
    for method in ("reportIncorrectRecaptcha", "reportIncorrectImageCaptcha"):
        assert api.call(method, taskId=task_id).json()["errorId"] > 0


def test_json_tokens_verify_once(make_api: Callable[..., JApi]) -> None:
    api = make_api("capsolver")
    cookie = api.wait(api.create(TASKS["capsolver", "aws_waf"])["taskId"])["solution"]["cookie"]
    verify = f"{api.url}/siteverify"
    assert api.session.post(verify, data={"response": cookie}, timeout=5).json()["success"]
    again = api.session.post(verify, data={"response": cookie}, timeout=5).json()
    assert again["error-codes"] == ["timeout-or-duplicate"]
    capmonster = make_api("capmonster")
    task = TASKS["capmonster", "funcaptcha"]
    token = capmonster.wait(capmonster.create(task)["taskId"])["solution"]["token"]
    answer = capmonster.session.post(
        f"{capmonster.url}/siteverify", data={"response": token, "sitekey": PUBLICKEY}, timeout=5
    ).json()
    assert answer["success"] is True


def test_both_protocols_share_the_new_kinds(make_api: Callable[..., JApi]) -> None:
    api = make_api("anticaptcha", protocol="both", threads=1, latency={"coordinates": 300.0})
    api.create(TASKS["anticaptcha", "coordinates"])
    submit = {"key": api.key, "method": "geetest_v4", "captcha_id": CAPTCHA_ID, "pageurl": URL}
    classic = api.session.post(f"{api.url}/in.php", data=submit, timeout=5)
    assert classic.text == "ERROR_NO_SLOT_AVAILABLE"  # the JSON task holds the only thread


@pytest.mark.parametrize(
    ("dialect", "type_name"),
    [
        ("2captcha-v2", "RecaptchaV2EnterpriseTaskProxyless"),
        ("anticaptcha", "RecaptchaV2EnterpriseTaskProxyless"),
        ("capsolver", "ReCaptchaV2EnterpriseTaskProxyLess"),
        ("capmonster", "RecaptchaV2EnterpriseTask"),
    ],
)
def test_recaptcha_v2_enterprise_with_s(
    make_api: Callable[..., JApi], dialect: str, type_name: str
) -> None:
    api = make_api(dialect, protocol="both")
    task = {
        "type": type_name,
        "websiteURL": URL,
        "websiteKey": SITEKEY,
        "enterprisePayload": {"s": "SOME_S_VALUE-0123"},
    }
    done = api.wait(api.create(task)["taskId"])
    assert done["solution"]["gRecaptchaResponse"].startswith("03AFcWeA")
    classic = api.session.post(
        f"{api.url}/in.php",
        timeout=5,
        data={
            "key": DEV_API_KEY,
            "method": "userrecaptcha",
            "googlekey": SITEKEY,
            "pageurl": URL,
            "enterprise": "1",
            "data-s": "SOME_S_VALUE-0123",
            "json": "1",
        },
    )
    assert classic.json()["status"] == 1
    assert api.stats()["by_type"]["recaptcha_v2"] == 2
