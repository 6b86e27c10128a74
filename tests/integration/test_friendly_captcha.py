"""Friendly Captcha end to end: ``.delay()`` through a real ``celery worker`` and the
sandbox, on every provider that offers it (2Captcha over both protocols, Anti-Captcha,
CapSolver, CapMonster Cloud's CustomTask with the widget script's URL), the token good
once at the sandbox's ``/siteverify``; refused at admission with ``TYPE_NOT_OFFERED``,
nothing sent and nothing queued, at CaptchaAI and at CapMonster without the script URL."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from captcha_tasks import solve_friendly_captcha
from captcha_tasks.errors import InvalidTaskInput
from tests.support.workers import provider_env, provider_sandbox

pytestmark = pytest.mark.integration

PAGE = "https://example.com/login"
KEY = "FCMDESUD3M34857N"
SCRIPT = "https://cdn.jsdelivr.net/npm/@friendlycaptcha/sdk@0.1.8/site.min.js"
#: Who offers it (provider/offers.py SOURCES: each provider's docs and SDK).
OFFERED = ["2captcha", "2captcha-v2", "anticaptcha", "capmonster", "capsolver"]


@pytest.mark.parametrize("provider", OFFERED)
def test_solved_where_offered(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, provider: str
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory(provider_env(sandbox, provider))
    result = solve_friendly_captcha.delay(KEY, PAGE, module_script_url=SCRIPT).get(timeout=90)
    assert (result["type"], result["source"], result["protocol"]) == (
        "friendly_captcha",
        "api",
        provider,
    )
    assert result["submits"] == 1
    token = result["solution"]
    assert isinstance(token, str) and token.startswith("72b43902"), token
    url = f"{sandbox.url}/siteverify"
    first = requests.post(url, data={"response": token}, timeout=5).json()
    again = requests.post(url, data={"response": token}, timeout=5).json()
    assert (first["success"], first["hostname"]) == (True, "example.com"), first
    assert again["success"] is False  # single use
    stats = sandbox.stats()
    assert (stats["submitted"], stats["param_errors"]) == (1, 0)
    assert stats["by_type"]["friendly_captcha"] == 1


@pytest.mark.parametrize(
    ("provider", "script", "why"),
    [
        ("captchaai", SCRIPT, "does not solve FriendlyCaptcha"),
        ("capmonster", None, "only with module_script_url"),
    ],
)
def test_refused_at_admission_where_not_offered(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    provider: str,
    script: str | None,
    why: str,
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory(provider_env(sandbox, provider))
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        solve_friendly_captcha.delay(KEY, PAGE, module_script_url=script).get(timeout=30)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert why in str(info.value) and "nothing was sent" in str(info.value)
    assert sandbox.stats()["submitted"] == 0
    assert celery_app.backend.client.keys("ct:job:*") == []
