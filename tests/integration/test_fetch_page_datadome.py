"""fetch_page behind DataDome, through real workers against the sandbox's demo site: the
403 challenge solved through the worker's pool proxy (a SOCKS5 proxy here) with its
session's user agent, the cookie set and the page loaded again with that identity; the
same cookie refused from another user agent; each worker's cookie kept for its own proxy
and user agent, never in the host's shared jar, so two workers on two proxies solve
once each; no solve without a proxy; a banned IP (``t=bv``) refused with its own code,
nothing sent."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import redis
import requests
from celery.utils.nodenames import worker_direct

from captcha_tasks.errors import InvalidTaskInput, NoProxyAvailable
from captcha_tasks.session.cookies import CookieStore, normalize_host, visitor_id
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.procs import wait_until
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
    # The cookie, kept for the worker's proxy and user agent (not in the host's shared
    # jar), opens the page from that user agent only.
    host = dd_sandbox.demo_url.split("//")[1]
    store = CookieStore(state_redis(settings), settings)
    agent = requests.utils.default_user_agent()  # what the worker's session sends
    assert "datadome" not in {c.name for c in store.load(host)}
    cookies = {c.name: c.value for c in store.load(host, visitor_id(ident, agent))}
    for ua, status in ((agent, 200), ("Mozilla/5.0 (another browser)", 403)):
        answer = requests.get(
            url, headers={"User-Agent": ua, "Cookie": f"datadome={cookies['datadome']}"}, timeout=5
        )
        assert answer.status_code == status, ua
    assert dd_sandbox.demo.stats()["cookies_rejected"] == 1


def _shared_jar_names(client: redis.Redis, host: str) -> set[str]:
    key = Keys(get_settings().key_prefix).cookies(normalize_host(host))
    return {str(field).split(";", 1)[0] for field in client.hkeys(key)}


def test_two_workers_on_two_proxies_each_solve_once_and_keep_their_own_cookie(
    celery_app: Any, dd_sandbox: Any, worker_factory: Any
) -> None:
    """Each worker sends the cookie it solved through its own proxy (its own exit IP:
    127.0.0.2 and 127.0.0.3, to which the demo site binds a solved cookie): one solve
    per worker, then every load served with that worker's own cookie."""
    settings = get_settings()
    client = state_redis(settings)
    url = f"{dd_sandbox.demo_url}/page/two?widget=datadome"
    host = dd_sandbox.demo_url.split("//")[1]
    rounds = 5
    with (
        SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD, source="127.0.0.2") as one,
        SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD, source="127.0.0.3") as two,
    ):
        pool = ProxyPool(client, settings)
        exit_ip = {pool.add(p.url("socks5")): p.source for p in (one, two)}
        workers = [worker_factory(_env(dd_sandbox)) for _ in range(2)]
        ips = {w.name: exit_ip[_lease(w)] for w in workers}
        assert sorted(ips.values()) == ["127.0.0.2", "127.0.0.3"]
        solved: dict[str, int] = dict.fromkeys(ips, 0)
        statuses = []
        jar_names: set[str] = set()
        for _ in range(rounds):
            for w in workers:
                queue = worker_direct(w.name).name
                page = fetch_page.apply_async(args=(url,), queue=queue).get(timeout=120)
                statuses.append(page["status"])
                solved[w.name] += int(page["solved"])
                jar_names |= _shared_jar_names(client, host)
    site, sandbox = dd_sandbox.demo.stats(), dd_sandbox.stats()
    loads = 2 * rounds
    figures = {
        "loads": len(statuses),
        "served": site["pages_served"],
        "solves": sandbox["submitted"],
        "cookies_rejected": site["cookies_rejected"],
        "datadome_in_shared_jar": "datadome" in jar_names,
    }
    expected = {
        "loads": loads,
        "served": loads,
        "solves": 2,
        "cookies_rejected": 0,
        "datadome_in_shared_jar": False,
    }
    assert figures == expected
    assert statuses == [200] * loads and set(solved.values()) == {1}
    # Each exit IP was served with one cookie only, every load after its solve, and the
    # two cookies differ: each worker's own.
    served = dd_sandbox.demo.datadome_served()
    assert sorted(served) == ["127.0.0.2", "127.0.0.3"]
    assert all(len(tags) == 1 and sum(tags.values()) == rounds for tags in served.values())
    assert set(served["127.0.0.2"]) != set(served["127.0.0.3"])
    # Each worker's cookie is in its own visitor jar (the pinned proxy id and the user
    # agent; no credentials in the key).
    agent = requests.utils.default_user_agent()
    store = CookieStore(client, settings)
    for w in workers:
        ident = str(client.get(Keys(settings.key_prefix).worker_proxy(w.name)))
        own = {c.name: c.value for c in store.load(host, visitor_id(ident, agent))}
        tag = next(iter(served[ips[w.name]]))
        assert hashlib.sha256(own["datadome"].encode()).hexdigest()[:12] == tag
    assert not [k for k in client.keys("*") if SOCKS_PASSWORD in str(k)]


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
