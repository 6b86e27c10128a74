"""MTCaptcha and Prosopo: checked when built, each provider's wire format (in.php's
``mt_captcha`` / ``prosopo``, every JSON dialect's task), the catalogue's cells with their
sources, and the sandbox's checks with each provider's error code."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider import MtCaptcha, Prosopo, Proxy
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
MT_KEY = "MTPublic-KzqLY1cKH"
PROSOPO_KEY = "5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm"
PROXY = Proxy("10.1.2.3", 8080, "HTTP", "user", "secret")

MT = MtCaptcha(MT_KEY, PAGE, action="login", invisible=True)
PROSOPO = Prosopo(PROSOPO_KEY, PAGE)


def test_good_values_build_and_validate() -> None:
    assert MT.validate() is MT and PROSOPO.validate() is PROSOPO
    assert MtCaptcha(MT_KEY, PAGE).action is None and not MtCaptcha(MT_KEY, PAGE).invisible
    # Anti-Captcha's own example key has an "l" (not base58): it must pass.
    Prosopo("5FxMg5jAF3F8d8PrQezDMZh6ZbZd69kDt6FUVb1KaFpSgS2l", PAGE)


@pytest.mark.parametrize(
    ("field", "build"),
    [
        ("MtCaptcha.sitekey", lambda: MtCaptcha("KzqLY1cKH", PAGE)),
        ("MtCaptcha.sitekey", lambda: MtCaptcha("MTPublic-", PAGE)),
        ("MtCaptcha.sitekey", lambda: MtCaptcha("MTPublic-ab cd", PAGE)),
        ("MtCaptcha.sitekey", lambda: MtCaptcha(42, PAGE)),
        ("MtCaptcha.pageurl", lambda: MtCaptcha(MT_KEY, "example.com/login")),
        ("MtCaptcha.pageurl", lambda: MtCaptcha(MT_KEY, "ftp://example.com/")),
        ("MtCaptcha.action", lambda: MtCaptcha(MT_KEY, PAGE, action="")),
        ("MtCaptcha.invisible", lambda: MtCaptcha(MT_KEY, PAGE, invisible="yes")),
        (
            "Prosopo.sitekey",
            lambda: Prosopo("FxMg5jAF3F8d8PrQezDMZh6ZbZd69kDt6FUVb1KaFpSgS2l", PAGE),
        ),
        ("Prosopo.sitekey", lambda: Prosopo(PROSOPO_KEY[:20], PAGE)),
        ("Prosopo.sitekey", lambda: Prosopo(PROSOPO_KEY[:-1] + "!", PAGE)),
        ("Prosopo.pageurl", lambda: Prosopo(PROSOPO_KEY, "")),
    ],
)
def test_bad_values_are_refused_by_field(field: str, build: Any) -> None:
    with pytest.raises(InvalidTaskInput, match=field):
        build()


def test_in_php_params_are_2captchas_documented_ones() -> None:
    # 2captcha-python 2.1.2: mtcaptcha() sends method=mt_captcha, prosopo() method=prosopo,
    # each with sitekey and pageurl only.
    assert submit_params(MT) == {"method": "mt_captcha", "sitekey": MT_KEY, "pageurl": PAGE}
    assert submit_params(PROSOPO) == {"method": "prosopo", "sitekey": PROSOPO_KEY, "pageurl": PAGE}


@pytest.mark.parametrize(
    ("provider", "captcha", "expected"),
    [
        (
            "2captcha-v2",
            MT,
            {"type": "MtCaptchaTaskProxyless", "websiteURL": PAGE, "websiteKey": MT_KEY},
        ),
        (
            "capsolver",
            MT,
            {"type": "MtCaptchaTaskProxyLess", "websiteURL": PAGE, "websiteKey": MT_KEY},
        ),
        (
            "capmonster",
            MT,
            {
                "type": "MTCaptchaTask",
                "websiteURL": PAGE,
                "websiteKey": MT_KEY,
                "pageAction": "login",
                "isInvisible": True,
            },
        ),
        (
            "2captcha-v2",
            PROSOPO,
            {"type": "ProsopoTaskProxyless", "websiteURL": PAGE, "websiteKey": PROSOPO_KEY},
        ),
        (
            "anticaptcha",
            PROSOPO,
            {"type": "ProsopoTaskProxyless", "websiteURL": PAGE, "websiteKey": PROSOPO_KEY},
        ),
        (
            "capmonster",
            PROSOPO,
            {"type": "ProsopoTask", "websiteURL": PAGE, "websiteKey": PROSOPO_KEY},
        ),
    ],
)
def test_json_task_per_dialect(provider: str, captcha: Any, expected: dict[str, Any]) -> None:
    assert task_for(dialect_for(provider), captcha) == expected  # type: ignore[arg-type]


def test_a_visible_mtcaptcha_without_action_sends_neither_option() -> None:
    task = task_for(dialect_for("capmonster"), MtCaptcha(MT_KEY, PAGE))
    assert task == {"type": "MTCaptchaTask", "websiteURL": PAGE, "websiteKey": MT_KEY}


@pytest.mark.parametrize(
    ("provider", "captcha", "name"),
    [
        ("2captcha-v2", MT, "MtCaptchaTask"),
        ("capsolver", MT, "MtCaptchaTask"),
        ("capmonster", MT, "MTCaptchaTask"),
        ("2captcha-v2", PROSOPO, "ProsopoTask"),
        ("anticaptcha", PROSOPO, "ProsopoTask"),
        ("capmonster", PROSOPO, "ProsopoTask"),
    ],
)
def test_proxied_variants_take_the_proxy(provider: str, captcha: Any, name: str) -> None:
    task = task_for(dialect_for(provider), captcha, PROXY)  # type: ignore[arg-type]
    assert task["type"] == name
    if provider == "capsolver":
        assert task["proxy"] == "http:10.1.2.3:8080:user:secret"
    else:
        assert (task["proxyAddress"], task["proxyPort"], task["proxyLogin"]) == (
            "10.1.2.3",
            8080,
            "user",
        )


@pytest.mark.parametrize(
    ("provider", "captcha", "kind"),
    [
        ("captchaai", MT, "mtcaptcha"),
        ("captchaai", PROSOPO, "prosopo"),
        ("anticaptcha", MT, "mtcaptcha"),
        ("capsolver", PROSOPO, "prosopo"),
    ],
)
def test_unoffered_cells_are_refused_naming_provider_and_type(
    provider: str, captcha: Any, kind: str
) -> None:
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        check_offered(provider, captcha)  # type: ignore[arg-type]
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert type(captcha).__name__ in str(info.value)
    assert kind in NEVER_SOLVED[provider]  # type: ignore[index]
    cell = catalogue()[provider][kind]  # type: ignore[index]
    assert cell.state == "not offered" and cell.source


def test_who_offers_each_and_every_cell_has_its_own_source() -> None:
    assert offered_by(MT) == ["2captcha", "2captcha-v2", "capsolver", "capmonster"]
    assert offered_by(PROSOPO) == ["2captcha", "2captcha-v2", "anticaptcha", "capmonster"]
    cells = catalogue()
    for provider, row in cells.items():
        for kind in ("mtcaptcha", "prosopo"):
            cell = row[kind]
            assert (cell.state == "offered") == (kind not in NEVER_SOLVED[provider]), provider
            # A cell of its own, not the provider's catch-all.
            assert cell.source != SOURCES[provider]["*"], (provider, kind)
    assert refusal("capsolver", MT, proxied=True) is None
    assert refusal("2captcha", PROSOPO) is None


# The sandbox: each provider's code for a missing or bad field.


def _classic(**params: str) -> Any:
    return parse_submission(params, {}, 100, 10_000)


def test_sandbox_in_php_checks_each_field_with_2captchas_codes() -> None:
    sub = _classic(method="mt_captcha", sitekey=MT_KEY, pageurl=PAGE)
    assert (sub.kind, sub.sitekey, sub.hostname) == ("mtcaptcha", MT_KEY, "example.com")
    sub = _classic(method="prosopo", sitekey=PROSOPO_KEY, pageurl=PAGE)
    assert (sub.kind, sub.sitekey) == ("prosopo", PROSOPO_KEY)
    for method, key in (("mt_captcha", MT_KEY), ("prosopo", PROSOPO_KEY)):
        with pytest.raises(ApiError) as info:
            _classic(method=method, pageurl=PAGE)
        assert info.value.code == "ERROR_BAD_PARAMETERS"
        with pytest.raises(ApiError) as info:
            _classic(method=method, sitekey="nope", pageurl=PAGE)
        assert info.value.code == "ERROR_BAD_PARAMETERS"
        with pytest.raises(ApiError) as info:
            _classic(method=method, sitekey=key)
        assert info.value.code == "ERROR_PAGEURL"


@pytest.mark.parametrize(
    ("dialect", "task_type"),
    [
        ("2captcha-v2", "MtCaptchaTaskProxyless"),
        ("capsolver", "MtCaptchaTaskProxyLess"),
        ("capmonster", "MTCaptchaTask"),
        ("2captcha-v2", "ProsopoTaskProxyless"),
        ("anticaptcha", "ProsopoTaskProxyless"),
        ("capmonster", "ProsopoTask"),
    ],
)
def test_sandbox_json_checks_each_field_with_the_dialects_code(
    dialect: str, task_type: str
) -> None:
    key = MT_KEY if "Mt" in task_type or "MT" in task_type else PROSOPO_KEY
    sub, name = parse_task(
        dialect, {"type": task_type, "websiteURL": PAGE, "websiteKey": key}, 100, 10_000
    )
    assert name == task_type and sub.sitekey == key
    expected = dialect_code(dialect, "ERROR_INCORRECT_SESSION_DATA")
    for broken in (
        {"websiteURL": PAGE},
        {"websiteKey": key},
        {"websiteURL": PAGE, "websiteKey": 1},
    ):
        with pytest.raises(JsonError) as info:
            parse_task(dialect, {"type": task_type, **broken}, 100, 10_000)
        assert dialect_code(dialect, info.value.code) == expected, broken
    if dialect == "capsolver":
        assert expected == "ERROR_INVALID_TASK_DATA"


@pytest.mark.parametrize(
    ("dialect", "task_type"),
    [
        ("anticaptcha", "MTCaptchaTask"),
        ("anticaptcha", "MtCaptchaTaskProxyless"),
        ("capsolver", "ProsopoTask"),
        ("capsolver", "ProsopoTaskProxyLess"),
    ],
)
def test_sandbox_json_refuses_a_type_the_dialect_lacks(dialect: str, task_type: str) -> None:
    task = {"type": task_type, "websiteURL": PAGE, "websiteKey": MT_KEY}
    with pytest.raises(JsonError) as info:
        parse_task(dialect, task, 100, 10_000)
    assert info.value.code == "ERROR_TASK_NOT_SUPPORTED"


def test_sandbox_json_proxied_types_need_the_proxy() -> None:
    with pytest.raises(JsonError):
        parse_task(
            "2captcha-v2", {"type": "MtCaptchaTask", "websiteURL": PAGE, "websiteKey": MT_KEY}, 1, 9
        )
    with pytest.raises(JsonError):
        parse_task(
            "capsolver", {"type": "MtCaptchaTask", "websiteURL": PAGE, "websiteKey": MT_KEY}, 1, 9
        )


def test_sandbox_solutions_carry_the_token_as_each_dialect_documents() -> None:
    assert solution("capsolver", "mtcaptcha", "v1(abc") == {"token": "v1(abc"}
    assert solution("capmonster", "prosopo", "0x0001ab") == {"token": "0x0001ab"}
    out = solution("anticaptcha", "prosopo", "0x0001ab")
    assert out["token"] == "0x0001ab" and out["userAgent"]
