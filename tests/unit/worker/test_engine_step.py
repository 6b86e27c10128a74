"""The engine's completer against the session's real Redis: a batch of outcomes sends
its events in one round trip at its end, each result stored at once."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from captcha_tasks.engine import Job
from captcha_tasks.worker.engine_step import CeleryCompleter
from tests.support.events import EventTap, event_tap


def _job(task_id: str) -> Job:
    return Job.from_fields(task_id, {"state": "done", "type": "recaptcha_v2"})


@pytest.fixture
def events(celery_app: Any) -> Iterator[EventTap]:
    with event_tap(celery_app) as tap:
        yield tap


def test_a_batch_stores_each_result_at_once_and_sends_the_events_at_its_end(
    celery_app: Any, events: EventTap
) -> None:
    completer = CeleryCompleter(celery_app, "engine-test@h")
    ids = [f"batched-{i}" for i in range(3)]
    with completer.batched():
        for task_id in ids:
            completer.succeed(_job(task_id), {"solution": "tok", "solve_seconds": 1.0})
        assert all(celery_app.AsyncResult(i).state == "SUCCESS" for i in ids)
        assert events.read(wait=0.3) == []  # buffered until the batch ends
    got = events.read()
    assert [(e["type"], e["uuid"]) for e in got] == [("task-succeeded", i) for i in ids]
    assert "tok" not in repr(got)  # the solution stays out of events


def test_a_batch_that_raises_still_sends_the_events_of_what_it_stored(
    celery_app: Any, events: EventTap
) -> None:
    completer = CeleryCompleter(celery_app, "engine-test@h")
    with pytest.raises(RuntimeError), completer.batched():
        completer.succeed(_job("stored-1"), {"solution": "tok", "solve_seconds": 1.0})
        raise RuntimeError("a later job failed")
    assert [e["uuid"] for e in events.read()] == ["stored-1"]


def test_outside_a_batch_each_event_goes_at_once(celery_app: Any, events: EventTap) -> None:
    completer = CeleryCompleter(celery_app, "engine-test@h")
    with completer.batched(), completer.batched():  # nested: the outer one sends
        completer.succeed(_job("nested-1"), {"solution": "tok", "solve_seconds": 1.0})
    completer.succeed(_job("alone-1"), {"solution": "tok", "solve_seconds": 1.0})
    assert [e["uuid"] for e in events.read()] == ["nested-1", "alone-1"]


def test_the_task_chained_after_a_solve_is_shown_with_the_solution_masked(
    celery_app: Any, events: EventTap
) -> None:
    # A task of the caller's own app, which computes no redacted reprs of its own.
    chained = {
        "task": "myapp.record_token",
        "args": [],
        "kwargs": {},
        "options": {"queue": "myapp-chain"},
        "subtask_type": None,
    }
    job = Job.from_fields(
        "chained-1",
        {"state": "done", "type": "turnstile", "request": json.dumps({"chain": [chained]})},
    )
    CeleryCompleter(celery_app, "engine-test@h").succeed(
        job, {"solution": "tok-123456", "type": "turnstile", "solve_seconds": 1.0}
    )
    sent = [e for e in events.read() if e["type"] == "task-sent"]
    assert [e["name"] for e in sent] == ["myapp.record_token"]
    assert "turnstile" in sent[0]["args"] and "tok-123456" not in sent[0]["args"]
    # The chained task itself gets the real solution.
    raw = redis.Redis.from_url(celery_app.conf.broker_url).lrange("myapp-chain", 0, -1)
    assert [json.loads(base64.b64decode(json.loads(m)["body"]))[0] for m in raw] == [
        [{"solution": "tok-123456", "type": "turnstile", "solve_seconds": 1.0}]
    ]
