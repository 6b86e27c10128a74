"""A worker on a Celery where one of the seam's assumptions does not hold still solves,
loses no message, and says once which public path it took instead.

The assumption broken here is ``celery-strategy`` (Celery's default execution strategy
and ``celery.worker.state.task_ready``, which admission in the consumer relies on):
``tests.support.broken_internals`` removes ``task_ready`` from ``celery.worker.state``
in the worker process before Celery starts, as a release that renamed it would.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks_dev.procs import wait_until
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
SOLVES = 12
FALLBACK = "falling back to solves are admitted in the pool"


def _admissions(log: str) -> list[str]:
    """The process name of each "admitted" line (Celery's ``%(processName)s``)."""
    return re.findall(r"/([\w-]+)\] Task captcha_tasks\.solve_recaptcha_v2\[[^]]+\] admitted", log)


@pytest.mark.parametrize("broken", [False, True], ids=["as-assumed", "strategy-broken"])
def test_a_worker_with_a_broken_assumption_solves_every_message_through_the_public_path(
    broken: bool, celery_app: Any, redis_url: str, sandbox: Any, worker_factory: Any
) -> None:
    launcher = ("-m", "tests.support.broken_internals", "celery-strategy")
    worker = worker_factory(
        worker_env(sandbox.url), concurrency=2, **({"launcher": launcher} if broken else {})
    )
    results = [
        solve_recaptcha_v2.delay(SITEKEY, f"https://example.com/fallback/{i}")
        for i in range(SOLVES)
    ]
    solved = [r.get(timeout=60) for r in results]
    assert [s["type"] for s in solved] == ["recaptcha_v2"] * SOLVES
    assert len({s["captcha_id"] for s in solved}) == SOLVES
    assert all(r.state == "SUCCESS" for r in results)

    # Nothing left behind: every message acknowledged, none waiting.
    client = redis.Redis.from_url(redis_url)
    wait_until(
        lambda: client.hlen("unacked") == 0 and client.llen("celery") == 0,
        timeout=10,
        interval=0.1,
        what="every message acknowledged",
    )
    log = worker.log_path.read_text()
    where = _admissions(log)
    assert len(where) == SOLVES, log[-3000:]
    if broken:
        # Admitted by the pool's processes, and the fallback said once, with its reason.
        assert all(name.startswith("ForkPoolWorker") for name in where), where
        assert log.count(FALLBACK) == 1, log[-3000:]
        line = next(line for line in log.splitlines() if FALLBACK in line)
        assert "celery.worker.state no longer has `task_ready`" in line
        assert "WARNING" in line
    else:
        assert set(where) == {"MainProcess"}, where
        assert FALLBACK not in log
