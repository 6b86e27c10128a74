"""Binance's captcha: checked when built, each provider's wire format (in.php's
``binance``, 2Captcha's and CapMonster Cloud's ``BinanceTask``), the catalogue's cells
with their sources, the answer's user agent, and the sandbox's checks with each
provider's error code."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import Binance, Proxy
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

PAGE = "https://accounts.binance.com/en/login"
KEY = "login"
VALIDATE = "cb0bfefa598b4d3a8e3f6a40b5a7e9c1"
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")

PLAIN = Binance(KEY, PAGE, VALIDATE)
WITH_AGENT = Binance(KEY, PAGE, VALIDATE, user_agent=UA)


def test_good_values_build_and_validate() -> None:
    assert PLAIN.validate() is PLAIN and WITH_AGENT.validate() is WITH_AGENT
    assert PLAIN.user_agent is None
    Binance("bizCode_1.x", PAGE, "a1b2c3d4-e5f6")  # other spellings of both ids


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("Binance.sitekey", lambda: Binance("l", PAGE, VALIDATE)),
        ("Binance.sitekey", lambda: Binance("log in", PAGE, VALIDATE)),
        ("Binance.sitekey", lambda: Binance(None, PAGE, VALIDATE)),
        ("Binance.pageurl", lambda: Binance(KEY, "accounts.binance.com", VALIDATE)),
        ("Binance.validate_id", lambda: Binance(KEY, PAGE, "")),
        ("Binance.validate_id", lambda: Binance(KEY, PAGE, "short")),
        ("Binance.validate_id", lambda: Binance(KEY, PAGE, VALIDATE + "#")),
        ("Binance.validate_id", lambda: Binance(KEY, PAGE, 12345678)),
        ("Binance.user_agent", lambda: Binance(KEY, PAGE, VALIDATE, user_agent="")),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field):
        build()


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2's binance(): method=binance, pageurl, sitekey, validate_id and
    # the optional useragent.
    expected = {"method": "binance", "sitekey": KEY, "pageurl": PAGE, "validate_id": VALIDATE}
    assert submit_params(PLAIN) == expected
    assert submit_params(WITH_AGENT) == {**expected, "useragent": UA}


@pytest.mark.parametrize(
    ("provider", "name"), [("2captcha-v2", "BinanceTaskProxyless"), ("capmonster", "BinanceTask")]
)
def test_json_task_per_dialect(provider: str, name: str) -> None:
    expected = {"type": name, "websiteURL": PAGE, "websiteKey": KEY, "validateId": VALIDATE}
    assert task_for(dialect_for(provider), PLAIN) == expected  # type: ignore[arg-type]
    assert task_for(dialect_for(provider), WITH_AGENT) == {  # type: ignore[arg-type]
        **expected,
        "userAgent": UA,
    }


@pytest.mark.parametrize("provider", ["2captcha-v2", "capmonster"])
def test_the_proxied_variant_takes_the_proxy(provider: str) -> None:
    task = task_for(dialect_for(provider), PLAIN, PROXY)  # type: ignore[arg-type]
    assert task["type"] == "BinanceTask"
    assert (task["proxyAddress"], task["proxyPort"], task["proxyLogin"]) == (
        "10.1.2.3",
        8080,
        "user",
    )


def test_the_answers_user_agent_is_the_results() -> None:
    # Both providers answer {token, userAgent}: the token is the solution, the agent the
    # result's user_agent.
    answer = _answer("7", {"status": "ready", "solution": {"token": "captcha#ab", "userAgent": UA}})
    assert answer is not None
    assert (answer.solution, answer.user_agent) == ("captcha#ab", UA)


@pytest.mark.parametrize("provider", ["captchaai", "anticaptcha", "capsolver"])
def test_unoffered_cells_are_refused_naming_provider_and_type(provider: str) -> None:
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        check_offered(provider, PLAIN)  # type: ignore[arg-type]
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert "Binance" in str(info.value)
    assert "binance" in NEVER_SOLVED[provider]  # type: ignore[index]


def test_who_offers_it_and_every_cell_has_its_own_source() -> None:
    assert offered_by(PLAIN) == ["2captcha", "2captcha-v2", "capmonster"]
    for provider, row in catalogue().items():
        cell = row["binance"]
        assert (cell.state == "offered") == ("binance" not in NEVER_SOLVED[provider]), provider
        assert cell.source and cell.source != SOURCES[provider]["*"], provider
    assert "third party" in str(catalogue()["2captcha-v2"]["binance"].source)


# The sandbox: each provider's code for a missing or bad field.


def _classic(**params: str) -> Any:
    return parse_submission(params, {}, 100, 10_000)


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    sub = _classic(method="binance", sitekey=KEY, pageurl=PAGE, validate_id=VALIDATE, useragent=UA)
    assert (sub.kind, sub.sitekey, sub.hostname, sub.user_agent) == (
        "binance",
        KEY,
        "accounts.binance.com",
        UA,
    )
    for broken, code in (
        ({"pageurl": PAGE, "validate_id": VALIDATE}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": KEY, "pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": KEY, "pageurl": PAGE, "validate_id": "x y"}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": KEY, "validate_id": VALIDATE}, "ERROR_PAGEURL"),
    ):
        with pytest.raises(ApiError) as info:
            _classic(method="binance", **broken)
        assert info.value.code == code, broken
    assert "binance" in NOT_OFFERED_METHODS["captchaai"]


@pytest.mark.parametrize(
    ("dialect", "task_type"),
    [("2captcha-v2", "BinanceTaskProxyless"), ("capmonster", "BinanceTask")],
)
def test_sandbox_json_checks_each_field_with_the_dialects_code(
    dialect: str, task_type: str
) -> None:
    full = {"websiteURL": PAGE, "websiteKey": KEY, "validateId": VALIDATE, "userAgent": UA}
    sub, name = parse_task(dialect, {"type": task_type, **full}, 100, 10_000)
    assert (name, sub.kind, sub.sitekey, sub.user_agent) == (task_type, "binance", KEY, UA)
    expected = dialect_code(dialect, "ERROR_INCORRECT_SESSION_DATA")
    for missing in ("websiteURL", "websiteKey", "validateId"):
        broken = {name: value for name, value in full.items() if name != missing}
        with pytest.raises(JsonError) as info:
            parse_task(dialect, {"type": task_type, **broken}, 100, 10_000)
        assert dialect_code(dialect, info.value.code) == expected, missing


@pytest.mark.parametrize(
    ("dialect", "task_type"),
    [
        ("anticaptcha", "BinanceTaskProxyless"),
        ("capsolver", "BinanceTask"),
        ("capmonster", "BinanceTaskProxyless"),
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task_type: str) -> None:
    task = {"type": task_type, "websiteURL": PAGE, "websiteKey": KEY, "validateId": VALIDATE}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, task, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_the_proxied_type_needs_the_proxy_at_2captcha_only() -> None:
    task = {"type": "BinanceTask", "websiteURL": PAGE, "websiteKey": KEY, "validateId": VALIDATE}
    with pytest.raises(JsonError):
        parse_task("2captcha-v2", task, 1, 9)
    assert parse_task("capmonster", task, 1, 9)[0].kind == "binance"  # its proxy is optional


def test_sandbox_solutions_carry_the_token_and_the_user_agent() -> None:
    for dialect in ("2captcha-v2", "capmonster"):
        assert solution(dialect, "binance", "captcha#ab", UA) == {
            "token": "captcha#ab",
            "userAgent": UA,
        }
        assert solution(dialect, "binance", "captcha#ab")["userAgent"]  # its workers' own
