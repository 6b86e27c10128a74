"""The result consumer's pub/sub connection and the finalizers of ``AsyncResult``s, against
the session's real Redis (the exit itself, through real workers: tests/integration/
test_clean_exit.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from celery.result import AsyncResult

from captcha_tasks.worker.celery_internals import result_backend
from captcha_tasks_dev.procs import wait_until


def _subscribers(client: redis.Redis, task_id: str) -> int:
    ((_, count),) = client.pubsub_numsub(f"celery-task-meta-{task_id}")
    return int(count)


@pytest.fixture
def consumer(celery_app: Any) -> Any:
    found = celery_app.backend.result_consumer
    yield found
    found.stop()


@pytest.fixture
def client(redis_url: str) -> Any:
    with redis.Redis.from_url(redis_url) as conn:
        yield conn


def test_a_result_the_consumer_never_subscribed_unsubscribes_nothing(consumer: Any) -> None:
    subscribed = str(uuid.uuid4())
    consumer.consume_from(subscribed)
    pubsub = consumer._pubsub
    # The state interpreter finalization can leave: redis-py's PubSub finalized first.
    pubsub.reset()
    consumer.cancel_for(str(uuid.uuid4()))  # e.g. one sent by aio, or already cancelled
    assert pubsub.connection is None  # no connection opened for nothing


def test_after_the_exit_hook_a_collected_result_touches_no_connection(
    celery_app: Any, consumer: Any, client: redis.Redis
) -> None:
    task_id = str(uuid.uuid4())
    consumer.consume_from(task_id)
    assert _subscribers(client, task_id) == 1
    result = AsyncResult(task_id, app=celery_app)

    result_backend.stop_result_consumers()

    assert consumer._pubsub is None and not consumer.subscribed_to
    # Closed: Redis drops the subscription once it reads the close.
    wait_until(lambda: _subscribers(client, task_id) == 0, timeout=5, what="the close")
    result.__del__()  # what the garbage collector does at exit: nothing to send
    assert consumer._pubsub is None
    # A send after it (another atexit hook, say) starts the consumer again.
    consumer.consume_from(task_id)
    assert _subscribers(client, task_id) == 1


def test_a_failure_is_kept_for_its_own_expiry_where_celery_has_one(
    celery_app: Any, client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Celery 5.7's result_failure_expires (the backend's failure_expires); before 5.7 the
    # attribute is absent and every state is kept for result_expires.
    backend = celery_app.backend
    monkeypatch.setattr(backend, "expires", 3600, raising=False)
    monkeypatch.setattr(backend, "failure_expires", 60, raising=False)
    failed, done = str(uuid.uuid4()), str(uuid.uuid4())
    backend.mark_as_failure(failed, ValueError("no"))
    backend.mark_as_done(done, {"ok": True})
    assert 0 < client.ttl(f"celery-task-meta-{failed}") <= 60
    assert 60 < client.ttl(f"celery-task-meta-{done}") <= 3600
