"""Page tasks that wait for a host's session lock park instead of retrying, through real
workers against the sandbox's demo site: re-sent (same task id) when the lock is
released, or by the sweeper when a crashed holder's lock expires."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from captcha_tasks.session.cookie_model import normalize_host
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.bench.pages import execution_counts
from captcha_tasks_dev.procs import wait_until
from tests.support.processes import LOCK_HOLDER, SpawnPython, read_line
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration


def _env(sandbox: Any, **extra: str) -> dict[str, str]:
    host = sandbox.demo_url.split("//")[1]
    return worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host, **extra)


def _executions(logs: str) -> int:
    """fetch_page executions: each one a message the worker received (a challenged
    page's submit step, received under fetch_page's name, aside)."""
    return execution_counts(logs)["page_executions"]


def _retries(logs: str) -> int:
    return len(re.findall(r"captcha_tasks\.fetch_page\[[^\]]+\] retry", logs))


def _parked_key(sandbox: Any) -> str:
    host = normalize_host(sandbox.demo_url.split("//")[1])
    return Keys(get_settings().key_prefix).session_parked(host)


def test_pages_waiting_for_the_lock_are_parked_and_re_sent_without_retries(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any
) -> None:
    pages = 30
    env = _env(demo_sandbox)
    workers = [worker_factory(env, concurrency=4) for _ in range(2)]
    results = [fetch_page.delay(f"{demo_sandbox.demo_url}/page/{i}") for i in range(pages)]
    done = [r.get(timeout=120) for r in results]
    assert all(p["status"] == 200 for p in done)
    assert sum(p["solved"] for p in done) == 1
    assert demo_sandbox.stats()["submitted"] == 1
    logs = "".join(w.log() for w in workers)
    parked = logs.count("parked until the session lock")
    assert parked > 0  # the solve took long enough that others had to wait
    assert _retries(logs) == 0
    # Each page ran once, plus once more per park (re-sent when the lock was freed).
    assert _executions(logs) == pages + parked
    assert state_redis(get_settings()).zcard(_parked_key(demo_sandbox)) <= 1  # a sweep mark


def test_pages_parked_behind_a_killed_holder_finish_after_its_lock_expires(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, spawn: SpawnPython
) -> None:
    # The waiters give up 2 TTLs after they first parked: half a TTL of waiting here,
    # then up to a TTL until the killed holder's lock expires (it extended it every
    # quarter TTL), leave half a TTL or more for the first page's solve and the wake-ups.
    # 5 s leaves 2.5 s against a solve of about 1.5 s at the tests' time scale, with room
    # for a busy machine (3 s would leave 1.5 s: pages lost to SESSION_LOCK_TIMEOUT).
    ttl, pages = 5.0, 6
    host = demo_sandbox.demo_url.split("//")[1]
    holder = spawn(LOCK_HOLDER, str(ttl), host)
    assert read_line(holder, 30) == "acquired"
    worker = worker_factory(_env(demo_sandbox, CAPTCHA_TASKS_LOCK_TTL=str(ttl)), concurrency=2)
    results = [fetch_page.delay(f"{demo_sandbox.demo_url}/page/k{i}") for i in range(pages)]
    client = state_redis(get_settings())
    key = _parked_key(demo_sandbox)
    # Every page is parked (plus the sweeper's mark), and nothing runs meanwhile.
    wait_until(lambda: client.zcard(key) == pages + 1, timeout=30, what="all pages parked")
    time.sleep(ttl / 2)  # (the waiters give up 2 TTLs after they first parked)
    assert client.zcard(key) == pages + 1
    assert not any(r.ready() for r in results)

    holder.kill()  # SIGKILL by PID: no release, no clean-up
    holder.wait(timeout=10)
    killed_at = time.monotonic()
    done = [r.get(timeout=60) for r in results]
    assert all(p["status"] == 200 for p in done)
    assert sum(p["solved"] for p in done) == 1
    # Woken by the sweeper at the lock's expiry (a TTL after the kill), not at once.
    assert ttl - 1 < time.monotonic() - killed_at < ttl + 10
    logs = worker.log()
    assert _retries(logs) == 0
    assert _executions(logs) == pages + logs.count("parked until the session lock")
    assert "sweep_session_lock" in logs
