"""NetEase Yidun: checked when built, each provider's wire format (in.php's ``yidun``,
2Captcha's and CapMonster Cloud's ``YidunTask``), the catalogue's cells with their
sources, and the sandbox's checks with each provider's error code."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import Proxy, Yidun
from captcha_tasks.provider.classic_params import submit_params
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
KEY = "07e2387ab53a4d6f930b8d9a9be71bdf"
LIB = "https://cstaticdun.126.net/load.min.js"
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")

PLAIN = Yidun(KEY, PAGE)
ENTERPRISE = Yidun(
    KEY,
    PAGE,
    script_url=LIB,
    api_server="c.dun.163.com",
    challenge="d0c2f9b0a1",
    hcg="7b6f5a",
    hct=1733571234567,
    user_agent=UA,
)


def test_good_values_build_and_validate() -> None:
    assert PLAIN.validate() is PLAIN and ENTERPRISE.validate() is ENTERPRISE
    assert PLAIN.script_url is None and PLAIN.hct is None


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("Yidun.sitekey", lambda: Yidun("short", PAGE)),
        ("Yidun.sitekey", lambda: Yidun(KEY + "!", PAGE)),
        ("Yidun.sitekey", lambda: Yidun(42, PAGE)),
        ("Yidun.pageurl", lambda: Yidun(KEY, "example.com/login")),
        ("Yidun.script_url", lambda: Yidun(KEY, PAGE, script_url="load.min.js")),
        ("Yidun.api_server", lambda: Yidun(KEY, PAGE, api_server="https://c.dun.163.com")),
        ("Yidun.challenge", lambda: Yidun(KEY, PAGE, challenge="")),
        ("Yidun.hcg", lambda: Yidun(KEY, PAGE, hcg="a b")),
        ("Yidun.hct", lambda: Yidun(KEY, PAGE, hct="1733571234567")),
        ("Yidun.hct", lambda: Yidun(KEY, PAGE, hct=True)),
        ("Yidun.hct", lambda: Yidun(KEY, PAGE, hct=-1)),
        ("Yidun.user_agent", lambda: Yidun(KEY, PAGE, user_agent="a\nb")),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field):
        build()


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2's yidun(): method=yidun, sitekey, pageurl, its options under
    # their own names.
    assert submit_params(PLAIN) == {"method": "yidun", "sitekey": KEY, "pageurl": PAGE}
    assert submit_params(ENTERPRISE) == {
        "method": "yidun",
        "sitekey": KEY,
        "pageurl": PAGE,
        "yidun_get_lib": LIB,
        "yidun_api_server_subdomain": "c.dun.163.com",
        "challenge": "d0c2f9b0a1",
        "hcg": "7b6f5a",
        "hct": "1733571234567",
        "useragent": UA,
    }


@pytest.mark.parametrize(
    ("provider", "name"), [("2captcha-v2", "YidunTaskProxyless"), ("capmonster", "YidunTask")]
)
def test_json_task_per_dialect(provider: str, name: str) -> None:
    assert task_for(dialect_for(provider), PLAIN) == {  # type: ignore[arg-type]
        "type": name,
        "websiteURL": PAGE,
        "websiteKey": KEY,
    }
    assert task_for(dialect_for(provider), ENTERPRISE) == {  # type: ignore[arg-type]
        "type": name,
        "websiteURL": PAGE,
        "websiteKey": KEY,
        "yidunGetLib": LIB,
        "yidunApiServerSubdomain": "c.dun.163.com",
        "challenge": "d0c2f9b0a1",
        "hcg": "7b6f5a",
        "hct": 1733571234567,
        "userAgent": UA,
    }


@pytest.mark.parametrize("provider", ["2captcha-v2", "capmonster"])
def test_the_proxied_variant_takes_the_proxy(provider: str) -> None:
    task = task_for(dialect_for(provider), PLAIN, PROXY)  # type: ignore[arg-type]
    assert task["type"] == "YidunTask"
    assert (task["proxyAddress"], task["proxyPort"], task["proxyLogin"]) == (
        "10.1.2.3",
        8080,
        "user",
    )


@pytest.mark.parametrize("provider", ["captchaai", "anticaptcha", "capsolver"])
def test_unoffered_cells_are_refused_naming_provider_and_type(provider: str) -> None:
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        check_offered(provider, PLAIN)  # type: ignore[arg-type]
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert "Yidun" in str(info.value)
    assert "yidun" in NEVER_SOLVED[provider]  # type: ignore[index]


def test_who_offers_it_and_every_cell_has_its_own_source() -> None:
    assert offered_by(PLAIN) == ["2captcha", "2captcha-v2", "capmonster"]
    for provider, row in catalogue().items():
        cell = row["yidun"]
        assert (cell.state == "offered") == ("yidun" not in NEVER_SOLVED[provider]), provider
        assert cell.source and cell.source != SOURCES[provider]["*"], provider
    # 2Captcha's JSON names come from a third party: the source says so.
    assert "third party" in str(catalogue()["2captcha-v2"]["yidun"].source)


# The sandbox: each provider's code for a missing or bad field.


def _classic(**params: str) -> Any:
    return parse_submission(params, {}, 100, 10_000)


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    sub = _classic(method="yidun", sitekey=KEY, pageurl=PAGE, useragent=UA, hct="17")
    assert (sub.kind, sub.sitekey, sub.hostname, sub.user_agent) == (
        "yidun",
        KEY,
        "example.com",
        UA,
    )
    for broken, code in (
        ({"pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": "nope", "pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": KEY}, "ERROR_PAGEURL"),
        ({"sitekey": KEY, "pageurl": PAGE, "yidun_get_lib": "load.js"}, "ERROR_BAD_PARAMETERS"),
        (
            {"sitekey": KEY, "pageurl": PAGE, "yidun_api_server_subdomain": "a/b"},
            "ERROR_BAD_PARAMETERS",
        ),
        ({"sitekey": KEY, "pageurl": PAGE, "hct": "x1"}, "ERROR_BAD_PARAMETERS"),
    ):
        with pytest.raises(ApiError) as info:
            _classic(method="yidun", **broken)
        assert info.value.code == code, broken


@pytest.mark.parametrize(
    ("dialect", "task_type"),
    [
        ("2captcha-v2", "YidunTaskProxyless"),
        ("capmonster", "YidunTask"),
    ],
)
def test_sandbox_json_checks_each_field_with_the_dialects_code(
    dialect: str, task_type: str
) -> None:
    sub, name = parse_task(
        dialect,
        {"type": task_type, "websiteURL": PAGE, "websiteKey": KEY, "hct": 17, "userAgent": UA},
        100,
        10_000,
    )
    assert (name, sub.kind, sub.sitekey, sub.user_agent) == (task_type, "yidun", KEY, UA)
    expected = dialect_code(dialect, "ERROR_INCORRECT_SESSION_DATA")
    for broken in (
        {"websiteURL": PAGE},
        {"websiteKey": KEY},
        {"websiteURL": PAGE, "websiteKey": 1},
        {"websiteURL": PAGE, "websiteKey": KEY, "hct": "17"},
        {"websiteURL": PAGE, "websiteKey": KEY, "yidunGetLib": "load.js"},
    ):
        with pytest.raises(JsonError) as info:
            parse_task(dialect, {"type": task_type, **broken}, 100, 10_000)
        assert dialect_code(dialect, info.value.code) == expected, broken


@pytest.mark.parametrize(
    ("dialect", "task_type"),
    [
        ("anticaptcha", "YidunTaskProxyless"),
        ("capsolver", "YidunTask"),
        ("capmonster", "YidunTaskProxyless"),
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task_type: str) -> None:
    with pytest.raises(JsonError) as info:
        parse_task(dialect, {"type": task_type, "websiteURL": PAGE, "websiteKey": KEY}, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_the_proxied_type_needs_the_proxy_at_2captcha_only() -> None:
    task = {"type": "YidunTask", "websiteURL": PAGE, "websiteKey": KEY}
    with pytest.raises(JsonError):
        parse_task("2captcha-v2", task, 1, 9)
    assert parse_task("capmonster", task, 1, 9)[0].kind == "yidun"  # its proxy is optional


def test_sandbox_in_php_refuses_it_at_captchaai() -> None:
    assert "yidun" in NOT_OFFERED_METHODS["captchaai"]


def test_sandbox_solutions_carry_the_token_alone() -> None:
    for dialect in ("2captcha-v2", "capmonster"):
        assert solution(dialect, "yidun", "CN31_abc") == {"token": "CN31_abc"}
