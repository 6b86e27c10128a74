"""A page parked on a session lock is re-sent with ``send_task`` (by whoever releases the
lock). Its ``task-sent`` event, which Flower merges into the task even when it arrives
after the worker's own events, shows the call redacted, as the first send did."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import redis

from captcha_tasks.session import parking
from captcha_tasks.settings import get_settings
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks.worker.session_bases import resend_message, wake
from tests.support.events import event_tap

PASSWORD = "hunter2-parked"
URL = "https://login.example.com/page?sid=s3ss10n-value"


def _parked_page(task_id: str) -> str:
    """The parked member of a ``fetch_page`` run as a worker would park it."""
    fetch_page.push_request(
        id=task_id,
        args=[URL],
        kwargs={"form": {"password": PASSWORD}},
        delivery_info={"exchange": "", "routing_key": "celery"},
    )
    try:
        deadline = time.time() + 30
        return parking.entry(resend_message(fetch_page, deadline), deadline)
    finally:
        fetch_page.pop_request()


def test_a_re_sent_parked_page_is_shown_redacted_and_carries_its_real_arguments(
    celery_app: Any,
) -> None:
    member = _parked_page("parked-page-1")
    with event_tap(celery_app) as tap:
        wake(celery_app, "login.example.com", [member])
        sent = [e for e in tap.read(wait=5) if e["type"] == "task-sent"]

    assert [e["uuid"] for e in sent] == ["parked-page-1"]
    shown = f"{sent[0]['args']} {sent[0]['kwargs']}"
    assert "'form'" in shown and "/page" in shown  # the call is recognisable
    assert PASSWORD not in shown
    assert "s3ss10n-value" not in shown
    # Nothing is lost: the queued message itself carries the real arguments.
    raw = redis.Redis.from_url(get_settings().broker_url).lrange("celery", 0, -1)
    bodies = [json.loads(base64.b64decode(json.loads(m)["body"])) for m in raw]
    assert [b for b in bodies if b[0] == [URL] and b[1] == {"form": {"password": PASSWORD}}]
