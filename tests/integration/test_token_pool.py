"""Token pools: exactly-once hand-out, per-token expiry, fills through real engines."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest
import requests
from celery import chain

from captcha_tasks import ping, solve_recaptcha_v2
from captcha_tasks.engine.pool import TokenPool, pool_id_for
from captcha_tasks.provider import RecaptchaV2, RecaptchaV3
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import wait_until
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PAGE = "https://example.com/pooled"


@pytest.fixture
def pool(redis_url: str) -> TokenPool:
    settings = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})
    return TokenPool(state_redis(settings), settings)


def _register(pool: TokenPool, captcha: Any) -> str:
    pool.fill(captcha, target=0)  # registers the pool without admitting anything
    pool_id = pool_id_for(captcha)
    assert pool_id
    return pool_id


def test_each_token_is_handed_out_exactly_once_under_concurrent_takers(pool: TokenPool) -> None:
    captcha = RecaptchaV2(SITEKEY, PAGE)
    pool_id = _register(pool, captcha)
    now = time.time()
    for i in range(50):
        pool.put(
            pool_id, captcha_id=str(i), token=f"tok-{i}", expires_at=now + 100, task_id=f"t{i}"
        )
    taken: list[str] = []
    lock = threading.Lock()

    def taker() -> None:
        while (got := pool.take(captcha)) is not None:
            with lock:
                taken.append(got["solution"])

    threads = [threading.Thread(target=taker) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(taken) == sorted(f"tok-{i}" for i in range(50))  # all, none twice
    assert pool.take(captcha) is None


def test_a_token_with_less_than_the_minimum_life_is_never_handed_out(pool: TokenPool) -> None:
    captcha = RecaptchaV2(SITEKEY, PAGE)
    pool_id = _register(pool, captcha)
    now = time.time()
    pool.put(pool_id, captcha_id="1", token="short", expires_at=now + 5, task_id="a")
    assert pool.take(captcha, min_life=10) is None
    pool.put(pool_id, captcha_id="2", token="long", expires_at=now + 60, task_id="b")
    pool.put(pool_id, captcha_id="3", token="longer", expires_at=now + 90, task_id="c")
    got = pool.take(captcha, min_life=10)
    assert got is not None
    # The soonest-expiring token that still has enough life, with its own expiry.
    assert got["solution"] == "long" and got["captcha_id"] == "2"
    assert got["source"] == "pool" and got["expires_at"] == pytest.approx(now + 60, abs=0.01)


def test_pools_are_per_sitekey_and_page_or_action(pool: TokenPool) -> None:
    v2 = RecaptchaV2(SITEKEY, PAGE)
    other_page = RecaptchaV2(SITEKEY, PAGE + "/other")
    v3_login = RecaptchaV3(SITEKEY, PAGE, action="login")
    v3_pay = RecaptchaV3(SITEKEY, PAGE, action="pay")
    ids = {pool_id_for(c) for c in (v2, other_page, v3_login, v3_pay)}
    assert len(ids) == 4
    assert pool_id_for(RecaptchaV2(SITEKEY, PAGE, data_s="x")) is None  # page-load bound


def test_adaptive_size_follows_demand_and_token_life(pool: TokenPool) -> None:
    captcha = RecaptchaV2(SITEKEY, PAGE)
    pool_id = pool_id_for(captcha)
    assert pool_id
    pool.fill(captcha, adaptive=True)
    assert pool.adaptive_target(pool_id, "recaptcha_v2") == 0  # no demand, no waste
    for _ in range(120):  # 120 takes in the 600 s window: 0.2 per second
        pool.take(captcha)
    target = pool.adaptive_target(pool_id, "recaptcha_v2")
    # Covers 0.2/s during a 15 s x 1.5 refill, at most what 110 s of life can use.
    assert 5 <= target <= 22


def test_fills_go_to_the_pool_and_solve_tasks_take_from_it(
    celery_app: Any, sandbox: Any, worker_factory: Any, pool: TokenPool
) -> None:
    worker_factory(worker_env(sandbox.url))
    captcha = RecaptchaV2(SITEKEY, PAGE)
    pool_id = pool_id_for(captcha)
    assert pool_id
    pool.settings = dataclasses.replace(pool.settings, time_scale=0.05)
    fill = pool.fill(captcha, target=3)
    assert fill.admitted == 3, fill
    wait_until(
        lambda: pool.redis.zcard(Keys().pool(pool_id)) == 3, timeout=60, what="3 pooled tokens"
    )
    result = solve_recaptcha_v2.delay(SITEKEY, PAGE).get(timeout=30)
    assert result["source"] == "pool"
    assert result["submits"] == 0
    verified = requests.post(
        f"{sandbox.url}/siteverify", data={"response": result["solution"]}, timeout=5
    ).json()
    assert verified["success"] is True  # a pooled token was never given to anyone else
    # The take topped the pool up again: 3 fills and 1 refill, and no solve for the caller.
    wait_until(lambda: pool.redis.zcard(Keys().pool(pool_id)) == 3, timeout=30, what="refill")
    assert sandbox.stats()["submitted"] == 4


def test_a_solve_task_in_a_chain_passes_its_result_on(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker = worker_factory(worker_env(sandbox.url))
    outcome = chain(solve_recaptcha_v2.s(SITEKEY, PAGE + "/chain"), ping.si()).apply_async()
    assert outcome.get(timeout=60)["hostname"] == worker.name
    solved = outcome.parent.get(timeout=5)
    assert solved["source"] == "api" and solved["solution"]


def test_a_pool_registered_for_a_v3_action_is_listed_in_status(pool: TokenPool) -> None:
    captcha = RecaptchaV3(SITEKEY, PAGE, action="login")
    pool.fill(captcha, target=0)
    [entry] = pool.status()
    assert entry["type"] == "recaptcha_v3" and entry["scope"].startswith("action=login")
    assert entry["size"] == 0 and entry["target"] == 0
