"""Celery events as a monitor receives them: subscribe to a broker's event channel
(kombu's fanout over Redis pub/sub), run something, read what it published.

    with event_tap(celery_app) as tap:
        do_something()
        sent = [e for e in tap.read() if e["type"] == "task-sent"]

Events are decoded by a real ``celery.events.Receiver`` (batches, ``task.multi``,
included), so a test sees the fields Flower would merge into its tasks.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis

from captcha_tasks.cli.events import deliver, events_channel

__all__ = ["EventTap", "event_tap"]


class EventTap:
    """A subscription to one app's events; :meth:`read` returns what arrived since."""

    def __init__(self, celery_app: Any, client: redis.Redis) -> None:
        self._seen: list[dict[str, Any]] = []
        self._receiver = celery_app.events.Receiver(None, handlers={"*": self._seen.append})
        self._pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]
        self._pubsub.psubscribe(events_channel(client, self._receiver))
        confirmed = self._pubsub.get_message(timeout=5)
        assert confirmed is not None and confirmed["type"] == "psubscribe"

    def read(self, wait: float = 2.0, quiet: float = 0.05) -> list[dict[str, Any]]:
        """The events published since the last read: waits up to ``wait`` seconds for
        the first, then returns once none came for ``quiet`` seconds."""
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            message = self._pubsub.get_message(timeout=quiet)
            if message is None:
                if self._seen:
                    break
                continue
            if message["type"] == "pmessage":
                deliver(self._receiver, message["data"])
        out, self._seen[:] = list(self._seen), []
        return out

    def close(self) -> None:
        self._pubsub.close()


@contextmanager
def event_tap(celery_app: Any) -> Iterator[EventTap]:
    """An :class:`EventTap` on the app's broker, closed on exit."""
    client = redis.Redis.from_url(celery_app.conf.broker_url)
    tap = EventTap(celery_app, client)
    try:
        yield tap
    finally:
        tap.close()
        client.close()
