"""A solve whose message comes back after it ended keeps its outcome.

The window (found from a lost task in the SIGKILL fault row): a worker admits a solve,
its engine starts the in.php call, and the whole worker is SIGKILLed before the
message is acknowledged. Another engine fails the job (``SubmitUncertain``: the call
may have reached the provider) and stores ``FAILURE``; after the visibility timeout
Redis hands the unacknowledged message out again, and the new execution stores
``STARTED`` (``task_track_started``) before it finds the job and ignores itself.
Celery keeps only ``SUCCESS`` from being overwritten, so the task went back to
``STARTED`` and never ended for its caller: lost.

Here the message is handed out again exactly as kombu's Redis transport restores an
unacknowledged one (the same payload pushed back onto its queue), after the solve has
ended, against a real worker and the sandbox.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks_dev.procs import wait_until
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
QUEUE = "celery"


def _meta_status(client: redis.Redis, task_id: str) -> str | None:
    import json

    raw = client.get(f"celery-task-meta-{task_id}")
    return None if raw is None else str(json.loads(raw)["status"])


@pytest.mark.parametrize("outcome", ["FAILURE", "SUCCESS"])
def test_a_message_redelivered_after_its_solve_ended_keeps_the_outcome(
    outcome: str, celery_app: Any, redis_url: str, sandbox_factory: Any, worker_factory: Any
) -> None:
    # Every captcha unsolvable: the job ends FAILURE (after its one resubmit) in the engine.
    sandbox = sandbox_factory(unsolvable_rate=1.0 if outcome == "FAILURE" else 0.0)
    client = redis.Redis.from_url(redis_url)
    result = solve_recaptcha_v2.delay(V2_KEY, f"https://example.com/redelivered/{outcome}")
    # The message as the broker holds it before any worker takes it: what Redis hands out
    # again when the worker that took it dies unacknowledged.
    payloads = client.lrange(QUEUE, 0, -1)
    assert len(payloads) == 1
    worker = worker_factory(worker_env(sandbox.url))
    wait_until(
        lambda: _meta_status(client, result.id) == outcome,
        timeout=30,
        interval=0.1,
        what=f"the solve to end {outcome}",
    )
    submits = int(sandbox.stats()["submitted"])

    client.lpush(QUEUE, payloads[0])  # the redelivery (kombu's restore of an unacked message)
    wait_until(
        lambda: worker.log().count(f"[{result.id}] admitted before") >= 1,
        timeout=30,
        interval=0.1,
        what="the redelivered copy to run",
    )
    time.sleep(0.5)  # anything the second execution would still write lands by now

    assert _meta_status(client, result.id) == outcome
    assert result.ready()
    if outcome == "FAILURE":
        with pytest.raises(CaptchaUnsolvable):
            result.get(timeout=5)
    else:
        assert result.get(timeout=5)["solution"]
    # The second copy found its job and sent nothing to the provider.
    assert int(sandbox.stats()["submitted"]) == submits
    client.close()


def test_a_message_taken_by_a_consumer_killed_before_recording_it_is_not_lost(
    celery_app: Any, redis_url: str, sandbox: Any, worker_factory: Any
) -> None:
    """The window the SIGKILL row lost a task in: kombu's Redis transport takes a message
    off its queue with BRPOP and records it as unacknowledged only afterwards. Here a
    real consumer process takes the message with BRPOP and is SIGKILLed before it
    records anything; the message must still be solved, after the visibility timeout."""
    import signal
    import subprocess
    import sys

    client = redis.Redis.from_url(redis_url)
    result = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/redelivered/popped")
    assert client.llen(QUEUE) == 1
    taker = (
        "import sys, time, redis\n"
        "got = redis.Redis.from_url(sys.argv[1]).brpop([sys.argv[2]], timeout=10)\n"
        "print('took' if got else 'none', flush=True)\n"
        "time.sleep(60)\n"
    )
    consumer = subprocess.Popen(
        [sys.executable, "-c", taker, redis_url, QUEUE],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert consumer.stdout is not None
        assert consumer.stdout.readline().strip() == b"took"
    finally:
        consumer.send_signal(signal.SIGKILL)
        consumer.wait(timeout=10)
        if consumer.stdout is not None:
            consumer.stdout.close()
    assert client.llen(QUEUE) == 0  # the message is in no queue now

    # A worker with a short visibility timeout restores it (every 10 s it looks).
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_VISIBILITY_TIMEOUT="10"))
    assert result.get(timeout=45)["solution"]
    assert int(sandbox.stats()["submitted"]) == 1
    client.close()
