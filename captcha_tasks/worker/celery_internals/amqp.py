"""Celery's message builder, with the ``task-sent`` event under the name the task is
sent as.

Celery names ``task-received`` after the message's ``shadow`` header (Celery's "name in
logs and monitoring") but ``task-sent`` after the task's real name, and event consumers
(Flower) keep the name of whichever event of a task they read last: a challenged
``fetch_page``'s last step, sent under the page's name, would show as
``submit_challenge`` whenever its ``task-sent`` arrived after its ``task-received``
(celery/celery#4347 made ``shadow`` reach the tracer's logs, not this event).

This relies on the assumption ``celery-sent-event`` (:mod:`.contracts`): Celery's
``AMQP.as_task_v2`` returns a ``task_message`` whose ``sent_event`` it sends. Where it
does not hold, the builder is Celery's own, and ``task-sent`` carries the real name.
"""

from __future__ import annotations

from typing import Any

import celery.app.amqp

from .contracts import holds

__all__ = ["AMQP"]


class AMQP(celery.app.amqp.AMQP):  # type: ignore[misc]
    """``Celery(amqp=AMQP)``: ``task-sent`` named as ``task-received`` is."""

    def as_task_v2(self, task_id: str, name: str, *args: Any, **kwargs: Any) -> Any:
        message = super().as_task_v2(task_id, name, *args, **kwargs)
        if not holds("celery-sent-event"):
            return message
        shadow = message.headers.get("shadow")
        if shadow and message.sent_event is not None:
            message.sent_event["name"] = shadow
        return message
