"""Friendly Captcha: checked when built, each provider's wire format (in.php's
``friendly_captcha``, every JSON dialect's task, CapMonster's CustomTask with the widget
script's URL), the catalogue's cells with their sources, and the sandbox's checks with
each provider's error code."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import FriendlyCaptcha, Proxy
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
from captcha_tasks_sandbox.json_protocol import (
    JsonError,
    dialect_code,
    parse_task,
    solution,
)
from captcha_tasks_sandbox.protocol import ApiError, parse_submission

PAGE = "https://example.com/login"
KEY = "FCMDESUD3M34857N"  # Anti-Captcha's example
V1 = "https://cdn.jsdelivr.net/npm/friendly-challenge@0.9.12/widget.module.min.js"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")

FRIENDLY = FriendlyCaptcha(KEY, PAGE, module_script_url=V1)
BARE = FriendlyCaptcha(KEY, PAGE)


def test_good_values_build_and_validate() -> None:
    assert FRIENDLY.validate() is FRIENDLY and BARE.module_script_url is None
    FriendlyCaptcha("FBTMEAFCK477GTRU", PAGE)  # CapSolver's example


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("FriendlyCaptcha.sitekey", lambda: FriendlyCaptcha("FCM", PAGE)),
        ("FriendlyCaptcha.sitekey", lambda: FriendlyCaptcha("FCMDESUD 3M34857N", PAGE)),
        ("FriendlyCaptcha.sitekey", lambda: FriendlyCaptcha(42, PAGE)),
        ("FriendlyCaptcha.pageurl", lambda: FriendlyCaptcha(KEY, "example.com/login")),
        (
            "FriendlyCaptcha.module_script_url",
            lambda: FriendlyCaptcha(KEY, PAGE, module_script_url="widget.module.min.js"),
        ),
        (
            "FriendlyCaptcha.module_script_url",
            lambda: FriendlyCaptcha(KEY, PAGE, module_script_url="javascript:alert(1)"),
        ),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field):
        build()


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2: friendly_captcha() sends method=friendly_captcha with the
    # key and the page; the script URL is CapMonster's alone.
    expected = {"method": "friendly_captcha", "sitekey": KEY, "pageurl": PAGE}
    assert submit_params(FRIENDLY) == expected


@pytest.mark.parametrize(
    ("provider", "expected"),
    [
        ("2captcha-v2", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("anticaptcha", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("capsolver", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("capmonster", {"type": "CustomTask", "class": "friendly", "metadata": {"apiGetLib": V1}}),
    ],
)
def test_json_task_per_dialect(provider: str, expected: dict[str, Any]) -> None:
    task = task_for(dialect_for(provider), FRIENDLY)  # type: ignore[arg-type]
    assert task == {**expected, "websiteURL": PAGE, "websiteKey": KEY}


@pytest.mark.parametrize(
    ("provider", "name"),
    [
        ("2captcha-v2", "FriendlyCaptchaTask"),
        ("anticaptcha", "FriendlyCaptchaTask"),
        ("capmonster", "CustomTask"),
    ],
)
def test_proxied_variants_take_the_proxy(provider: str, name: str) -> None:
    task = task_for(dialect_for(provider), FRIENDLY, PROXY)  # type: ignore[arg-type]
    assert task["type"] == name
    assert (task["proxyAddress"], task["proxyPort"]) == ("10.1.2.3", 8080)


def test_capsolver_has_no_proxied_variant() -> None:
    reason = refusal("capsolver", FRIENDLY, proxied=True)
    assert reason is not None and "through a proxy" in reason
    assert refusal("capsolver", FRIENDLY) is None


def test_capmonster_without_the_script_url_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(InvalidTaskInput, match="module_script_url") as info:
        check_offered("capmonster", BARE)
    assert info.value.code == "TYPE_NOT_OFFERED"
    with pytest.raises(InvalidTaskInput, match="module_script_url"):
        task_for(dialect_for("capmonster"), BARE)
    # The others need no script URL.
    assert offered_by(BARE) == ["2captcha", "2captcha-v2", "anticaptcha", "capsolver"]


def test_captchaai_does_not_offer_it_and_every_cell_has_its_own_source() -> None:
    with pytest.raises(InvalidTaskInput, match="provider captchaai") as info:
        check_offered("captchaai", FRIENDLY)
    assert info.value.code == "TYPE_NOT_OFFERED" and "FriendlyCaptcha" in str(info.value)
    assert offered_by(FRIENDLY) == [
        "2captcha",
        "2captcha-v2",
        "anticaptcha",
        "capsolver",
        "capmonster",
    ]
    for provider, row in catalogue().items():
        cell = row["friendly_captcha"]
        offered = "friendly_captcha" not in NEVER_SOLVED[provider]
        assert (cell.state == "offered") == offered, provider
        assert cell.source != SOURCES[provider]["*"], provider  # a cell of its own
    assert catalogue()["captchaai"]["friendly_captcha"].state == "not offered"


# The sandbox: each provider's code for a missing or bad field.


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    sub = parse_submission(
        {"method": "friendly_captcha", "sitekey": KEY, "pageurl": PAGE}, {}, 100, 10_000
    )
    assert (sub.kind, sub.sitekey, sub.hostname) == ("friendly_captcha", KEY, "example.com")
    for params, code in (
        ({"pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": "no!", "pageurl": PAGE}, "ERROR_BAD_PARAMETERS"),
        ({"sitekey": KEY}, "ERROR_PAGEURL"),
    ):
        with pytest.raises(ApiError) as info:
            parse_submission({"method": "friendly_captcha", **params}, {}, 100, 10_000)
        assert info.value.code == code, params


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("2captcha-v2", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("anticaptcha", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("capsolver", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("capmonster", {"type": "CustomTask", "class": "friendly", "metadata": {"apiGetLib": V1}}),
    ],
)
def test_sandbox_json_checks_each_field_with_the_dialects_code(
    dialect: str, task: dict[str, Any]
) -> None:
    sub, name = parse_task(dialect, {**task, "websiteURL": PAGE, "websiteKey": KEY}, 100, 10_000)
    assert (name, sub.kind, sub.sitekey) == (task["type"], "friendly_captcha", KEY)
    expected = dialect_code(dialect, "ERROR_INCORRECT_SESSION_DATA")
    for broken in (
        {"websiteURL": PAGE},
        {"websiteKey": KEY},
        {"websiteURL": PAGE, "websiteKey": 1},
    ):
        with pytest.raises(JsonError) as info:
            parse_task(dialect, {**task, **broken}, 100, 10_000)
        assert dialect_code(dialect, info.value.code) == expected, broken


@pytest.mark.parametrize("metadata", [None, {}, {"apiGetLib": "site.min.js"}, {"apiGetLib": 3}])
def test_sandbox_capmonster_needs_the_script_url(metadata: object) -> None:
    task = {"type": "CustomTask", "class": "friendly", "websiteURL": PAGE, "websiteKey": KEY}
    if metadata is not None:
        task["metadata"] = metadata
    with pytest.raises(JsonError) as info:
        parse_task("capmonster", task, 100, 10_000)
    assert dialect_code("capmonster", info.value.code) == "ERROR_INCORRECT_SESSION_DATA"


@pytest.mark.parametrize(
    ("dialect", "task"),
    [
        ("capmonster", {"type": "CustomTask", "class": "unknown"}),
        ("capmonster", {"type": "FriendlyCaptchaTaskProxyless"}),
        ("capsolver", {"type": "FriendlyCaptchaTask"}),
        ("anticaptcha", {"type": "CustomTask", "class": "friendly"}),
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task: dict[str, Any]) -> None:
    full = {**task, "websiteURL": PAGE, "websiteKey": KEY, "metadata": {"apiGetLib": V1}}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, full, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_solutions_carry_the_token_as_each_dialect_documents() -> None:
    token = "72b43902cd1457f6880dd3735c50070d.abc"
    assert solution("capsolver", "friendly_captcha", token) == {"token": token}
    assert solution("2captcha-v2", "friendly_captcha", token) == {"token": token}
    out = solution("anticaptcha", "friendly_captcha", token)
    assert out["token"] == token and out["userAgent"]  # its FriendlyCaptchaTask page
