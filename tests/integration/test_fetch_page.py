"""The page workflow through real workers against the sandbox's demo site (directly,
and through a SOCKS5 proxy of the pool)."""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Any

import pytest
import redis

from captcha_tasks.engine.pool import TokenPool
from captcha_tasks.errors import InvalidTaskInput, ProxyRejected, TargetNotAllowed
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks.worker.redacted import send_redacted
from captcha_tasks_dev.procs import wait_until
from tests.support.secret_scan import leaks, redis_dump, scan_needles
from tests.support.socks_proxy import SocksProxy
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration


def _env(sandbox: Any, **extra: str) -> dict[str, str]:
    host = sandbox.demo_url.split("//")[1]
    return worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host, **extra)


def test_a_cluster_of_workers_spends_one_solve_for_many_pages(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    env = _env(demo_sandbox)
    worker_factory(env, concurrency=4)
    worker_factory(env, concurrency=4)
    results = [fetch_page.delay(f"{demo_sandbox.demo_url}/page/{i}") for i in range(40)]
    pages = [r.get(timeout=120) for r in results]
    assert all(p["status"] == 200 for p in pages)
    assert sum(p["solved"] for p in pages) == 1
    site = demo_sandbox.demo.stats()
    assert site["pages_served"] == 40
    assert site["tokens_accepted"] == 1 and site["tokens_rejected"] == 0
    assert demo_sandbox.stats()["submitted"] == 1
    # The validation cookie is in the shared jar for every later worker.
    settings = get_settings()
    host = demo_sandbox.demo_url.split("//")[1]
    names = {c.name for c in CookieStore(state_redis(settings), settings).load(host)}
    assert "qa_validation_cookie" in names


def test_isolated_visitors_solve_once_per_page(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(_env(demo_sandbox), concurrency=2)
    results = [
        fetch_page.delay(f"{demo_sandbox.demo_url}/page/{i}", isolated=True) for i in range(4)
    ]
    pages = [r.get(timeout=120) for r in results]
    assert all(p["status"] == 200 and p["solved"] and p["source"] == "api" for p in pages)
    assert demo_sandbox.stats()["submitted"] == 4
    assert demo_sandbox.demo.stats()["tokens_rejected"] == 0


def test_a_pooled_token_is_used_before_spending_a_solve(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(_env(demo_sandbox))
    page_url = f"{demo_sandbox.demo_url}/page/pooled"
    settings = get_settings()
    pool = TokenPool(state_redis(settings), settings)
    captcha = RecaptchaV2(demo_sandbox.config.demo_sitekey, page_url)
    pool.fill(captcha, target=1)
    wait_until(lambda: pool.status()[0]["size"] == 1, timeout=60, what="a pooled token")
    page = fetch_page.delay(page_url).get(timeout=60)
    assert page == {"status": 200, "url": page_url, "solved": False, "source": "pool"}
    assert demo_sandbox.demo.stats()["tokens_accepted"] == 1


@pytest.mark.parametrize(
    "url",
    [
        "http://example.org/page/1",  # not allowlisted
        "ftp://127.0.0.1/page/1",  # not http(s)
        "http://10.0.0.1/",  # a private address, not allowlisted
    ],
)
def test_targets_off_the_allowlist_are_refused(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, url: str
) -> None:
    worker_factory(_env(demo_sandbox))
    with pytest.raises(TargetNotAllowed):
        fetch_page.delay(url).get(timeout=30)
    assert demo_sandbox.demo.stats()["pages_served"] == 0


def test_a_redirect_to_a_loopback_or_private_address_is_refused(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(_env(demo_sandbox))
    base = demo_sandbox.demo_url
    for target in ("http://127.0.0.1:9/", "http://169.254.169.254/latest", "http://10.1.2.3/"):
        with pytest.raises(TargetNotAllowed):
            fetch_page.delay(f"{base}/redirect?to={target}").get(timeout=30)
    assert demo_sandbox.demo.stats()["redirects"] == 3


def test_bad_form_input_is_refused(celery_app: Any, demo_sandbox: Any, worker_factory: Any) -> None:
    worker_factory(_env(demo_sandbox))
    with pytest.raises(InvalidTaskInput):
        fetch_page.delay(f"{demo_sandbox.demo_url}/page/1", form={"a": 1}).get(timeout=30)


def test_a_worker_killed_holding_the_session_lock_is_replaced_within_its_ttl(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    # A holder that dies without releasing: another page task takes over after the TTL.
    settings = dataclasses.replace(get_settings(), lock_ttl=1.0)
    host = demo_sandbox.demo_url.split("//")[1]
    env = _env(demo_sandbox, CAPTCHA_TASKS_LOCK_TTL="1")
    victim = worker_factory(env, name="victim@127.0.0.1")
    survivor_env = dict(env)
    lock = SessionLock(state_redis(settings), settings, host, owner="victim@127.0.0.1")
    assert lock.acquire()  # held as a crashed worker would have left it
    os.killpg(victim.proc.pid, signal.SIGKILL)
    victim.proc.wait(timeout=10)
    worker_factory(survivor_env, name="survivor@127.0.0.1")
    page = fetch_page.delay(f"{demo_sandbox.demo_url}/page/after-crash").get(timeout=60)
    assert page["status"] == 200 and page["solved"]


SOCKS_USER = "pageuser"
SOCKS_PASSWORD = "S0cks-Page-Pa55"
URL_PASSWORDS = ("B0b-Url-Pa55", "Car0l-Url-Pa55", "F0rm-Url-Pa55")


def _lease(worker: Any, timeout: float = 10) -> str:
    """The pool id of the proxy ``worker`` leased (it leases at start)."""
    settings = get_settings()
    client = state_redis(settings)
    key = Keys(settings.key_prefix).worker_proxy(worker.name)
    wait_until(lambda: client.get(key) is not None, timeout=timeout, what="the proxy lease")
    return str(client.get(key))


def test_a_page_is_fetched_and_its_challenge_solved_through_a_socks5_proxy(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    settings = get_settings()
    with SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD) as socks:
        ident = ProxyPool(state_redis(settings), settings).add(socks.url("socks5"))
        worker = worker_factory(_env(demo_sandbox))
        assert _lease(worker) == ident
        page = fetch_page.delay(f"{demo_sandbox.demo_url}/page/socks").get(timeout=120)
        tunnels = socks.tunnels
    # Challenged, solved (the provider was given the same proxy, as SOCKS5), submitted.
    assert page["status"] == 200 and page["solved"] and page["source"] == "api"
    site = demo_sandbox.demo.stats()
    assert site["challenges"] >= 1 and site["tokens_accepted"] == 1
    assert site["pages_served"] == 1
    assert demo_sandbox.stats()["submitted"] == 1
    assert "is gone" not in worker.log() and "ERROR_BAD_PROXY" not in worker.log()
    # Every request of the page went through the proxy, authenticated.
    port = int(demo_sandbox.demo_url.rsplit(":", 1)[1])
    assert len(tunnels) >= 2  # fetch_page's GET, submit_challenge's POST (and GET)
    assert all(t.username == SOCKS_USER and t.auth_ok for t in tunnels)
    assert {t.target for t in tunnels} == {("127.0.0.1", port)}
    assert SOCKS_PASSWORD not in worker.log()


def test_a_wrong_socks5_password_fails_the_page_with_a_typed_error(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    settings = get_settings()
    wrong = "Wr0ng-Socks-Pa55"
    with SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD) as socks:
        ProxyPool(state_redis(settings), settings).add(socks.url("socks5h", password=wrong))
        worker = worker_factory(_env(demo_sandbox))
        _lease(worker)
        result = fetch_page.delay(f"{demo_sandbox.demo_url}/page/wrong")
        with pytest.raises(ProxyRejected) as info:
            result.get(timeout=60)
        handshakes = list(socks.handshakes)
    assert info.value.code == "PROXY_AUTH_FAILED"
    assert f"socks5h://{SOCKS_USER}:***@127.0.0.1:{socks.port}" in str(info.value)
    assert handshakes and all(h.auth_ok is False for h in handshakes)
    assert demo_sandbox.demo.stats()["challenges"] == 0
    raw = redis.Redis.from_url(settings.redis_url)
    meta = raw.get(f"celery-task-meta-{result.id}") or b""
    assert b"captcha_tasks.errors" in meta and b"ProxyRejected" in meta
    for text in (worker.log(), meta.decode(), str(info.value)):
        assert wrong not in text and SOCKS_PASSWORD not in text


def test_a_refused_url_with_a_password_leaves_the_password_nowhere(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    host = demo_sandbox.demo_url.split("//")[1]
    worker = worker_factory(_env(demo_sandbox))
    refused = [
        (f"http://bob:{URL_PASSWORDS[0]}@{host}/page/1",),
        (f"https://carol:{URL_PASSWORDS[1]}@example.org/page",),  # off the allowlist too
    ]
    # A URL with a password as form data: the page task runs, and its solve's job record
    # carries the chain's arguments (as a broker message does); never a log or a result.
    form = {"note": f"https://u:{URL_PASSWORDS[2]}@x.example/"}
    needles = scan_needles(task_args=refused)
    form_needles = scan_needles(task_args=[form])
    assert needles == set(URL_PASSWORDS[:2]) and form_needles == {URL_PASSWORDS[2]}
    # The caller refuses them at once (masked); sent past it by name, the worker does.
    for args in refused:
        with pytest.raises(TargetNotAllowed, match=r"credentials in the URL: '\w+://\w+:\*\*\*@"):
            fetch_page.apply_async(args)
    results = [send_redacted(celery_app, fetch_page.name, args, {}) for args in refused]
    errors = []
    for result in results:
        with pytest.raises(TargetNotAllowed) as info:
            result.get(timeout=30)
        errors.append(info.value)
    assert "credentials in the URL: 'http://bob:***@" in str(errors[0])
    with_form = fetch_page.apply_async((f"http://{host}/page/2",), {"form": form})
    assert with_form.get(timeout=60)["status"] == 200
    wait_until(
        lambda: worker.log().count(" succeeded in ") + worker.log().count(" raised ") >= 3,
        timeout=10,
        what="the worker's log lines",
    )
    settings = get_settings()
    raw = redis.Redis.from_url(settings.redis_url)
    metas = [raw.get(f"celery-task-meta-{r.id}") or b"" for r in [*results, with_form]]
    assert all(metas)
    redis_text, _ = redis_dump(raw, exclude=set())
    shown = {
        "worker log": worker.log(),
        "results": repr(metas),
        "errors": repr([(str(e), e.args) for e in errors]),
    }
    assert not leaks({**shown, "redis": redis_text}, needles)
    assert not leaks(shown, form_needles)
    assert "bob:***@" in shown["worker log"]  # the refusal is logged, masked
    # An expected refusal: one line, not an error with a traceback.
    assert shown["worker log"].count("raised expected: TargetNotAllowed") == 2
    assert "raised unexpected" not in shown["worker log"]
    assert "Traceback" not in shown["worker log"]
