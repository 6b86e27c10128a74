"""Yidun, Binance and Tencent end to end: ``.delay()`` through a real ``celery worker``
and the sandbox, on every provider that offers each (2Captcha over both protocols,
CapMonster Cloud), the token (Tencent's ticket) good once at the sandbox's
``/siteverify``, Tencent's answer as ``{ticket, randstr}`` whatever the provider's shape,
and the user agent in the result where the provider answers one; refused with
``TYPE_NOT_OFFERED`` (at admission, and at the call when the caller's settings name the
provider), nothing sent and nothing queued, on the others."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import requests

from captcha_tasks import solve_binance, solve_tencent, solve_yidun
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks_sandbox import dev_api_key
from tests.support.workers import provider_env, provider_sandbox

pytestmark = pytest.mark.integration

PAGE = "https://example.com/login"
YIDUN_KEY = "07e2387ab53a4d6f930b8d9a9be71bdf"
VALIDATE_ID = "cb0bfefa598b4d3a8e3f6a40b5a7e9c1"
AGENT = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0"

SOLVES: dict[str, Callable[[], Any]] = {
    "yidun": lambda: solve_yidun.delay(
        YIDUN_KEY,
        PAGE,
        script_url="https://cstaticdun.126.net/load.min.js",
        challenge="d0c2f9b0a1",
        hcg="7b6f5a",
        hct=1733571234567,
        user_agent=AGENT,
    ),
    "binance": lambda: solve_binance.delay("login", PAGE, VALIDATE_ID, user_agent=AGENT),
    "tencent": lambda: solve_tencent.delay(
        "189123456",
        PAGE,
        script_url="https://turing.captcha.qcloud.com/TCaptcha.js",
        user_agent=AGENT,
    ),
}
#: Who offers which (each kind's declaration: the providers' docs and SDKs).
OFFERED: dict[str, set[str]] = {
    "captchaai": set(),
    "2captcha": {"yidun", "binance", "tencent"},
    "2captcha-v2": {"yidun", "binance", "tencent"},
    "anticaptcha": set(),
    "capsolver": set(),
    "capmonster": {"yidun", "binance", "tencent"},
}
PREFIX = {"yidun": "CN31_", "binance": "captcha#"}


def _verify(sandbox: Any, token: str) -> dict[str, Any]:
    url = f"{sandbox.url}/siteverify"
    first: dict[str, Any] = requests.post(url, data={"response": token}, timeout=5).json()
    again = requests.post(url, data={"response": token}, timeout=5).json()
    assert first["success"] is True, first
    assert again["success"] is False  # single use
    return first


@pytest.mark.parametrize("provider", sorted(p for p, kinds in OFFERED.items() if kinds))
def test_each_kind_solves_where_offered(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, provider: str
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory(provider_env(sandbox, provider))
    pending = {kind: SOLVES[kind]() for kind in sorted(OFFERED[provider])}
    got = {kind: result.get(timeout=90) for kind, result in pending.items()}
    for kind, result in got.items():
        assert (result["type"], result["source"], result["protocol"]) == (kind, "api", provider)
        assert result["submits"] == 1
        if kind == "tencent":
            # {ticket, randstr} from 2Captcha's {appid, ret, ticket, randstr} and from
            # CapMonster's {data: {...}, headers: {User-Agent}} alike.
            assert set(result["solution"]) == {"ticket", "randstr"}, result["solution"]
            token = result["solution"]["ticket"]
            assert token.startswith("tr03") and result["solution"]["randstr"].startswith("@")
            assert ("user_agent" in result) == (provider == "capmonster")
        else:
            token = result["solution"]
            assert isinstance(token, str) and token.startswith(PREFIX[kind]), token
        assert _verify(sandbox, token)["hostname"] == "example.com"
        if kind == "binance" and provider != "2captcha":
            # The JSON answers' userAgent (the task's own, echoed by the sandbox); res.php's
            # answer is the token alone.
            assert result["user_agent"] == AGENT
        if kind == "tencent" and provider == "capmonster":
            assert result["user_agent"] == AGENT  # its headers' User-Agent
    stats = sandbox.stats()
    assert (stats["submitted"], stats["param_errors"]) == (len(got), 0)
    assert {kind: stats["by_type"][kind] for kind in got} == dict.fromkeys(got, 1)


@pytest.mark.parametrize(
    ("provider", "kind"),
    [(p, kind) for p in sorted(OFFERED) for kind in sorted(set(SOLVES) - OFFERED[p])],
)
def test_a_kind_the_provider_does_not_offer_is_refused_at_admission_and_at_the_call(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    settings_env: Any,
    provider: str,
    kind: str,
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory(provider_env(sandbox, provider))
    # A caller that configures no provider leaves it to the worker: refused at admission.
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as at_admission:
        SOLVES[kind]().get(timeout=30)
    # A caller with the worker's settings is refused by .delay() itself.
    settings_env(CAPTCHA_TASKS_PROVIDER=provider, CAPTCHA_TASKS_API_KEY=dev_api_key(provider))
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as at_call:
        SOLVES[kind]()
    for info in (at_admission, at_call):
        assert info.value.code == "TYPE_NOT_OFFERED"
        assert "nothing was sent" in str(info.value)
        assert "(offered by: " in str(info.value)
    assert sandbox.stats()["submitted"] == 0
    assert celery_app.backend.client.keys("ct:job:*") == []
