"""The ``task-sent`` event names a task as its ``task-received`` does: by the name it is
sent under (``shadow``), else its own (worker/app.py's ``AMQP``)."""

from __future__ import annotations

from typing import Any

from captcha_tasks import app


def _sent_event(name: str, **options: Any) -> dict[str, Any]:
    # As Celery's send_task builds a message: positional fields, shadow among them.
    message = app.amqp.create_task_message(
        "an-id",
        name,
        (),
        {},
        None,
        None,
        None,
        None,
        None,
        0,
        None,
        None,
        None,
        None,
        None,
        None,
        True,
        None,
        None,
        options.get("shadow"),
        None,
    )
    assert message.headers.get("shadow") == options.get("shadow")
    event: dict[str, Any] = message.sent_event
    return event


def test_a_task_sent_under_another_name_is_sent_under_that_name() -> None:
    event = _sent_event("captcha_tasks.submit_challenge", shadow="captcha_tasks.fetch_page")
    assert event["name"] == "captcha_tasks.fetch_page"


def test_a_task_sent_under_its_own_name_keeps_it() -> None:
    assert _sent_event("captcha_tasks.ping")["name"] == "captcha_tasks.ping"
