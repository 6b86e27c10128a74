"""``solve_altcha`` through a real ``celery worker`` whose provider cannot be reached (its
URL is a closed port): the proof of work is the worker's own, from a challenge given as
JSON or fetched from a loopback site (allowlisted; through a pool proxy when asked), and
the payload passes the reference verifier (tests/support/altcha_reference.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks import aio, solve_altcha
from captcha_tasks.errors import TargetNotAllowed, UnknownProxy
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis
from tests.support.altcha_reference import create_challenge, verify_solution
from tests.support.altcha_site import AltchaSite
from tests.support.socks_proxy import SocksProxy
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

KEY = "the demo site's hmac key"
NUMBER = 54_321


@pytest.fixture
def site() -> Iterator[AltchaSite]:
    with challenge_site() as running:
        yield running


def challenge_site() -> AltchaSite:
    """The site's challenge endpoint (``/altcha/challenge``): a fresh challenge for
    :data:`NUMBER` on each GET (started as a context manager)."""
    site = AltchaSite()
    site.serve("challenge", lambda: create_challenge(KEY, NUMBER, expires=int(time.time()) + 600))
    return site


def _number(payload: str) -> int:
    number: int = json.loads(base64.b64decode(payload))["number"]
    return number


def _env(no_provider: str, site: AltchaSite) -> dict[str, str]:
    return worker_env(no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=f"127.0.0.1:{site.port}")


def test_a_challenge_given_or_fetched_is_solved_by_the_worker_with_no_provider(
    celery_app: Any, worker_factory: Any, site: AltchaSite, no_provider: str
) -> None:
    worker = worker_factory(_env(no_provider, site))
    page = f"{site.url}/contact"
    given = create_challenge(KEY, 8_765, salt="b1a2c3d4?lang=en")
    from_json = solve_altcha.delay(page, challenge_json=given).get(timeout=60)
    from_url = solve_altcha.delay(page, challenge_url="/altcha/challenge").get(timeout=60)
    by_aio = asyncio.run(aio.solve_altcha(page, challenge_json=json.dumps(given), timeout=60))

    for result in (from_json, from_url, by_aio):
        assert verify_solution(result["solution"], KEY)
        assert result["type"] == "altcha" and result["source"] == "api"
        assert (result["provider"], result["protocol"], result["cost"]) == (None, None, "0")
        assert (result["submits"], result["polls"]) == (0, 0)
    assert _number(from_json["solution"]) == 8_765
    assert _number(from_url["solution"]) == NUMBER
    assert from_url["expires_at"] is not None and from_url["expires_at"] > time.time()
    assert site.requests == 1  # the one challenge_url, fetched once
    # Nothing was admitted to the solve engine, and the provider was never reached.
    assert celery_app.backend.client.keys("ct:job:*") == []
    assert "solve_altcha" in worker.log() and "succeeded" in worker.log()


def test_a_challenge_url_off_the_workers_allowlist_is_refused_unfetched(
    celery_app: Any, worker_factory: Any, site: AltchaSite, no_provider: str
) -> None:
    worker_factory(_env(no_provider, site))
    # The caller has no allowlist of its own: the worker's refuses it.
    elsewhere = f"http://127.0.0.2:{site.port}/altcha/challenge"
    with pytest.raises(TargetNotAllowed, match="CAPTCHA_TASKS_ALLOWED_DOMAINS"):
        solve_altcha.delay(f"{site.url}/", challenge_url=elsewhere).get(timeout=60)
    assert site.requests == 0


def test_the_challenge_is_fetched_through_the_pool_proxy_named(
    celery_app: Any, worker_factory: Any, site: AltchaSite, no_provider: str
) -> None:
    settings = get_settings()
    with SocksProxy(username="altcha", password="Pr0xy-Pa55") as socks:
        ident = ProxyPool(state_redis(settings), settings).add(socks.url("socks5h"))
        worker_factory(_env(no_provider, site))
        result = solve_altcha.delay(
            f"{site.url}/", challenge_url="/altcha/challenge", proxy_id=ident
        ).get(timeout=60)
        tunnels = socks.tunnels
        with pytest.raises(UnknownProxy):
            solve_altcha.delay(
                f"{site.url}/", challenge_url="/altcha/challenge", proxy_id="0123456789ab"
            ).get(timeout=60)
    assert verify_solution(result["solution"], KEY)
    assert [t.target for t in tunnels] == [("127.0.0.1", site.port)]
    assert site.requests == 1  # the unknown proxy's call fetched nothing
