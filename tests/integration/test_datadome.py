"""DataDome end to end: ``.delay()`` through a real ``celery worker`` and the sandbox, on
every provider that offers it (2Captcha over both protocols, CapSolver, CapMonster
Cloud's CustomTask with the challenge's cookie), always through a pool proxy; the cookie
opens the sandbox's demo page from the user agent it was solved as, and only from it.
Refused at admission with ``TYPE_NOT_OFFERED`` (nothing sent, nothing queued) at CaptchaAI,
Anti-Captcha and CapMonster without the cookie; refused at the call without a proxy or
for a banned IP (``t=bv``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from captcha_tasks import solve_datadome
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis
from tests.support.workers import provider_env

pytestmark = pytest.mark.integration

URL = (
    "https://geo.captcha-delivery.com/captcha/?initialCid=AHrlqAAAAAMA1QGvUmJwyYoAwpyjNg%3D%3D"
    "&hash=789361B674144528D0B7EE76B35826&cid=6QAEcL8coBYTi9tYLmjCdyKmNNyHz1x&t=fe"
    "&referer=https%3A%2F%2Fexample.com%2Faccount&s=40070&e=3e531bd3b30650f2e810ac72cd80adb5"
)
UA = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 Chrome/124.0.0.0"
PROXY_PASSWORD = "Dd-Pr0xy-Pa55"
COOKIE = "datadome=6BvxqELMoorFNoo7GT1JyfP_mhz"
#: Who offers it (provider/offers.py SOURCES: each provider's docs and SDK).
OFFERED = ["2captcha", "2captcha-v2", "capsolver", "capmonster"]


def _sandbox(sandbox_factory: Any, provider: str) -> Any:
    """A sandbox speaking ``provider`` that also serves the demo site."""
    if provider in ("captchaai", "2captcha"):
        return sandbox_factory(dialect=provider, demo_port=0)
    return sandbox_factory(protocol="json", dialect=provider, demo_port=0)


def _proxy() -> str:
    settings = get_settings()
    return ProxyPool(state_redis(settings), settings).add(
        f"http://dd-user:{PROXY_PASSWORD}@203.0.113.9:3128"
    )


def _page(sandbox: Any, cookie: str, agent: str) -> requests.Response:
    return requests.get(
        f"{sandbox.demo_url}/page/account?widget=datadome",
        headers={"User-Agent": agent, "Cookie": f"datadome={cookie}"},
        timeout=5,
    )


@pytest.mark.parametrize("provider", OFFERED)
def test_solved_where_offered_and_good_only_for_its_user_agent(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, provider: str
) -> None:
    sandbox = _sandbox(sandbox_factory, provider)
    ident = _proxy()
    worker_factory(provider_env(sandbox, provider))
    page = f"{sandbox.demo_url}/page/account?widget=datadome"
    result = solve_datadome.delay(URL, page, UA, proxy_id=ident, datadome_cookie=COOKIE).get(
        timeout=90
    )
    assert (result["type"], result["source"], result["protocol"]) == ("datadome", "api", provider)
    assert (result["user_agent"], result["proxy_id"]) == (UA, ident)
    cookie = result["solution"]
    assert set(cookie) == {"name", "value", "set_cookie", "domain"}
    assert cookie["name"] == "datadome" and cookie["domain"] == "127.0.0.1"
    assert cookie["set_cookie"].startswith(f"datadome={cookie['value']}; Max-Age=")
    assert PROXY_PASSWORD not in json.dumps(result)  # the proxy's id, never its credentials
    # The demo site takes the cookie from the user agent it was solved as, again and again
    # (a session, not a single-use token), and from no other.
    assert _page(sandbox, cookie["value"], UA).status_code == 200
    assert _page(sandbox, cookie["value"], UA).status_code == 200
    other = _page(sandbox, cookie["value"], UA.replace("124", "125"))
    assert other.status_code == 403 and "captcha-delivery.com" in other.text
    # Nor from another IP than the one it was first presented from (its solver's, here).
    moved = sandbox.demo.datadome_ok(cookie["value"], UA, "127.0.0.9")
    assert moved == "IP differs from the one the cookie was solved from"
    site = sandbox.demo.stats()
    assert (site["pages_served"], site["cookies_rejected"]) == (2, 1)
    stats = sandbox.stats()
    assert (stats["submitted"], stats["param_errors"]) == (1, 0)
    assert stats["by_type"]["datadome"] == 1


@pytest.mark.parametrize(
    ("provider", "cookie", "why"),
    [
        ("captchaai", COOKIE, "does not solve DataDome"),
        ("anticaptcha", COOKIE, "does not solve DataDome"),
        ("capmonster", None, "only with datadome_cookie"),
    ],
)
def test_refused_at_admission_where_not_offered(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    provider: str,
    cookie: str | None,
    why: str,
) -> None:
    sandbox = _sandbox(sandbox_factory, provider)
    ident = _proxy()
    worker_factory(provider_env(sandbox, provider))
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        solve_datadome.delay(
            URL, "https://example.com/account", UA, proxy_id=ident, datadome_cookie=cookie
        ).get(timeout=30)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert why in str(info.value) and "nothing was sent" in str(info.value)
    assert sandbox.stats()["submitted"] == 0
    assert celery_app.backend.client.keys("ct:job:*") == []


@pytest.mark.parametrize(
    ("captcha_url", "proxied", "code"),
    [
        (URL, False, "PROXY_REQUIRED"),
        (URL.replace("t=fe", "t=bv"), True, "DATADOME_IP_BANNED"),
    ],
)
def test_refused_at_the_call_without_a_proxy_or_for_a_banned_ip(
    celery_app: Any, sandbox_factory: Any, captcha_url: str, proxied: bool, code: str
) -> None:
    sandbox = _sandbox(sandbox_factory, "2captcha")
    kwargs = {"proxy_id": _proxy()} if proxied else {}
    with pytest.raises(InvalidTaskInput) as info:
        solve_datadome.delay(captcha_url, "https://example.com/account", UA, **kwargs)
    assert info.value.code == code
    assert sandbox.stats()["submitted"] == 0
    assert celery_app.backend.client.keys("ct:job:*") == []
