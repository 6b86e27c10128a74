"""``captcha_tasks.aio`` through real workers: a thousand solves awaited on one event
loop with a handful of OS threads, pages, bad input and timeouts."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import pytest

from captcha_tasks import aio
from captcha_tasks.errors import InvalidTaskInput
from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: How many solves the one loop awaits at once.
CONCURRENT = 1000


def test_one_loop_awaits_a_thousand_solves_with_a_few_threads(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(threads=250)
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="250"), concurrency=1)
    caller = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.support.aio_caller",
            str(CONCURRENT),
            "https://example.com/login",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert caller.returncode == 0, caller.stderr[-3000:]
    report = json.loads(caller.stdout.strip().splitlines()[-1])
    print("aio caller:", report)
    assert report["count"] == CONCURRENT
    assert report["same_as_get"] is True
    assert report["captcha_ids"] == CONCURRENT  # every one its own solve
    assert report["peak_threads"] < 5
    assert sandbox.stats()["submitted"] == CONCURRENT


def test_a_page_bad_input_and_a_timeout(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    host = demo_sandbox.demo_url.split("//")[1]
    worker_factory(worker_env(demo_sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host))

    async def main() -> tuple[Any, Any, str]:
        page = await aio.fetch_page(f"{demo_sandbox.demo_url}/page/1", timeout=60)
        with pytest.raises(InvalidTaskInput):
            await aio.solve_recaptcha_v2("", "not a url", timeout=30)
        slow = aio.send("captcha_tasks.solve_recaptcha_v2", V2_KEY, "https://example.com/x")
        with pytest.raises(asyncio.TimeoutError):
            await aio.result(slow, timeout=0.05)  # a solve takes ~1 s at this time scale
        # The task went on: its result is there for a later wait, and for .get().
        later = await aio.result(slow, timeout=60)
        return page, later, slow.get(timeout=10)["solution"]

    page, later, by_get = asyncio.run(main())
    assert page["status"] == 200 and page["solved"] is True
    assert later["solution"] == by_get
    assert demo_sandbox.demo.stats()["pages_served"] == 1
