"""fetch_page behind Cloudflare's challenge page, through real workers against the
sandbox's demo site: the 403 "Just a moment..." found by its status, headers and markers,
passed once through the worker's pool proxy (a SOCKS5 proxy here) with its session's user
agent, the ``cf_clearance`` cookie kept for that proxy and user agent only (never in the
host's shared jar) and sent by every pool process of that worker, so 200 loads cost one
solve; a worker on another proxy passes its own; the cookie appears in no log, no Flower
page and no page result; no solve without a proxy, and a direct call without one is
refused at the call."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis
import requests
from celery.utils.nodenames import worker_direct

from captcha_tasks import solve_cloudflare_challenge
from captcha_tasks.errors import InvalidTaskInput, NoProxyAvailable
from captcha_tasks.session.cookies import CookieStore, normalize_host, visitor_id
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.procs import wait_until
from tests.support.flower import flower_tasks, wait_for_events
from tests.support.socks_proxy import SocksProxy
from tests.support.workers import outcomes, provider_env

pytestmark = [pytest.mark.integration, pytest.mark.long, pytest.mark.timeout(300)]

SOCKS_USER = "cf-socks"
SOCKS_PASSWORD = "Cf-S0cks-Pa55"
#: Page loads through the first worker's proxy, and through the second's.
LOADS = 200
OTHER_LOADS = 5


@pytest.fixture
def cf_sandbox(sandbox_factory: Any) -> Any:
    """A CapSolver sandbox (it sells the challenge page: AntiCloudflareTask) with the demo
    site, at a time scale where a cf_clearance outlives the run (30 min x 0.1)."""
    return sandbox_factory(protocol="json", dialect="capsolver", demo_port=0, time_scale=0.1)


def _env(sandbox: Any) -> dict[str, str]:
    host = sandbox.demo_url.split("//")[1]
    return {**provider_env(sandbox, "capsolver"), "CAPTCHA_TASKS_ALLOWED_DOMAINS": host}


def _lease(worker: Any) -> str:
    settings = get_settings()
    client = state_redis(settings)
    key = Keys(settings.key_prefix).worker_proxy(worker.name)
    wait_until(lambda: client.get(key) is not None, timeout=10, what="the proxy lease")
    return str(client.get(key))


def _shared_jar_names(client: redis.Redis, host: str) -> set[str]:
    key = Keys(get_settings().key_prefix).cookies(normalize_host(host))
    return {str(field).split(";", 1)[0] for field in client.hkeys(key)}


def test_one_solve_serves_every_load_through_a_proxy_and_another_proxy_solves_its_own(
    celery_app: Any, cf_sandbox: Any, worker_factory: Any, flower_factory: Any
) -> None:
    settings = get_settings()
    client = state_redis(settings)
    url = f"{cf_sandbox.demo_url}/page/cf?widget=cloudflare"
    host = cf_sandbox.demo_url.split("//")[1]
    env = _env(cf_sandbox)
    flower = flower_factory(env)
    pool = ProxyPool(client, settings)
    with (
        SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD, source="127.0.0.2") as one,
        SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD, source="127.0.0.3") as two,
    ):
        # Two pool processes on the first proxy; the second proxy joins the pool once the
        # first worker holds the first, for a second worker.
        first_id = pool.add(one.url("socks5"))
        first = worker_factory(env, concurrency=2)
        assert _lease(first) == first_id
        second_id = pool.add(two.url("socks5"))
        second = worker_factory(env)
        assert _lease(second) == second_id
        wait_for_events(flower)

        sent = [
            fetch_page.apply_async(args=(url,), queue=worker_direct(first.name).name)
            for _ in range(LOADS)
        ]
        pages = outcomes(sent, timeout=180)
        jar_names = _shared_jar_names(client, host)
        more = [
            fetch_page.apply_async(args=(url,), queue=worker_direct(second.name).name)
            for _ in range(OTHER_LOADS)
        ]
        other_pages = outcomes(more, timeout=120)
        jar_names |= _shared_jar_names(client, host)
        tunnels = one.tunnels

    site, sandbox = cf_sandbox.demo.stats(), cf_sandbox.stats()
    served = cf_sandbox.demo.served_behind("cloudflare_challenge")
    figures = {
        "statuses": {p["status"] if isinstance(p, dict) else p for p in pages + other_pages},
        "solved by the first": sum(bool(p["solved"]) for p in pages if isinstance(p, dict)),
        "solved by the second": sum(bool(p["solved"]) for p in other_pages if isinstance(p, dict)),
        "solves": sandbox["submitted"],
        "served": site["pages_served"],
        "cookies_rejected": site["cookies_rejected"],
        "cf_clearance in the shared jar": "cf_clearance" in jar_names,
        "served per exit IP": {ip: sum(tags.values()) for ip, tags in served.items()},
        "cookies per exit IP": {ip: len(tags) for ip, tags in served.items()},
    }
    assert figures == {
        "statuses": {200},
        "solved by the first": 1,
        "solved by the second": 1,
        "solves": 2,
        "served": LOADS + OTHER_LOADS,
        "cookies_rejected": 0,
        "cf_clearance in the shared jar": False,
        "served per exit IP": {"127.0.0.2": LOADS, "127.0.0.3": OTHER_LOADS},
        "cookies per exit IP": {"127.0.0.2": 1, "127.0.0.3": 1},
    }
    port = int(cf_sandbox.demo_url.rsplit(":", 1)[1])
    assert {t.target for t in tunnels} == {("127.0.0.1", port)}  # every load via the proxy
    assert set(served["127.0.0.2"]) != set(served["127.0.0.3"])  # each proxy its own cookie

    # Each worker's cookie is in its own visitor jar (pinned proxy id and user agent).
    agent = requests.utils.default_user_agent()  # what the workers' sessions send
    store = CookieStore(client, settings)
    clearances = []
    for ident in (first_id, second_id):
        own = {c.name: c.value for c in store.load(host, visitor_id(ident, agent))}
        clearances.append(own["cf_clearance"])
    # It opens the page from that user agent only (and the IP it is bound to: loopback
    # here is neither proxy's exit, so another IP is refused too).
    for ua in (agent, "Mozilla/5.0 (another browser)"):
        answer = requests.get(
            url, headers={"User-Agent": ua, "Cookie": f"cf_clearance={clearances[0]}"}, timeout=5
        )
        assert answer.status_code == 403, ua
        assert answer.headers["cf-mitigated"] == "challenge"

    # Never shown: no log line, no Flower page or task, no page's result.
    ids = [r.id for r in sent[:5] + more]
    tasks = flower_tasks(flower, ids, states={"SUCCESS"})
    shown = {
        "flower": json.dumps(tasks)
        + "".join(json.dumps(flower.json(f"/api/task/info/{i}")) for i in ids)
        + flower.get("/tasks").text,
        "flower log": flower.log(),
        "first worker's log": first.log(),
        "second worker's log": second.log(),
        "page results": json.dumps(pages + other_pages),
    }
    for clearance in clearances:
        for where, text in shown.items():
            assert clearance not in text, f"cf_clearance is in the {where}"
    assert all(SOCKS_PASSWORD not in text for text in shown.values())


def test_without_a_pool_proxy_a_challenge_page_is_not_solved(
    celery_app: Any, cf_sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(_env(cf_sandbox))
    result = fetch_page.delay(f"{cf_sandbox.demo_url}/page/np?widget=cloudflare")
    with pytest.raises(NoProxyAvailable, match="behind Cloudflare's challenge page"):
        result.get(timeout=60)
    assert cf_sandbox.stats()["submitted"] == 0
    assert cf_sandbox.demo.stats()["challenges"] >= 1


def test_a_direct_solve_needs_a_proxy_and_returns_the_cookie_bound_to_it(
    celery_app: Any, cf_sandbox: Any, worker_factory: Any
) -> None:
    settings = get_settings()
    page = f"{cf_sandbox.demo_url}/page/direct"
    with pytest.raises(InvalidTaskInput) as refused:
        solve_cloudflare_challenge.delay(page)
    assert refused.value.code == "PROXY_REQUIRED"  # at the call: nothing was sent
    with SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD) as socks:
        ident = ProxyPool(state_redis(settings), settings).add(socks.url("socks5"))
        worker_factory(_env(cf_sandbox))
        agent = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/131.0.0.0"
        result = solve_cloudflare_challenge.delay(page, proxy_id=ident, user_agent=agent).get(
            timeout=60
        )
    assert (result["type"], result["proxy_id"], result["user_agent"]) == (
        "cloudflare_challenge",
        ident,
        agent,
    )
    assert result["solution"]["headers"] == {"User-Agent": agent}
    clearance = result["solution"]["cookies"]["cf_clearance"]
    assert cf_sandbox.state.cookie_ok("cloudflare_challenge", clearance, agent) is None
    assert cf_sandbox.stats()["submitted"] == 1
