"""Celery's own controls on the solves the engines hold, with real workers and Celery's
own commands: ``revoke()`` (a waiting solve leaves the queue unsent, one at the provider
is read no more, its captcha counted in the spend, a revoked page frees its host's
session lock), ``celery purge`` (the waiting solves end revoked) and ``celery inspect
solves`` (what ``captcha-tasks status`` counts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
import redis
from celery.exceptions import TaskRevokedError

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.engine.spend import SpendLedger
from captcha_tasks.monitor.status import thread_budget
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.settings import get_settings
from captcha_tasks.settings.providers import DEFAULT_PROVIDER
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.procs import wait_until
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

SITEKEY = "6LdSandboxDemoSiteKey0000000000000000000"


def _jobs(client: redis.Redis) -> int:
    prefix = get_settings().key_prefix
    return sum(1 for _ in client.scan_iter(f"{prefix}job:*", count=1000))


def test_revoked_waiting_solves_are_never_sent_and_get_raises_revoked(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    # 3 s a solve, 5 threads: 30 solves take six rounds; the last ten wait for rounds 5-6.
    sandbox = sandbox_factory(threads=5, latency={"recaptcha_v2": 60.0}, jitter=0.0)
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="5"), concurrency=2)
    client = state_redis(get_settings())
    sent = [solve_recaptcha_v2.delay(SITEKEY, f"https://example.com/r/{i}") for i in range(30)]
    wait_until(lambda: _jobs(client) == 30, timeout=20, what="30 solves admitted")
    assert sandbox.stats()["submitted"] <= 10  # the last ten are still waiting
    for n, result in enumerate(sent[20:]):
        result.revoke(terminate=n % 2 == 1)  # terminate=True does the same
    for result in sent[20:]:
        with pytest.raises(TaskRevokedError):
            result.get(timeout=30)
        assert result.state == "REVOKED"
    solved = [result.get(timeout=60) for result in sent[:20]]
    assert all(s["solution"] for s in solved)
    time.sleep(1.0)  # nothing more is on its way to the provider
    assert sandbox.stats()["submitted"] == 20


def test_a_revoked_solve_at_the_provider_is_read_no_more_and_its_captcha_counted(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(latency={"recaptcha_v2": 600.0})  # 30 s at the tests' scale
    env = worker_env(sandbox.url, CAPTCHA_TASKS_PRICES="recaptcha_v2=2.00")
    worker_factory(env, concurrency=1)
    result = solve_recaptcha_v2.delay(SITEKEY, "https://example.com/long")
    wait_until(lambda: sandbox.stats()["polls"] >= 1, timeout=20, what="its first read")
    revoked_at = time.monotonic()
    result.revoke()
    with pytest.raises(TaskRevokedError):
        result.get(timeout=10)
    assert time.monotonic() - revoked_at < 5  # not its 30 s answer
    polls = sandbox.stats()["polls"]
    time.sleep(2.0)
    assert sandbox.stats()["polls"] == polls
    settings = get_settings()
    spent = SpendLedger(state_redis(settings), Keys(settings.key_prefix)).last_hour(
        DEFAULT_PROVIDER, time.time()
    )
    assert spent["recaptcha_v2"][1] == 1  # billed at submit: counted once
    assert str(spent["recaptcha_v2"][0]) == "0.002"


def test_a_revoked_page_frees_its_hosts_session_lock(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(demo_port=0, latency={"recaptcha_v2": 100.0})  # 5 s a solve
    host = sandbox.demo_url.split("//")[1]
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host), concurrency=2)
    settings = get_settings()
    lock = SessionLock(state_redis(settings), settings, host.split(":")[0])
    page = fetch_page.delay(f"{sandbox.demo_url}/page/1")
    wait_until(lambda: lock.holder() is not None, timeout=20, what="the page's lock")
    page.revoke()
    with pytest.raises(TaskRevokedError):
        page.get(timeout=30)
    # Freed when its solve ended and its post was dropped, not at the lock's TTL.
    wait_until(lambda: lock.holder() is None, timeout=10, what="the lock freed")
    assert sandbox.demo.stats()["tokens_accepted"] == 0  # the post never went out


def _celery(*argv: str) -> subprocess.CompletedProcess[str]:
    """``celery -A captcha_tasks ARGV`` as a user runs it, against the tests' Redis."""
    return subprocess.run(
        [sys.executable, "-m", "celery", "-A", "captcha_tasks", *argv],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_celery_inspect_shows_the_solves_and_celery_purge_ends_the_waiting_ones(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    # 3 s a solve, 2 threads: 15 rounds; the two `celery` commands (a few seconds each on
    # a loaded machine) run while 20 or more solves wait.
    sandbox = sandbox_factory(threads=2, latency={"recaptcha_v2": 60.0}, jitter=0.0)
    node = f"controls-{os.getpid()}@127.0.0.1"
    env = worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="2")
    worker = worker_factory(env, name=node, concurrency=2)
    settings = get_settings()
    client = state_redis(settings)
    sent = [solve_recaptcha_v2.delay(SITEKEY, f"https://example.com/p/{i}") for i in range(30)]
    wait_until(lambda: _jobs(client) == 30, timeout=20, what="30 solves admitted")
    wait_until(lambda: sandbox.stats()["in_flight"] == 2, timeout=20, what="2 at the provider")

    keys = Keys(settings.key_prefix)
    before = thread_budget(client, keys, settings, time.time())
    shown = _celery("inspect", "solves", "--json", "-d", node, "--timeout", "10")
    after = thread_budget(client, keys, settings, time.time())
    assert shown.returncode == 0, shown.stderr
    reply = json.loads(shown.stdout)[node]
    # What captcha-tasks status counts, as of some moment between the two reads.
    assert before["waiting"] >= reply["waiting"] >= after["waiting"]
    assert reply["in_flight"] == before["in_flight"] == 2
    assert [engine["provider"] for engine in reply["engines"]] == ["default"]
    # Celery's own inspect lists none of them: the reason for the command above.
    active = _celery("inspect", "active", "--json", "-d", node, "--timeout", "10")
    assert all(not tasks for tasks in json.loads(active.stdout).values())

    purged = _celery("purge", "-f")
    assert purged.returncode == 0, purged.stderr
    assert "Purged " in purged.stdout, (purged.stdout, purged.stderr)
    count = int(purged.stdout.split("Purged ")[1].split()[0])
    # The solves waiting at that moment (the broker's queue was empty): 28 less two
    # for each round that ended during the commands.
    assert count >= 15
    assert client.zcard(keys.waiting) == 0
    outcomes = {"SUCCESS": 0, "REVOKED": 0}
    for result in sent:
        try:
            result.get(timeout=90)
            outcomes["SUCCESS"] += 1
        except TaskRevokedError:
            outcomes["REVOKED"] += 1
    assert outcomes == {"SUCCESS": 30 - count, "REVOKED": count}
    assert sandbox.stats()["submitted"] == 30 - count  # none of the purged was sent
    worker.check_alive()
