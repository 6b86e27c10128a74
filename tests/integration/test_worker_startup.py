"""A starting ``celery -A captcha_tasks worker`` decides (real worker processes).

An unreachable Redis, a key the only provider refuses, or a provider's ``_TYPES`` naming
a kind its protocol never solves stops it with a non-zero status after one line naming
the variable to check; a provider that merely does not
answer at start does not. (Two providers, one refusing its key: test_refused_key.)
An outage of Redis after start is retried as before and said twice: when it begins
and when it ends.
"""

from __future__ import annotations

import re
import time
from typing import Any

import pytest

from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import free_port, wait_until
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_sandbox import DEV_API_KEY
from tests.support.workers import WorkerProcess, wait_for_worker, worker_env

pytestmark = pytest.mark.integration

#: Well formed (32 letters and digits), but not a key the sandbox knows.
WRONG_KEY = "wrongKey" + "7" * 24


def _exit_within(worker: WorkerProcess, seconds: float) -> tuple[int, float]:
    """The worker's exit status and how long after the call it came."""
    started = time.monotonic()
    status = worker.proc.wait(timeout=seconds)
    return status, time.monotonic() - started


def _records(log: str) -> list[str]:
    """The worker's log records (``[time: LEVEL/process] message``), one per record."""
    return re.findall(r"^\[\d{4}-.*$", log, flags=re.MULTILINE)


def test_an_unreachable_redis_stops_the_worker_with_one_line_naming_the_variable(
    worker_factory: Any,
) -> None:
    # Nothing listens on this port; the password must never be shown.
    url = f"redis://:n0t-sh0wn@127.0.0.1:{free_port()}/0"
    env = worker_env("http://127.0.0.1:9", CAPTCHA_TASKS_REDIS_URL=url)
    worker = worker_factory(env, wait=False)
    status, took = _exit_within(worker, 60)
    log = worker.log()
    assert status == 69, log
    assert took < 45, took  # the default timeout (20 s) and the worker's own start
    named = [line for line in log.splitlines() if "CAPTCHA_TASKS_REDIS_URL" in line]
    assert len(named) == 1, named
    assert "redis://:***@127.0.0.1" in named[0]
    assert "n0t-sh0wn" not in log
    assert "Traceback" not in log
    # One line in all: no retry stream from the consumer, the engine or the proxy lease.
    assert [r for r in _records(log) if "WARNING/" in r or "ERROR/" in r] == [named[0]]
    assert "Trying again" not in log


def test_a_key_the_only_provider_refuses_stops_the_worker_with_one_line(
    redis_url: str, sandbox: Any, worker_factory: Any
) -> None:
    env = worker_env(sandbox.url, CAPTCHA_TASKS_API_KEY=WRONG_KEY)
    env.pop("CAPTCHAAI_API_KEY")
    worker = worker_factory(env, wait=False)
    status, _ = _exit_within(worker, 30)  # within 30 s, or TimeoutExpired
    log = worker.log()
    assert status == 78, log
    named = [line for line in log.splitlines() if "CAPTCHA_TASKS_API_KEY" in line]
    assert len(named) == 1, named
    assert "ERROR_KEY_DOES_NOT_EXIST" in named[0]
    assert WRONG_KEY not in log
    assert "Traceback" not in log
    assert " ready." not in log  # it never took work


def test_a_provider_that_does_not_answer_at_start_is_not_taken_out(
    redis_url: str, worker_factory: Any
) -> None:
    # Nothing listens at the provider's URL: that may pass, so the worker starts.
    url = f"http://127.0.0.1:{free_port()}"
    env = worker_env(url, CAPTCHAAI_API_KEY=DEV_API_KEY, CAPTCHA_TASKS_STARTUP_TIMEOUT="5")
    worker = worker_factory(env, wait=False)
    wait_for_worker(worker)
    log = worker.log()
    assert "a balance call at start failed" in log
    assert "refuses the key" not in log
    assert worker.proc.poll() is None


def test_a_redis_outage_after_start_is_reported_once_and_its_end_once(
    sandbox: Any, worker_factory: Any
) -> None:
    # A Redis of its own, stopped and started again on the same port.
    server = RedisServer().start()
    port = server.port
    again: RedisServer | None = None
    try:
        env = worker_env(
            sandbox.url, CAPTCHA_TASKS_REDIS_URL=server.url, CAPTCHA_TASKS_HEARTBEAT_INTERVAL="1"
        )
        worker = worker_factory(env)
        server.stop()
        wait_until(lambda: "Redis unavailable" in worker.log(), timeout=30, what="the warning")
        # The outage's length is this test's input: long enough for every part that
        # retries (the consumer every 2-8 s, the engine up to 5 s, the proxy lease and
        # the liveness beat every interval) to fail several times.
        time.sleep(10)
        again = RedisServer(port=port).start()
        wait_until(lambda: "Redis is back" in worker.log(), timeout=60, what="the end")
        # Retried as before: the consumer is back (its loop writes the liveness beat).
        beat = Keys(get_settings().key_prefix).heartbeat(worker.name)
        client = again.client()
        wait_until(lambda: bool(client.exists(beat)), timeout=30, what="a beat after the outage")
        log = worker.log()  # before this test's own stop makes another outage
    finally:
        for redis_server in (server, again):
            if redis_server is not None:
                redis_server.stop()
    after = log[log.index(" ready.") :]
    loud = [r for r in _records(after) if "WARNING/" in r or "ERROR/" in r]
    assert len(loud) == 1 and "Redis unavailable" in loud[0], loud
    assert len([r for r in _records(after) if "Redis is back" in r]) == 1
    assert "Traceback" not in after


def test_types_a_protocol_never_solves_stop_the_worker_with_one_line(
    redis_url: str, sandbox: Any, worker_factory: Any
) -> None:
    from captcha_tasks_sandbox import DEV_API_KEY

    env = worker_env(
        sandbox.url,
        CAPTCHA_TASKS_PROVIDERS="main",
        CAPTCHA_TASKS_MAIN_PROTOCOL="captchaai",
        CAPTCHA_TASKS_MAIN_URL=sandbox.url,
        CAPTCHA_TASKS_MAIN_API_KEY=DEV_API_KEY,
        CAPTCHA_TASKS_MAIN_TYPES="recaptcha_v2,funcaptcha",
    )
    for single in ("CAPTCHA_TASKS_SOLVER_URL", "CAPTCHAAI_API_KEY"):
        env.pop(single)
    worker = worker_factory(env, wait=False)
    status, _ = _exit_within(worker, 30)
    log = worker.log()
    assert status != 0, log
    named = [line for line in log.splitlines() if "CAPTCHA_TASKS_MAIN_TYPES" in line]
    assert named == [
        "Error: captcha_tasks: CAPTCHA_TASKS_MAIN_TYPES: protocol captchaai does not solve "
        "funcaptcha captchas"
    ], log
    assert "Traceback" not in log
