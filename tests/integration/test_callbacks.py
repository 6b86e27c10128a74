"""Answers pushed by the provider, through real ``celery worker`` processes: the sandbox
delivers pingbacks (classic) and callbackUrl bodies (JSON) with 20 % of them dropped
and 20 % sent twice; two workers share one receiver port (SO_REUSEPORT).

Every solve succeeds once: nothing lost (the late fallback poll collects the dropped
ones), nothing ended twice (the sandbox sees one submit per task, the results carry
distinct captcha ids), and only the dropped callbacks cost polls.
"""

from __future__ import annotations

import socket
from typing import Any

import pytest

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.devtools.sandbox import dev_api_key
from tests.support.workers import worker_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TOKEN = "integration-callback-token-0123456789"
SOLVES = 60


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(("protocol", "dialect"), [("classic", "2captcha"), ("json", "capmonster")])
def test_no_solve_lost_or_ended_twice_with_dropped_and_duplicated_callbacks(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, protocol: str, dialect: str
) -> None:
    sandbox = sandbox_factory(
        protocol=protocol,
        dialect=dialect,
        threads=20,
        seed=7,
        callback_drop_rate=0.2,
        callback_duplicate_rate=0.2,
    )
    port = _free_port()
    env = worker_env(
        sandbox.url,
        CAPTCHA_TASKS_PROVIDER=dialect,
        CAPTCHA_TASKS_API_KEY=dev_api_key(dialect),
        CAPTCHA_TASKS_THREADS="20",
        CAPTCHA_TASKS_CALLBACK_URL=f"http://127.0.0.1:{port}/cb",
        CAPTCHA_TASKS_CALLBACK_TOKEN=TOKEN,
        CAPTCHA_TASKS_CALLBACK_PORT=str(port),
    )
    env.pop("CAPTCHAAI_API_KEY", None)
    workers = [worker_factory(env), worker_factory(env)]
    results = [
        solve_recaptcha_v2.delay(V2_KEY, f"https://j{i}.example.com/") for i in range(SOLVES)
    ]
    got = [r.get(timeout=120) for r in results]
    stats = sandbox.stats()
    assert all(g["source"] == "api" and g["submits"] == 1 for g in got)
    assert len({g["captcha_id"] for g in got}) == SOLVES
    assert (stats["submitted"], stats["duplicates"]) == (SOLVES, 0)
    dropped = int(stats["callbacks_dropped"])
    assert 0 < dropped < SOLVES and stats["callbacks_duplicated"] > 0
    # Only a dropped callback's captcha is read, once, at its late fallback poll (the
    # sandbox counts requests: a batch read of several is one).
    assert sorted(g["polls"] for g in got) == [0] * (SOLVES - dropped) + [1] * dropped
    assert 0 < stats["polls"] <= dropped
    for worker in workers:
        log = worker.log_path.read_text()
        assert TOKEN not in log
        assert not any(g["solution"] in log for g in got)
