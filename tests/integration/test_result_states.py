"""The result backend stores every state in one script: a passing state never replaces a
final one, a final one never replaces SUCCESS (Celery's rule), and each stored state is
published to its channel (``AsyncResult.get()`` waits on it)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from celery import states

pytestmark = pytest.mark.integration


def _status(app: Any, task_id: str) -> str | None:
    raw = app.backend.client.get(app.backend.get_key_for_task(task_id))
    return json.loads(raw)["status"] if raw else None


def test_final_and_passing_states(celery_app: Any) -> None:
    backend = celery_app.backend
    backend.store_result("t1", None, states.STARTED)
    assert _status(celery_app, "t1") == states.STARTED
    backend.store_result("t1", ValueError("no"), states.FAILURE)
    assert _status(celery_app, "t1") == states.FAILURE
    # A redelivered message's STARTED leaves the failure in place.
    backend.store_result("t1", None, states.STARTED)
    assert _status(celery_app, "t1") == states.FAILURE
    # A final state may replace a failure (Celery does too), never a success.
    backend.store_result("t1", {"ok": 1}, states.SUCCESS)
    assert _status(celery_app, "t1") == states.SUCCESS
    backend.store_result("t1", ValueError("late"), states.FAILURE)
    backend.store_result("t1", None, states.RETRY)
    assert _status(celery_app, "t1") == states.SUCCESS
    assert celery_app.AsyncResult("t1").get(timeout=5) == {"ok": 1}


def test_a_stored_state_is_published(celery_app: Any) -> None:
    backend = celery_app.backend
    pubsub = backend.client.pubsub()
    key = backend.get_key_for_task("t2")
    pubsub.subscribe(key)
    assert pubsub.get_message(timeout=5)["type"] == "subscribe"
    backend.mark_as_done("t2", {"solution": "x"})
    message = pubsub.get_message(timeout=5)
    pubsub.close()
    assert message is not None and json.loads(message["data"])["status"] == states.SUCCESS
