"""What callers write to collect results, through real workers: ``.get()`` in a loop,
``ResultSet(...).get()``, ``group(...).get()``, for pages and solves alike. The
``.get()`` of a task that has already finished returns at once (it used to wait up to
a second each: see :mod:`captcha_tasks.worker.celery_internals.result_backend`)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import pytest
import redis
from celery import group
from celery.result import AsyncResult, ResultSet

from captcha_tasks.worker.kind_tasks import solve_recaptcha_v2
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.procs import wait_until
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: The caller's budget for collecting results that are all in already.
BUDGET = 1.0


def _final(client: redis.Redis, results: Sequence[AsyncResult]) -> bool:
    metas = client.mget([f"celery-task-meta-{r.id}" for r in results])
    return all(m and json.loads(m)["status"] in ("SUCCESS", "FAILURE") for m in metas)


def _loop_within_budget(results: Sequence[AsyncResult]) -> tuple[float, int]:
    """``[r.get() for r in results]``, given up once it runs past twice the budget (it
    would otherwise take a second per result); (seconds, results collected)."""
    started = time.monotonic()
    collected = 0
    for r in results:
        r.get(timeout=30)
        collected += 1
        if time.monotonic() - started > 2 * BUDGET:
            break
    return time.monotonic() - started, collected


def _first_finishes_last(
    redis_url: str, send: Callable[..., AsyncResult], count: int
) -> tuple[AsyncResult, list[AsyncResult]]:
    """A task sent first but run last (a countdown), then ``count`` more; the first's
    ``get()`` returns once all the others are in (its wait reads their results)."""
    last = send(countdown=3)
    others = [send() for _ in range(count)]
    with redis.Redis.from_url(redis_url) as client:
        wait_until(lambda: _final(client, others), timeout=120, what="the other tasks")
        last.get(timeout=60)
        assert _final(client, [last, *others])
    return last, others


@pytest.fixture
def page_worker(demo_sandbox: Any, worker_factory: Any) -> str:
    host = demo_sandbox.demo_url.split("//")[1]
    worker_factory(worker_env(demo_sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host), concurrency=4)
    return str(demo_sandbox.demo_url)


def test_a_loop_of_get_over_finished_pages_is_fast(
    celery_app: Any, redis_url: str, page_worker: str
) -> None:
    pages = iter(range(1000))

    def send(**options: Any) -> AsyncResult:
        return fetch_page.apply_async((f"{page_worker}/page/{next(pages)}",), **options)

    _, others = _first_finishes_last(redis_url, send, 30)
    seconds, collected = _loop_within_budget(others)
    assert collected == len(others) and seconds < BUDGET, (collected, seconds)
    assert all(r.result["status"] == 200 for r in others)


def test_a_loop_of_get_over_finished_solves_is_fast(
    celery_app: Any, redis_url: str, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url), concurrency=2)

    def send(**options: Any) -> AsyncResult:
        return solve_recaptcha_v2.apply_async((V2_KEY, "https://example.com/login"), **options)

    _, others = _first_finishes_last(redis_url, send, 40)
    seconds, collected = _loop_within_budget(others)
    assert collected == len(others) and seconds < BUDGET, (collected, seconds)
    assert all(r.result["solution"] for r in others)


def test_result_set_and_group_get_of_finished_pages_are_fast(
    celery_app: Any, redis_url: str, page_worker: str
) -> None:
    urls = [f"{page_worker}/page/{i}" for i in range(40)]
    collections: list[tuple[ResultSet, Sequence[AsyncResult]]] = []
    as_group = group(fetch_page.s(url) for url in urls).apply_async()
    collections.append((as_group, as_group.results))
    as_set = ResultSet([fetch_page.delay(url) for url in urls])
    collections.append((as_set, as_set.results))
    for collection, results in collections:
        with redis.Redis.from_url(redis_url) as client:
            wait_until(partial(_final, client, results), timeout=120, what="the pages")
        started = time.monotonic()
        pages = collection.get(timeout=30)
        seconds = time.monotonic() - started
        assert seconds < BUDGET / 4, seconds  # one read, no 0.5 s interval after it
        assert [p["url"] for p in pages] == urls
