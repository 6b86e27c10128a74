"""The engine's completer against the session's real Redis: a batch of outcomes sends
its events in one round trip at its end, each result stored at once."""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from captcha_tasks.engine import Job
from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks.worker.engine_step import CeleryCompleter
from captcha_tasks.worker.page_tasks import submit_challenge
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
    assert [(e["type"], e["uuid"]) for e in got] == [
        (kind, i) for i in ids for kind in ("task-started", "task-succeeded")
    ]
    assert "tok" not in repr(got)  # the solution stays out of events


def test_a_batch_that_raises_still_sends_the_events_of_what_it_stored(
    celery_app: Any, events: EventTap
) -> None:
    completer = CeleryCompleter(celery_app, "engine-test@h")
    with pytest.raises(RuntimeError), completer.batched():
        completer.succeed(_job("stored-1"), {"solution": "tok", "solve_seconds": 1.0})
        raise RuntimeError("a later job failed")
    assert [e["uuid"] for e in events.read()] == ["stored-1", "stored-1"]  # started, succeeded


def test_outside_a_batch_each_event_goes_at_once(celery_app: Any, events: EventTap) -> None:
    completer = CeleryCompleter(celery_app, "engine-test@h")
    with completer.batched(), completer.batched():  # nested: the outer one sends
        completer.succeed(_job("nested-1"), {"solution": "tok", "solve_seconds": 1.0})
    completer.succeed(_job("alone-1"), {"solution": "tok", "solve_seconds": 1.0})
    ended = [e["uuid"] for e in events.read() if e["type"] == "task-succeeded"]
    assert ended == ["nested-1", "alone-1"]


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


def test_a_chained_step_with_arguments_of_its_own_shows_them_redacted(
    celery_app: Any, events: EventTap
) -> None:
    # A challenged page's last step: it runs under the page's id and name, so the
    # arguments its task-sent shows are what Flower may keep for the page.
    page = {
        "url": "https://example.com/login",
        "action": "/login",
        "fields": {},
        "token_field": "g-recaptcha-response",
        "challenge_type": "recaptcha_v2",
        "form": {"password": "pw-secret-1"},
    }
    chained = dict(
        submit_challenge.s(**page).set(queue="page-chain", shadow="captcha_tasks.fetch_page")
    )
    job = Job.from_fields(
        "page-1",
        {"state": "done", "type": "recaptcha_v2", "request": json.dumps({"chain": [chained]})},
    )
    CeleryCompleter(celery_app, "engine-test@h").succeed(
        job, {"solution": "tok-654321", "type": "recaptcha_v2", "solve_seconds": 1.0}
    )
    (sent,) = [e for e in events.read() if e["type"] == "task-sent"]
    assert sent["kwargs"] == (
        "{'url': 'https://example.com/login', 'action': '/login', 'fields': {}, "
        "'token_field': 'g-recaptcha-response', 'challenge_type': 'recaptcha_v2', "
        "'form': {'password': '***'}}"
    ), sent
    assert "tok-654321" not in repr(sent) and "pw-secret-1" not in repr(sent)


def test_a_solve_ends_started_when_submitted_with_the_solve_as_its_runtime_and_one_line(
    celery_app: Any, events: EventTap, caplog: pytest.LogCaptureFixture
) -> None:
    request = json.dumps({"task": "captcha_tasks.solve_image"})
    job = Job.from_fields("timed-1", {"state": "done", "type": "image", "request": request})
    before = time.time()
    with caplog.at_level(logging.INFO, logger="captcha_tasks.worker.engine_step"):
        CeleryCompleter(celery_app, "engine-test@h").succeed(
            job, {"solution": "tok", "solve_seconds": 4.5, "queued_seconds": 13.6}
        )
    started, succeeded = events.read()
    assert (started["type"], succeeded["type"]) == ("task-started", "task-succeeded")
    # Dated when the provider got it: the solve's duration before the end.
    assert before - 4.5 <= started["timestamp"] <= time.time() - 4.5
    assert succeeded["runtime"] == 4.5
    assert succeeded["timestamp"] - started["timestamp"] == pytest.approx(4.5, abs=0.2)
    assert [r.getMessage() for r in caplog.records] == [
        "Task captcha_tasks.solve_image[timed-1] succeeded in 18.1 s "
        "(queued 13.6 s, solved in 4.5 s)"
    ]


def test_a_failed_solve_is_logged_once_with_its_code_and_times(
    celery_app: Any, events: EventTap, caplog: pytest.LogCaptureFixture
) -> None:
    now = time.time()
    fields = {
        "state": "failed",
        "type": "recaptcha_v2",
        "enqueued_at": str(now - 10.0),
        "submitted_at": str(now - 4.0),
        "request": json.dumps({"task": "captcha_tasks.solve_recaptcha_v2"}),
    }
    job = Job.from_fields("failed-1", fields)
    with caplog.at_level(logging.INFO, logger="captcha_tasks.worker.engine_step"):
        CeleryCompleter(celery_app, "engine-test@h").fail(
            job, CaptchaUnsolvable("the workers could not read it", code="ERROR_CAPTCHA_UNSOLVABLE")
        )
    started, failed = events.read()
    assert (started["type"], failed["type"]) == ("task-started", "task-failed")
    assert started["timestamp"] == pytest.approx(now - 4.0)
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith("Task captcha_tasks.solve_recaptcha_v2[failed-1] failed after 10.0 s")
    assert line.endswith("(queued 6.0 s): ERROR_CAPTCHA_UNSOLVABLE: the workers could not read it")


def test_a_job_failed_before_its_submit_has_no_start(celery_app: Any, events: EventTap) -> None:
    job = Job.from_fields("never-sent", {"state": "failed", "type": "image"})
    CeleryCompleter(celery_app, "engine-test@h").fail(job, CaptchaUnsolvable("gone"))
    assert [e["type"] for e in events.read()] == ["task-failed"]
