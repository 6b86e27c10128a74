"""DataDome: checked when built (DataDome's captcha URL, ``t=bv`` refused as a banned IP),
each provider's wire format (in.php's ``datadome``, 2Captcha's and CapSolver's
DataDomeSliderTask, CapMonster's CustomTask class DataDome), the proxy every provider
requires, one cookie solution whatever the provider, the catalogue's cells with their
sources, and the sandbox's checks and solutions as each provider documents them."""

from __future__ import annotations

import random
from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput, ProviderUnavailable
from captcha_tasks.provider import DataDome, Proxy
from captcha_tasks.provider.answers import classic_solution, json_solution
from captcha_tasks.provider.captchas import for_type
from captcha_tasks.provider.classic_params import submit_params
from captcha_tasks.provider.json_dialects import dialect_for
from captcha_tasks.provider.json_tasks import task_for
from captcha_tasks.provider.offers import (
    NEVER_SOLVED,
    SOURCES,
    catalogue,
    check_offered,
    offered_by,
    refusal,
)
from captcha_tasks_sandbox.answers import datadome_cookie as sandbox_cookie
from captcha_tasks_sandbox.json_protocol import (
    JsonError,
    dialect_code,
    parse_task,
    solution,
)
from captcha_tasks_sandbox.protocol import ApiError, parse_submission

PAGE = "https://example.com/account"
#: CapSolver's example URL's shape (initialCid, hash, cid, t, referer, s, e).
URL = (
    "https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA1QGvUmJwyYoAwpyjNg%3D%3D"
    "&hash=789361B674144528D0B7EE76B35826&cid=6QAEcL8coBYTi9tYLmjCdyKmNNyHz1x&t=fe"
    "&referer=https%3A%2F%2Fexample.com%2Faccount&s=40070&e=3e531bd3b30650f2e810ac72cd80adb5"
)
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0.0.0"
COOKIE = "datadome=6BvxqELMoorFNoo7GT1JyfP_mhz"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")

DD = DataDome(URL, PAGE, UA, datadome_cookie=COOKIE)
BARE = DataDome(URL, PAGE, UA)
ALL = ["2captcha", "2captcha-v2", "anticaptcha", "capsolver", "capmonster", "captchaai"]


def test_good_values_build_and_the_cookie_is_kept_as_name_and_value() -> None:
    assert DD.validate() is DD and BARE.datadome_cookie is None
    assert DataDome(URL, PAGE, UA, datadome_cookie="6BvxqE").datadome_cookie == "datadome=6BvxqE"
    assert "6BvxqE" not in repr(DD)  # the cookie is one visitor's: never in a repr


def test_a_banned_ip_is_refused_with_its_own_code_and_nothing_sent() -> None:
    with pytest.raises(InvalidTaskInput, match="DataDome banned this IP") as info:
        DataDome(URL.replace("t=fe", "t=bv"), PAGE, UA)
    assert info.value.code == "DATADOME_IP_BANNED" and "Nothing was sent" in str(info.value)


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("DataDome.captcha_url", lambda: DataDome(URL.replace("https", "http"), PAGE, UA)),
        ("DataDome.captcha_url", lambda: DataDome(URL.replace("captcha-delivery", "x"), PAGE, UA)),
        ("DataDome.captcha_url", lambda: DataDome(URL.replace("/captcha/", "/c/"), PAGE, UA)),
        ("DataDome.captcha_url", lambda: DataDome(URL.replace("&t=fe", ""), PAGE, UA)),
        ("DataDome.captcha_url", lambda: DataDome(URL.replace("t=fe", "t=it"), PAGE, UA)),
        ("DataDome.captcha_url", lambda: DataDome("geo.captcha-delivery.com", PAGE, UA)),
        ("DataDome.pageurl", lambda: DataDome(URL, "example.com/account", UA)),
        ("DataDome.user_agent", lambda: DataDome(URL, PAGE, "")),
        ("DataDome.user_agent", lambda: DataDome(URL, PAGE, "x" * 513)),
        ("DataDome.datadome_cookie", lambda: DataDome(URL, PAGE, UA, datadome_cookie="a b")),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field) as info:
        build()
    assert info.value.code == "INVALID_INPUT"


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2's datadome(): method=datadome, captcha_url, pageurl,
    # userAgent, and the proxy (added by the client as proxy / proxytype).
    expected = {"method": "datadome", "captcha_url": URL, "pageurl": PAGE, "userAgent": UA}
    assert submit_params(DD) == expected


@pytest.mark.parametrize("provider", ["2captcha-v2", "capsolver"])
def test_json_task_of_2captcha_and_capsolver(provider: str) -> None:
    task = task_for(dialect_for(provider), DD, PROXY)  # type: ignore[arg-type]
    assert task["type"] == "DataDomeSliderTask"
    assert (task["websiteURL"], task["captchaUrl"], task["userAgent"]) == (PAGE, URL, UA)
    assert "metadata" not in task and "datadomeCookie" not in str(task)
    if provider == "capsolver":
        assert task["proxy"] == "http:10.1.2.3:8080:user:secret"
    else:
        assert (task["proxyAddress"], task["proxyPort"]) == ("10.1.2.3", 8080)


def test_json_task_of_capmonster_is_its_custom_task() -> None:
    task = task_for(dialect_for("capmonster"), DD, PROXY)
    assert (task["type"], task["class"], task["websiteURL"]) == ("CustomTask", "DataDome", PAGE)
    assert task["metadata"] == {"captchaUrl": URL, "datadomeCookie": COOKIE}
    assert task["userAgent"] == UA and task["proxyAddress"] == "10.1.2.3"


@pytest.mark.parametrize("provider", ["2captcha", "2captcha-v2", "capsolver", "capmonster"])
def test_every_provider_that_offers_it_requires_a_proxy(provider: str) -> None:
    assert refusal(provider, DD, proxied=True) is None
    reason = refusal(provider, DD, proxied=False)
    assert reason is not None and "without a proxy" in reason
    with pytest.raises(InvalidTaskInput) as info:
        check_offered(provider, DD)  # type: ignore[arg-type]
    assert info.value.code == "TYPE_NOT_OFFERED"


def test_capmonster_without_the_challenges_cookie_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(InvalidTaskInput, match="datadome_cookie") as info:
        check_offered("capmonster", BARE, proxied=True)
    assert info.value.code == "TYPE_NOT_OFFERED"
    with pytest.raises(InvalidTaskInput, match="datadome_cookie"):
        task_for(dialect_for("capmonster"), BARE, PROXY)
    assert offered_by(BARE) == ["2captcha", "2captcha-v2", "capsolver"]


def test_anticaptcha_and_captchaai_do_not_offer_it_and_every_cell_has_its_own_source() -> None:
    for provider in ("anticaptcha", "captchaai"):
        with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
            check_offered(provider, DD, proxied=True)  # type: ignore[arg-type]
        assert info.value.code == "TYPE_NOT_OFFERED" and "DataDome" in str(info.value)
    assert offered_by(DD) == ["2captcha", "2captcha-v2", "capsolver", "capmonster"]
    for provider, row in catalogue().items():
        cell = row["datadome"]
        offered = "datadome" not in NEVER_SOLVED[provider]
        assert (cell.state == "offered") == offered, provider
        assert cell.source != SOURCES[provider]["*"], provider  # a cell of its own
    assert catalogue()["anticaptcha"]["datadome"].state == "not offered"


# One solution shape whatever the provider.

LINE = "datadome=t355h~euUF_bs; Max-Age=31536000; Domain=.example.com; Path=/; Secure; SameSite=Lax"
SHAPE = {"name": "datadome", "value": "t355h~euUF_bs", "set_cookie": LINE, "domain": ".example.com"}


def test_every_providers_answer_becomes_the_one_cookie_shape() -> None:
    # CapSolver's and 2Captcha's JSON ``cookie``; CapMonster's per-domain cookies (the
    # value without its name); res.php's line.
    assert json_solution({"cookie": LINE}) == SHAPE
    capmonster = {"domains": {"example.com": {"cookies": {"datadome": LINE[9:]}}}}
    assert json_solution(capmonster) == SHAPE
    assert for_type("datadome", classic_solution(LINE)) == SHAPE
    assert for_type("datadome", SHAPE) == SHAPE
    # An AWS WAF cookie still reads as one.
    assert json_solution({"cookie": "abc"}) == {"aws_waf_token": "abc"}


@pytest.mark.parametrize(
    "answer",
    [
        {"domains": {"example.com": {"cookies": {}}}},
        {"domains": {"example.com": "datadome=x"}},
    ],
)
def test_a_malformed_cookie_is_refused_not_handed_on(answer: dict[str, Any]) -> None:
    with pytest.raises(ProviderUnavailable):
        json_solution(answer)
    with pytest.raises(ProviderUnavailable):
        for_type("datadome", "datadome=; Path=/")
    with pytest.raises(ProviderUnavailable):
        for_type("datadome", "other=1")


# The sandbox: each provider's checks, codes and solution fields.


def _classic(**changes: str) -> dict[str, str]:
    params = {
        "method": "datadome",
        "captcha_url": URL,
        "pageurl": PAGE,
        "userAgent": UA,
        "proxy": "user:secret@10.1.2.3:8080",
        "proxytype": "HTTP",
    }
    params.update(changes)
    return {k: v for k, v in params.items() if v != "-"}


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    sub = parse_submission(_classic(), {}, 100, 10_000)
    assert (sub.kind, sub.hostname, sub.user_agent) == ("datadome", "example.com", UA)
    for changes, code in (
        ({"captcha_url": URL.replace("t=fe", "t=bv")}, "ERROR_BAD_PARAMETERS"),
        ({"captcha_url": "https://example.com/captcha/?t=fe"}, "ERROR_BAD_PARAMETERS"),
        ({"captcha_url": "-"}, "ERROR_BAD_PARAMETERS"),
        ({"userAgent": "-"}, "ERROR_BAD_PARAMETERS"),
        ({"proxy": "-"}, "ERROR_BAD_PARAMETERS"),
        ({"proxy": "not a proxy"}, "ERROR_BAD_PROXY"),
        ({"pageurl": "-"}, "ERROR_PAGEURL"),
    ):
        with pytest.raises(ApiError) as info:
            parse_submission(_classic(**changes), {}, 100, 10_000)
        assert info.value.code == code, changes


FIELDS = {"proxyType": "http", "proxyAddress": "10.1.2.3", "proxyPort": 8080}
TASKS = {
    "2captcha-v2": {"type": "DataDomeSliderTask", "captchaUrl": URL, "userAgent": UA, **FIELDS},
    "capsolver": {
        "type": "DataDomeSliderTask",
        "captchaUrl": URL,
        "userAgent": UA,
        "proxy": "socks5:10.1.2.3:1080:user:secret",
    },
    "capmonster": {
        "type": "CustomTask",
        "class": "DataDome",
        "metadata": {"captchaUrl": URL, "datadomeCookie": COOKIE},
        **FIELDS,
    },
}


@pytest.mark.parametrize("dialect", sorted(TASKS))
def test_sandbox_json_takes_each_dialects_task_and_refuses_it_without_a_proxy(
    dialect: str,
) -> None:
    task = {**TASKS[dialect], "websiteURL": PAGE}
    sub, name = parse_task(dialect, task, 100, 10_000)
    assert (name, sub.kind, sub.hostname) == (task["type"], "datadome", "example.com")
    no_proxy = {k: v for k, v in task.items() if k not in (*FIELDS, "proxy")}
    expected = dialect_code(dialect, "ERROR_INCORRECT_SESSION_DATA")
    broken: list[dict[str, Any]] = [no_proxy, {**task, "websiteURL": "x"}]
    if dialect == "capmonster":
        broken.append({**task, "metadata": {"captchaUrl": URL}})  # no datadomeCookie
    else:
        broken.append({**task, "captchaUrl": URL.replace("t=fe", "t=bv")})
        broken.append({k: v for k, v in task.items() if k != "userAgent"})
    for each in broken:
        with pytest.raises(JsonError) as info:
            parse_task(dialect, each, 100, 10_000)
        assert dialect_code(dialect, info.value.code) == expected, each


def test_sandbox_capsolver_takes_both_of_its_spellings() -> None:
    task = {**TASKS["capsolver"], "websiteURL": PAGE, "type": "DatadomeSliderTask"}
    assert parse_task("capsolver", task, 100, 10_000)[0].kind == "datadome"


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("anticaptcha", {"type": "DataDomeSliderTask", **FIELDS}),
        ("anticaptcha", {"type": "CustomTask", "class": "DataDome", **FIELDS}),
        ("capmonster", {"type": "DataDomeSliderTask", **FIELDS}),
        ("2captcha-v2", {"type": "CustomTask", "class": "DataDome", **FIELDS}),
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task: dict[str, Any]) -> None:
    full = {**task, "websiteURL": PAGE, "captchaUrl": URL, "userAgent": UA}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, full, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_solutions_carry_the_cookie_as_each_dialect_documents() -> None:
    value, line = sandbox_cookie("example.com", random.Random(1))
    assert line.startswith(f"datadome={value}; Max-Age=31536000; Domain=.example.com; Path=/")
    assert solution("capsolver", "datadome", line) == {"cookie": line}
    assert solution("2captcha-v2", "datadome", line) == {"cookie": line}
    out = solution("capmonster", "datadome", line)
    assert out == {"domains": {"example.com": {"cookies": {"datadome": line[9:]}}}}
    # What the product reads from each is the same cookie.
    shapes = [json_solution(solution(d, "datadome", line)) for d in ("capsolver", "capmonster")]
    assert shapes[0] == shapes[1] and shapes[0]["value"] == value  # type: ignore[index]
    assert sandbox_cookie("127.0.0.1", random.Random(1))[1].count("Domain=127.0.0.1;") == 1
