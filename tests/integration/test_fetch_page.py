"""The page workflow through real workers against the sandbox's demo site."""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Any

import pytest

from captcha_tasks.dev.procs import wait_until
from captcha_tasks.errors import InvalidTaskInput, TargetNotAllowed
from captcha_tasks.page_tasks import fetch_page
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.settings import get_settings
from captcha_tasks.solver import RecaptchaV2
from captcha_tasks.solving.pool import TokenPool
from captcha_tasks.state import state_redis
from tests.conftest import worker_env

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
