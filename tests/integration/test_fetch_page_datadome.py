"""fetch_page behind DataDome, through real workers against the sandbox's demo site: the
403 challenge solved through the worker's pool proxy (a SOCKS5 proxy here) with its
session's user agent, the cookie set and the page loaded again with that identity; the
same cookie refused from another user agent; no solve without a proxy; a banned IP
(``t=bv``) refused with its own code, nothing sent."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from captcha_tasks.devtools.procs import wait_until
from captcha_tasks.errors import InvalidTaskInput, NoProxyAvailable
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from tests.support.socks_proxy import SocksProxy
from tests.support.workers import provider_env

pytestmark = pytest.mark.integration

SOCKS_USER = "dd-socks"
SOCKS_PASSWORD = "Dd-S0cks-Pa55"


@pytest.fixture
def dd_sandbox(sandbox_factory: Any) -> Any:
    """A 2Captcha sandbox (it offers DataDome; CaptchaAI does not) with the demo site."""
    return sandbox_factory(dialect="2captcha", demo_port=0)


def _env(sandbox: Any) -> dict[str, str]:
    host = sandbox.demo_url.split("//")[1]
    return {**provider_env(sandbox, "2captcha"), "CAPTCHA_TASKS_ALLOWED_DOMAINS": host}


def _lease(worker: Any) -> str:
    settings = get_settings()
    client = state_redis(settings)
    key = Keys(settings.key_prefix).worker_proxy(worker.name)
    wait_until(lambda: client.get(key) is not None, timeout=10, what="the proxy lease")
    return str(client.get(key))


def test_a_datadome_page_is_solved_with_the_workers_proxy_and_user_agent(
    celery_app: Any, dd_sandbox: Any, worker_factory: Any
) -> None:
    settings = get_settings()
    url = f"{dd_sandbox.demo_url}/page/dd?widget=datadome"
    with SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD) as socks:
        ident = ProxyPool(state_redis(settings), settings).add(socks.url("socks5"))
        worker = worker_factory(_env(dd_sandbox))
        assert _lease(worker) == ident
        page = fetch_page.delay(url).get(timeout=120)
        tunnels = socks.tunnels
    assert (page["status"], page["solved"], page["source"]) == (200, True, "api")
    site = dd_sandbox.demo.stats()
    # Challenged twice (the first look, the look under the session lock), one solve,
    # then the page served once with the solved cookie.
    assert site["challenges"] == 2 and site["pages_served"] == 1
    assert site["cookies_rejected"] == 0
    stats = dd_sandbox.stats()
    assert (stats["submitted"], stats["by_type"]["datadome"], stats["param_errors"]) == (1, 1, 0)
    # Every connection of the page went through the proxy: fetch_page's (both looks) and
    # the refetch's, on the same worker.
    port = int(dd_sandbox.demo_url.rsplit(":", 1)[1])
    assert len(tunnels) >= 2 and {t.target for t in tunnels} == {("127.0.0.1", port)}
    assert SOCKS_PASSWORD not in worker.log()
    # The cookie, kept for the cluster, opens the page from the worker's user agent only.
    host = dd_sandbox.demo_url.split("//")[1]
    cookies = {c.name: c.value for c in CookieStore(state_redis(settings), settings).load(host)}
    agent = requests.utils.default_user_agent()  # what the worker's session sends
    for ua, status in ((agent, 200), ("Mozilla/5.0 (another browser)", 403)):
        answer = requests.get(
            url, headers={"User-Agent": ua, "Cookie": f"datadome={cookies['datadome']}"}, timeout=5
        )
        assert answer.status_code == status, ua
    assert dd_sandbox.demo.stats()["cookies_rejected"] == 1


def test_without_a_pool_proxy_a_datadome_page_is_not_solved(
    celery_app: Any, dd_sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(_env(dd_sandbox))
    result = fetch_page.delay(f"{dd_sandbox.demo_url}/page/np?widget=datadome", isolated=True)
    with pytest.raises(NoProxyAvailable, match="behind DataDome"):
        result.get(timeout=60)
    assert dd_sandbox.stats()["submitted"] == 0


def test_a_banned_ip_is_refused_with_its_code_and_nothing_sent(
    celery_app: Any, dd_sandbox: Any, worker_factory: Any
) -> None:
    settings = get_settings()
    with SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD) as socks:
        ProxyPool(state_redis(settings), settings).add(socks.url("socks5"))
        worker = worker_factory(_env(dd_sandbox))
        _lease(worker)
        url = f"{dd_sandbox.demo_url}/page/bv?widget=datadome&dd=bv"
        with pytest.raises(InvalidTaskInput) as info:
            fetch_page.delay(url, isolated=True).get(timeout=60)
    assert info.value.code == "DATADOME_IP_BANNED"
    assert dd_sandbox.stats()["submitted"] == 0
    assert dd_sandbox.demo.stats()["challenges"] == 1
