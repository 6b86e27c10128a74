"""Tencent's captcha (TenDI): checked when built, each provider's wire format (in.php's
``tencent``, 2Captcha's ``TencentTask``, CapMonster Cloud's ``CustomTask`` of class
``TenDI``), its two answer shapes read as one ``{ticket, randstr}``, the catalogue's
cells with their sources, and the sandbox's checks with each provider's error code."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput, ProviderUnavailable
from captcha_tasks.provider import Proxy, Tencent
from captcha_tasks.provider.answers import json_solution, slot_answer
from captcha_tasks.provider.captchas import for_type
from captcha_tasks.provider.classic_params import submit_params
from captcha_tasks.provider.json_client import _answer
from captcha_tasks.provider.json_dialects import dialect_for
from captcha_tasks.provider.json_tasks import task_for
from captcha_tasks.provider.offers import (
    NEVER_SOLVED,
    SOURCES,
    catalogue,
    check_offered,
    offered_by,
)
from captcha_tasks_sandbox.json_protocol import JsonError, dialect_code, parse_task, solution
from captcha_tasks_sandbox.protocol import NOT_OFFERED_METHODS, ApiError, parse_submission

PAGE = "https://example.com/login"
APP_ID = "189123456"
SCRIPT = "https://turing.captcha.qcloud.com/TCaptcha-global.js"
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")
TICKET = "tr03lHUhdnuW3neJZu7LrIbs*"

PLAIN = Tencent(APP_ID, PAGE)
FULL = Tencent(APP_ID, PAGE, script_url=SCRIPT, user_agent=UA)
#: The answers as each provider documents them.
CAPMONSTER = {"data": {"randstr": "@EcL", "ticket": TICKET}, "headers": {"User-Agent": UA}}
TWOCAPTCHA = {"appid": "190014885", "ret": 0, "ticket": TICKET, "randstr": "@EcL"}


def test_good_values_build_and_validate() -> None:
    assert PLAIN.validate() is PLAIN and FULL.validate() is FULL
    assert PLAIN.script_url is None and PLAIN.user_agent is None


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("Tencent.app_id", lambda: Tencent("CaptchaAppId", PAGE)),
        ("Tencent.app_id", lambda: Tencent("1891", PAGE)),
        ("Tencent.app_id", lambda: Tencent(189123456, PAGE)),
        ("Tencent.pageurl", lambda: Tencent(APP_ID, "example.com")),
        ("Tencent.script_url", lambda: Tencent(APP_ID, PAGE, script_url="TCaptcha.js")),
        ("Tencent.user_agent", lambda: Tencent(APP_ID, PAGE, user_agent="a\tb")),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field):
        build()


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2's tencent(app_id, url): method=tencent, app_id, pageurl only.
    expected = {"method": "tencent", "app_id": APP_ID, "pageurl": PAGE}
    assert submit_params(PLAIN) == submit_params(FULL) == expected


def test_json_task_per_dialect() -> None:
    two = dialect_for("2captcha-v2")
    assert task_for(two, PLAIN) == {
        "type": "TencentTaskProxyless",
        "websiteURL": PAGE,
        "appId": APP_ID,
    }
    assert task_for(two, FULL)["captchaScript"] == SCRIPT
    monster = dialect_for("capmonster")
    assert task_for(monster, PLAIN) == {
        "type": "CustomTask",
        "class": "TenDI",
        "websiteURL": PAGE,
        "websiteKey": APP_ID,
    }
    assert task_for(monster, FULL) == {
        "type": "CustomTask",
        "class": "TenDI",
        "websiteURL": PAGE,
        "websiteKey": APP_ID,
        "userAgent": UA,
        "metadata": {"captchaUrl": SCRIPT},
    }


@pytest.mark.parametrize(
    ("provider", "name"), [("2captcha-v2", "TencentTask"), ("capmonster", "CustomTask")]
)
def test_the_proxied_variant_takes_the_proxy(provider: str, name: str) -> None:
    task = task_for(dialect_for(provider), PLAIN, PROXY)  # type: ignore[arg-type]
    assert task["type"] == name
    assert (task["proxyAddress"], task["proxyPort"], task["proxyLogin"]) == (
        "10.1.2.3",
        8080,
        "user",
    )


# Its answers: one shape, whatever the provider.


def test_capmonsters_custom_task_answer_is_its_data_and_its_headers_user_agent() -> None:
    answer = _answer("7", {"status": "ready", "solution": CAPMONSTER})
    assert answer is not None and answer.user_agent == UA
    assert for_type("tencent", answer.solution) == {"ticket": TICKET, "randstr": "@EcL"}


def test_2captchas_answer_loses_its_appid_and_ret() -> None:
    answer = _answer("7", {"status": "ready", "solution": TWOCAPTCHA})
    assert answer is not None and answer.user_agent is None
    assert for_type("tencent", answer.solution) == {"ticket": TICKET, "randstr": "@EcL"}


def test_res_phps_json_answer_reads_the_same() -> None:
    # res.php's layout is in no source ("the response in JSON"): the JSON API's assumed.
    for slot in ('{"appid":"190014885","ret":0,"ticket":"tr03x*","randstr":"@KVN"}',):
        read = slot_answer("7", slot)
        assert not isinstance(read, Exception)
        assert for_type("tencent", read.solution) == {"ticket": "tr03x*", "randstr": "@KVN"}


@pytest.mark.parametrize(
    "bad",
    [
        {**TWOCAPTCHA, "ret": 1},  # Tencent's own refusal
        {"appid": "1", "ret": 0, "ticket": TICKET},  # no randstr
        {"data": {"ticket": TICKET, "randstr": ""}, "headers": {}},
        "tr03lHUhdnuW3neJZu7LrIbs*",  # a bare token
    ],
)
def test_a_malformed_answer_is_refused(bad: Any) -> None:
    with pytest.raises(ProviderUnavailable) as info:
        solution_ = json_solution(bad) if isinstance(bad, dict) else bad
        for_type("tencent", solution_)  # type: ignore[arg-type]
    assert info.value.code == "UNRECOGNISED_ANSWER"


def test_a_custom_tasks_data_holding_a_token_is_that_token() -> None:
    # The CustomTask shape is read whatever the class: data's fields are the answer's.
    assert json_solution({"data": {"token": "abc"}, "headers": {"User-Agent": UA}}) == "abc"
    # A "data" beside other fields is not that shape: a nested field, refused.
    with pytest.raises(ProviderUnavailable):
        json_solution({"data": {"x": "1"}, "other": "2"})


# The catalogue.


@pytest.mark.parametrize("provider", ["captchaai", "anticaptcha", "capsolver"])
def test_unoffered_cells_are_refused_naming_provider_and_type(provider: str) -> None:
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        check_offered(provider, PLAIN)  # type: ignore[arg-type]
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert "Tencent" in str(info.value)
    assert "tencent" in NEVER_SOLVED[provider]  # type: ignore[index]


def test_who_offers_it_and_every_cell_has_its_own_source() -> None:
    assert offered_by(PLAIN) == ["2captcha", "2captcha-v2", "capmonster"]
    for provider, row in catalogue().items():
        cell = row["tencent"]
        assert (cell.state == "offered") == ("tencent" not in NEVER_SOLVED[provider]), provider
        assert cell.source and cell.source != SOURCES[provider]["*"], provider
    assert "third party" in str(catalogue()["2captcha-v2"]["tencent"].source)


# The sandbox: each provider's code for a missing or bad field.


def _classic(**params: str) -> Any:
    return parse_submission(params, {}, 100, 10_000)


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    sub = _classic(method="tencent", app_id=APP_ID, pageurl=PAGE)
    assert (sub.kind, sub.sitekey, sub.hostname) == ("tencent", APP_ID, "example.com")
    for broken, code in (
        ({"pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"app_id": "abc", "pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"app_id": APP_ID}, "ERROR_PAGEURL"),
    ):
        with pytest.raises(ApiError) as info:
            _classic(method="tencent", **broken)
        assert info.value.code == code, broken
    assert "tencent" in NOT_OFFERED_METHODS["captchaai"]


def test_sandbox_json_checks_each_dialects_fields() -> None:
    two = {"type": "TencentTaskProxyless", "websiteURL": PAGE, "appId": APP_ID}
    sub, name = parse_task("2captcha-v2", {**two, "captchaScript": SCRIPT}, 100, 10_000)
    assert (name, sub.kind, sub.sitekey) == ("TencentTaskProxyless", "tencent", APP_ID)
    monster = {"type": "CustomTask", "class": "TenDI", "websiteURL": PAGE, "websiteKey": APP_ID}
    sub, name = parse_task(
        "capmonster", {**monster, "userAgent": UA, "metadata": {"captchaUrl": SCRIPT}}, 1, 9
    )
    assert (name, sub.kind, sub.sitekey, sub.user_agent) == ("CustomTask", "tencent", APP_ID, UA)
    expected = "ERROR_INCORRECT_SESSION_DATA"
    for dialect, broken in (
        ("2captcha-v2", {**two, "appId": None}),
        ("2captcha-v2", {**two, "websiteKey": APP_ID, "appId": None}),  # CapMonster's name
        ("2captcha-v2", {**two, "captchaScript": "TCaptcha.js"}),
        ("capmonster", {**monster, "websiteKey": "abc"}),
        ("capmonster", {**monster, "metadata": {"captchaUrl": "TCaptcha.js"}}),
        ("capmonster", {**monster, "websiteURL": "example.com"}),
    ):
        with pytest.raises(JsonError) as info:
            parse_task(dialect, broken, 1, 9)
        assert dialect_code(dialect, info.value.code) == expected, broken


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("anticaptcha", {"type": "TencentTaskProxyless"}),
        ("capsolver", {"type": "TencentTaskProxyless"}),
        ("capmonster", {"type": "TencentTaskProxyless"}),
        ("capmonster", {"type": "CustomTask", "class": "tendi"}),  # sent verbatim: TenDI
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task: dict[str, str]) -> None:
    full = {**task, "websiteURL": PAGE, "appId": APP_ID, "websiteKey": APP_ID}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, full, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_solutions_are_each_providers_shape() -> None:
    assert solution("2captcha-v2", "tencent", TWOCAPTCHA) == TWOCAPTCHA
    assert solution("capmonster", "tencent", TWOCAPTCHA, UA) == CAPMONSTER
