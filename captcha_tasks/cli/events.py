"""Reading a cluster's Celery task events into a :class:`ResultsCollector`
(``captcha-tasks watch``): the subscription, its deadline and its reconnects.

The events are read with one ``PSUBSCRIBE`` of kombu's fanout channel for them
(``/{db}.celeryev/*``), not through a kombu consumer: a consumer declares a queue and
binds it (writes to ``_kombu.binding.*``) and wakes the workers up with a broadcast,
so ``watch`` could not run as the read-only ``monitor`` ACL user. Celery's own
:class:`~celery.events.receiver.Receiver` still turns each message into events (clock,
time zone, batches of ``task.multi``), only its transport is bypassed. Workers show up
with their next heartbeat (every 2 s) instead of at once.

The counting itself is :mod:`captcha_tasks.monitor.watch`, which needs no broker.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

import redis
from kombu import serialization
from kombu.exceptions import ContentDisallowed, DecodeError

from ..monitor.watch import EVENT_TYPES, Result, ResultsCollector
from ..settings import Settings, get_settings
from ..state import redis_client

__all__ = ["consume", "deliver", "events_channel"]

#: Seconds a read of the subscription may block (its socket timeout is above it).
_READ_TIMEOUT = 10.0


class _CallbackFailed(Exception):
    """Carries an error of a caller's callback past the reconnect logic: a closed output
    (``BrokenPipeError`` is an ``OSError``) must not look like a lost broker."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def _guarded(callback: Callable[..., None], *args: Any) -> None:
    try:
        callback(*args)
    except Exception as exc:
        raise _CallbackFailed(exc) from exc


@dataclasses.dataclass
class _Run:
    """One :func:`consume` call: its stop conditions and what it has seen, kept across
    reconnects."""

    collector: ResultsCollector
    on_result: Callable[[Result], None]
    limit: int | None
    deadline: float | None  # time.monotonic()
    seen: int = 0
    ready: bool = False

    @property
    def reached(self) -> bool:
        return self.limit is not None and self.seen >= self.limit

    def left(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def handle(self, event: dict[str, Any]) -> None:
        if self.reached:
            return  # one broker message can carry several events: stop at exactly N
        result = self.collector.feed(event)
        if result is not None:
            self.seen += 1
            _guarded(self.on_result, result)


def events_channel(client: redis.Redis, receiver: Any) -> str:
    """kombu's PSUBSCRIBE pattern for ``receiver``'s events: ``/{db}.celeryev/*``
    (its fanout prefix is the broker's database; ``#`` in routing keys is ``*``)."""
    db = client.connection_pool.connection_kwargs.get("db") or 0
    return f"/{db}.{receiver.exchange.name}/{receiver.routing_key.replace('#', '*')}"


def deliver(receiver: Any, data: str | bytes) -> None:
    """Hand one fanout message (kombu's JSON envelope) to ``receiver``'s handlers."""
    envelope = json.loads(data)
    body = envelope["body"]
    if (envelope.get("properties") or {}).get("body_encoding") == "base64":
        body = base64.b64decode(body)
    accept = serialization.prepare_accept_content(receiver.accept)  # type: ignore[no-untyped-call]
    decoded = serialization.loads(  # type: ignore[no-untyped-call]
        body,
        envelope.get("content-type") or "application/json",
        envelope.get("content-encoding") or "utf-8",
        accept=accept,
    )
    for event in decoded if isinstance(decoded, list) else [decoded]:  # task.multi: a batch
        receiver.process(*receiver.event_from_message(event))


def consume(
    app: Any,
    collector: ResultsCollector,
    *,
    on_result: Callable[[Result], None],
    on_ready: Callable[[], None] = lambda: None,
    on_tick: Callable[[], None] = lambda: None,
    on_error: Callable[[Exception], None] = lambda exc: None,
    limit: int | None = None,
    timeout: float | None = None,
    tick: float = 0.25,
    settings: Settings | None = None,
) -> bool:
    """Feed ``collector`` with the events of ``app``'s broker until ``limit`` tasks have
    ended (True) or ``timeout`` seconds have passed (False); reconnects after a lost
    connection. ``on_ready`` once subscribed, ``on_tick`` every ``tick``."""
    settings = settings or get_settings()
    deadline = None if timeout is None else time.monotonic() + timeout
    run = _Run(collector, on_result, limit, deadline)
    # No I/O: only its decoding of messages into events, and its handlers.
    receiver = app.events.Receiver(None, handlers=dict.fromkeys(EVENT_TYPES, run.handle))
    client = redis_client(settings, app.conf.broker_url, timeout=_READ_TIMEOUT, retries=False)
    try:
        while True:
            try:
                return _listen(client, receiver, run, on_ready, on_tick, tick)
            except _CallbackFailed as failed:
                raise failed.error from None
            except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
                on_error(exc)
                remaining = run.left()
                if remaining is not None and remaining <= 0:
                    return run.reached
                time.sleep(1.0 if remaining is None else min(1.0, remaining))
    finally:
        client.close()


def _listen(
    client: redis.Redis,
    receiver: Any,
    run: _Run,
    on_ready: Callable[[], None],
    on_tick: Callable[[], None],
    tick: float,
) -> bool:
    """Read events on one subscription until the run is over (its result) or the
    connection fails (Redis's error)."""
    pubsub = client.pubsub()  # type: ignore[no-untyped-call, unused-ignore]
    try:
        pubsub.psubscribe(events_channel(client, receiver))
        while True:
            if run.reached:
                return True
            remaining = run.left()
            if remaining is not None and remaining <= 0:
                return False
            wait = tick if remaining is None else max(0.01, min(tick, remaining))
            message = pubsub.get_message(timeout=wait)
            if message is not None and message["type"] == "pmessage":
                _guarded_delivery(receiver, message["data"])
            elif message is not None and message["type"] == "psubscribe" and not run.ready:
                # Redis confirmed the subscription: from now on no event is missed.
                run.ready = True
                _guarded(on_ready)
            if run.ready:
                _guarded(on_tick)
    finally:
        pubsub.close()


def _guarded_delivery(receiver: Any, data: str | bytes) -> None:
    """A message that is not an event of ours (another app's, malformed) is skipped;
    an error of a caller's callback is not."""
    try:
        deliver(receiver, data)
    except _CallbackFailed:
        raise
    except (ValueError, KeyError, TypeError, ContentDisallowed, DecodeError):
        return
