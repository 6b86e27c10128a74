"""Solve tasks of every family and their variants, run eagerly against the session's real
Redis: arguments refused by name, unknown options refused, and a type the configured
provider does not offer refused before anything is queued."""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from captcha_tasks import (
    solve_aws_waf,
    solve_binance,
    solve_coordinates,
    solve_datadome,
    solve_friendly_captcha,
    solve_funcaptcha,
    solve_geetest_v4,
    solve_grid,
    solve_hcaptcha,
    solve_mtcaptcha,
    solve_prosopo,
    solve_recaptcha_v2,
    solve_tencent,
    solve_turnstile,
    solve_yidun,
)
from captcha_tasks.errors import CaptchaTasksError, InvalidTaskInput
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys
from captcha_tasks.worker.solve_tasks import _CAPTCHA_TYPES

KEY = "0123456789abcdef0123456789ABCDEF"
CAPSOLVER_KEY = "CAP-0123456789ABCDEF0123456789ABCDEF"
PREFIX = "ctsolvemore:"
PAGE = "https://example.com/login"
PUBKEY = "5f1b8c3a-2d4e-4f60-9a7b-0c1d2e3f4a5b"
CAPTCHA_ID = "e392e1d7fd421dc63325744d5a2b9c73"
AWS = ("AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTp9Ei=", "CgAHbCe2GgAAAAAj", "c" * 64)
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
HCAPTCHA_KEY = "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"
PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()
CHALLENGE = {"action": "managed", "cdata": "c0ffee", "pagedata": "3gAFo2"}
MT_KEY = "MTPublic-KzqLY1cKH"
FRIENDLY_KEY = "FCMDESUD3M34857N"
FRIENDLY_JS = "https://cdn.jsdelivr.net/npm/@friendlycaptcha/sdk@0.1.8/site.min.js"
PROSOPO_KEY = "5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm"
DD_URL = "https://geo.captcha-delivery.com/captcha/?initialCid=AHrl&cid=6QAE&t=fe&s=40070"
DD_UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0"
YIDUN_KEY = "07e2387ab53a4d6f930b8d9a9be71bdf"
VALIDATE_ID = "cb0bfefa598b4d3a8e3f6a40b5a7e9c1"

#: (task, valid positional arguments, valid keyword arguments)
CALLS: list[tuple[Any, list[Any], dict[str, Any]]] = [
    (solve_funcaptcha, [PUBKEY, PAGE], {"surl": "client-api.arkoselabs.com"}),
    (solve_geetest_v4, [CAPTCHA_ID, PAGE], {"api_server": "gcaptcha4.geetest.com"}),
    (solve_aws_waf, [*AWS, PAGE], {"challenge_script": "https://x.awswaf.com/challenge.js"}),
    (solve_coordinates, [PNG_B64], {"textinstructions": "click the cats"}),
    (solve_grid, [PNG_B64, "/m/01bjv"], {"rows": 4, "cols": 4}),
    (solve_recaptcha_v2, [V2_KEY, PAGE], {"enterprise": True, "data_s": "page-s-value"}),
    (solve_turnstile, [TURNSTILE_KEY, PAGE], dict(CHALLENGE)),
    (solve_mtcaptcha, [MT_KEY, PAGE], {"action": "login", "invisible": True}),
    (solve_prosopo, [PROSOPO_KEY, PAGE], {"proxy_id": None}),
    (solve_friendly_captcha, [FRIENDLY_KEY, PAGE], {"module_script_url": FRIENDLY_JS}),
    (solve_datadome, [DD_URL, PAGE, DD_UA], {"proxy_id": "p1", "datadome_cookie": "datadome=x"}),
    (solve_yidun, [YIDUN_KEY, PAGE], {"challenge": "c0ffee", "hcg": "h", "hct": 17}),
    (solve_binance, ["login", PAGE, VALIDATE_ID], {"user_agent": DD_UA}),
    (
        solve_tencent,
        ["189123456", PAGE],
        {"script_url": "https://turing.captcha.qcloud.com/TCaptcha.js"},
    ),
]


@pytest.fixture
def configure(
    redis_server: Any, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str], None]]:
    """Settings for ``provider`` (a solver nobody listens on; nothing leaves the machine)."""

    def configure(provider: str) -> None:
        monkeypatch.setenv("CAPTCHA_TASKS_PROVIDER", provider)
        monkeypatch.setenv(
            "CAPTCHA_TASKS_API_KEY", CAPSOLVER_KEY if provider == "capsolver" else KEY
        )
        monkeypatch.setenv("CAPTCHA_TASKS_SOLVER_URL", "http://127.0.0.1:9")
        monkeypatch.setenv("CAPTCHA_TASKS_KEY_PREFIX", PREFIX)
        get_settings.cache_clear()

    yield configure
    get_settings.cache_clear()
    with redis_server.client() as conn:
        for key in conn.scan_iter(f"{PREFIX}*"):
            conn.delete(key)


def run(task: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
    result = task.apply(args=args, kwargs=kwargs)
    if result.state == "FAILURE":
        assert isinstance(result.result, CaptchaTasksError), repr(result.result)
        return result.result
    assert result.state in ("SUCCESS", "IGNORED"), result.state
    return result


def queued(redis_server: Any, result: Any) -> dict[bytes, bytes]:
    with redis_server.client() as conn:
        return dict(conn.hgetall(Keys(PREFIX).job(result.id)))


@pytest.mark.parametrize(("task", "args", "kwargs"), CALLS)
def test_valid_calls_are_queued_with_their_type(
    configure: Any, redis_server: Any, task: Any, args: list[Any], kwargs: dict[str, Any]
) -> None:
    configure("2captcha")
    result = run(task, args, kwargs)
    assert result.state == "IGNORED"  # admitted: the engine ends it later
    kind = queued(redis_server, result)[b"type"].decode()
    assert kind in _CAPTCHA_TYPES  # report_solution knows it
    assert kind == task.name.removeprefix("captcha_tasks.solve_")


@pytest.mark.parametrize(("task", "args", "kwargs"), CALLS)
def test_unknown_options_are_refused_by_name(
    configure: Any, task: Any, args: list[Any], kwargs: dict[str, Any]
) -> None:
    configure("2captcha")
    outcome = run(task, args, {**kwargs, "sitekee": "x"})
    assert isinstance(outcome, InvalidTaskInput)
    assert "unknown option(s) sitekee" in str(outcome)


@pytest.mark.parametrize(
    ("task", "args", "kwargs", "field"),
    [
        (solve_funcaptcha, ["nope", PAGE], {}, "FunCaptcha.publickey"),
        (solve_funcaptcha, [PUBKEY, PAGE], {"surl": "https://a/b"}, "FunCaptcha.surl"),
        (solve_geetest_v4, [CAPTCHA_ID, "x"], {}, "GeeTestV4.pageurl"),
        (solve_mtcaptcha, ["MTPublic", PAGE], {}, "MtCaptcha.sitekey"),
        (solve_mtcaptcha, [MT_KEY, "not a url"], {}, "MtCaptcha.pageurl"),
        (solve_mtcaptcha, [MT_KEY, PAGE], {"invisible": "1"}, "MtCaptcha.invisible"),
        (solve_prosopo, [PROSOPO_KEY[1:], PAGE], {}, "Prosopo.sitekey"),
        (solve_prosopo, [PROSOPO_KEY, "javascript:alert(1)"], {}, "Prosopo.pageurl"),
        (solve_friendly_captcha, ["FC", PAGE], {}, "FriendlyCaptcha.sitekey"),
        (
            solve_friendly_captcha,
            [FRIENDLY_KEY, PAGE],
            {"module_script_url": "site.min.js"},
            "FriendlyCaptcha.module_script_url",
        ),
        (solve_datadome, [DD_URL[:20], PAGE, DD_UA], {"proxy_id": "p1"}, "DataDome.captcha_url"),
        (solve_datadome, [DD_URL, PAGE, ""], {"proxy_id": "p1"}, "DataDome.user_agent"),
        (solve_datadome, [DD_URL, PAGE, DD_UA], {}, "DataDome needs proxy_id"),
        (
            solve_datadome,
            [DD_URL.replace("t=fe", "t=bv"), PAGE, DD_UA],
            {"proxy_id": "p1"},
            "DataDome banned this IP",
        ),
        (solve_yidun, ["captchaId", PAGE], {}, "Yidun.sitekey"),
        (solve_binance, ["login", PAGE, "short"], {}, "Binance.validate_id"),
        (solve_tencent, ["app", PAGE], {}, "Tencent.app_id"),
        (solve_tencent, ["189123456", PAGE], {"script_url": "TCaptcha.js"}, "Tencent.script_url"),
        (solve_binance, ["log in", PAGE, VALIDATE_ID], {}, "Binance.sitekey"),
        (solve_yidun, [YIDUN_KEY, PAGE], {"hct": "17"}, "Yidun.hct"),
        (
            solve_yidun,
            [YIDUN_KEY, PAGE],
            {"api_server": "https://c.dun.163.com"},
            "Yidun.api_server",
        ),
        (solve_aws_waf, [AWS[0], "!", AWS[2], PAGE], {}, "AwsWaf.iv"),
        (solve_coordinates, ["@@@"], {}, "Coordinates.body"),
        (solve_coordinates, [42], {}, "image_b64"),
        (solve_grid, [42, "buses"], {}, "image_b64"),
        (solve_grid, ["@@@", "buses"], {}, "Grid.body"),
        (solve_grid, [PNG_B64, ""], {}, "Grid.instruction"),
        (solve_grid, [PNG_B64, "buses"], {"rows": 0}, "Grid.rows"),
        (solve_grid, [PNG_B64, "buses"], {"cols": "4"}, "Grid.cols"),
        (
            solve_recaptcha_v2,
            [V2_KEY, PAGE],
            {"enterprise": True, "data_s": "a b"},
            "RecaptchaV2.data_s",
        ),
        (solve_turnstile, [TURNSTILE_KEY, PAGE], {**CHALLENGE, "cdata": None}, "Turnstile.cdata"),
        (
            solve_turnstile,
            [TURNSTILE_KEY, PAGE],
            {"pagedata": "p", "action": "a"},
            "Turnstile.cdata",
        ),
    ],
)
def test_bad_arguments_are_refused_by_name(
    configure: Any, task: Any, args: list[Any], kwargs: dict[str, Any], field: str
) -> None:
    configure("2captcha")
    outcome = run(task, args, kwargs)
    assert isinstance(outcome, InvalidTaskInput), repr(outcome)
    assert field in str(outcome)


@pytest.mark.parametrize(
    ("provider", "task", "args", "kwargs"),
    [
        ("captchaai", solve_funcaptcha, [PUBKEY, PAGE], {}),
        ("captchaai", solve_geetest_v4, [CAPTCHA_ID, PAGE], {}),
        ("captchaai", solve_aws_waf, [*AWS, PAGE], {}),
        ("captchaai", solve_coordinates, [PNG_B64], {}),
        ("captchaai", solve_turnstile, [TURNSTILE_KEY, PAGE], CHALLENGE),
        ("capsolver", solve_funcaptcha, [PUBKEY, PAGE], {}),
        ("capsolver", solve_coordinates, [PNG_B64], {}),
        ("capsolver", solve_turnstile, [TURNSTILE_KEY, PAGE], CHALLENGE),
        ("capsolver", solve_geetest_v4, [CAPTCHA_ID, PAGE], {"proxy_id": "p1"}),
        ("capsolver", solve_hcaptcha, [HCAPTCHA_KEY, PAGE], {}),
        ("capmonster", solve_coordinates, [PNG_B64], {}),
        ("captchaai", solve_mtcaptcha, [MT_KEY, PAGE], {}),
        ("captchaai", solve_prosopo, [PROSOPO_KEY, PAGE], {}),
        ("anticaptcha", solve_mtcaptcha, [MT_KEY, PAGE], {}),
        ("anticaptcha", solve_mtcaptcha, [MT_KEY, PAGE], {"proxy_id": "p1"}),
        ("capsolver", solve_prosopo, [PROSOPO_KEY, PAGE], {}),
        ("capsolver", solve_prosopo, [PROSOPO_KEY, PAGE], {"proxy_id": "p1"}),
        ("captchaai", solve_friendly_captcha, [FRIENDLY_KEY, PAGE], {}),
        ("capsolver", solve_friendly_captcha, [FRIENDLY_KEY, PAGE], {"proxy_id": "p1"}),
        ("capmonster", solve_friendly_captcha, [FRIENDLY_KEY, PAGE], {}),
        ("anticaptcha", solve_grid, [PNG_B64, "/m/01bjv"], {}),
        ("capsolver", solve_grid, [PNG_B64, "Select all images with buses"], {}),
        ("capmonster", solve_grid, [PNG_B64, "/m/01bjv"], {"rows": 2}),
        ("captchaai", solve_datadome, [DD_URL, PAGE, DD_UA], {"proxy_id": "p1"}),
        ("anticaptcha", solve_datadome, [DD_URL, PAGE, DD_UA], {"proxy_id": "p1"}),
        ("capmonster", solve_datadome, [DD_URL, PAGE, DD_UA], {"proxy_id": "p1"}),
        ("captchaai", solve_yidun, [YIDUN_KEY, PAGE], {}),
        ("anticaptcha", solve_yidun, [YIDUN_KEY, PAGE], {"proxy_id": "p1"}),
        ("capsolver", solve_yidun, [YIDUN_KEY, PAGE], {}),
        ("captchaai", solve_binance, ["login", PAGE, VALIDATE_ID], {}),
        ("anticaptcha", solve_binance, ["login", PAGE, VALIDATE_ID], {}),
        ("capsolver", solve_binance, ["login", PAGE, VALIDATE_ID], {"proxy_id": "p1"}),
        ("captchaai", solve_tencent, ["189123456", PAGE], {}),
        ("anticaptcha", solve_tencent, ["189123456", PAGE], {"proxy_id": "p1"}),
        ("capsolver", solve_tencent, ["189123456", PAGE], {}),
    ],
)
def test_an_unoffered_type_fails_at_admission_and_queues_nothing(
    configure: Any,
    redis_server: Any,
    provider: str,
    task: Any,
    args: list[Any],
    kwargs: dict[str, Any],
) -> None:
    configure(provider)
    outcome = run(task, args, dict(kwargs))
    assert isinstance(outcome, InvalidTaskInput), repr(outcome)
    assert outcome.code == "TYPE_NOT_OFFERED"
    assert f"provider {provider}" in str(outcome)
    with redis_server.client() as conn:
        assert list(conn.scan_iter(f"{PREFIX}job:*")) == []


def test_offered_elsewhere_the_same_calls_are_admitted(configure: Any) -> None:
    configure("capsolver")
    assert run(solve_geetest_v4, [CAPTCHA_ID, PAGE], {}).state == "IGNORED"
    assert run(solve_turnstile, [TURNSTILE_KEY, PAGE], {"action": "a"}).state == "IGNORED"
    configure("anticaptcha")
    assert run(solve_coordinates, [PNG_B64], {}).state == "IGNORED"


@pytest.mark.parametrize(
    ("task", "args", "kwargs", "field"),
    [
        (
            solve_mtcaptcha,
            ["6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", PAGE],
            {},
            "MtCaptcha.sitekey",
        ),
        (solve_mtcaptcha, [MT_KEY, "example.com"], {}, "MtCaptcha.pageurl"),
        (solve_prosopo, ["MTPublic-KzqLY1cKH", PAGE], {}, "Prosopo.sitekey"),
        (solve_prosopo, [PROSOPO_KEY, "http://"], {}, "Prosopo.pageurl"),
    ],
)
def test_delay_refuses_bad_arguments_in_the_caller_sending_nothing(
    configure: Any,
    monkeypatch: pytest.MonkeyPatch,
    task: Any,
    args: list[Any],
    kwargs: dict[str, Any],
    field: str,
) -> None:
    configure("2captcha")
    sent: list[Any] = []
    monkeypatch.setattr(task.app.amqp, "send_task_message", lambda *a, **k: sent.append(a))
    with pytest.raises(InvalidTaskInput, match=field):
        task.delay(*args, **kwargs)
    assert sent == []
