"""Reading a cluster's Celery task events into a :class:`ResultsCollector`
(``captcha-tasks watch``): the receiver loop, its deadline and its reconnects.

The counting itself is :mod:`captcha_tasks.monitor.watch`, which needs no broker.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable
from typing import Any

from kombu.exceptions import OperationalError

from ..monitor.watch import EVENT_TYPES, Result, ResultsCollector

__all__ = ["consume"]


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
) -> bool:
    """Feed ``collector`` with the events of ``app``'s broker until ``limit`` tasks have
    ended (True) or ``timeout`` seconds have passed (False); reconnects after a lost
    connection. ``on_ready`` once the receiver listens, ``on_tick`` every ``tick``."""
    deadline = None if timeout is None else time.monotonic() + timeout
    run = _Run(collector, on_result, limit, deadline)
    while True:
        connection = app.connection_for_read()
        errors = (OSError, OperationalError, *connection.connection_errors)
        try:
            with connection:
                return _listen(app, connection, run, on_ready, on_tick, tick)
        except _CallbackFailed as failed:
            raise failed.error from None
        except errors as exc:
            on_error(exc)
            remaining = run.left()
            if remaining is not None and remaining <= 0:
                return run.reached
            time.sleep(1.0 if remaining is None else min(1.0, remaining))


def _listen(
    app: Any,
    connection: Any,
    run: _Run,
    on_ready: Callable[[], None],
    on_tick: Callable[[], None],
    tick: float,
) -> bool:
    """Drain events on one connection until the run is over (its result) or the
    connection fails (the broker's error)."""
    # Fail at once if the broker is down (kombu would retry for long): consume()
    # retries every second, within the deadline.
    connection.ensure_connection(max_retries=0)
    receiver = app.events.Receiver(connection, handlers=dict.fromkeys(EVENT_TYPES, run.handle))
    receiver.connect_max_retries = 0
    # wakeup: workers answer with a heartbeat, so they show up at once.
    with receiver.consumer_context(wakeup=True) as (conn, _channel, _consumers):
        while True:
            if run.reached:
                return True
            remaining = run.left()
            if remaining is not None and remaining <= 0:
                return False
            wait = tick if remaining is None else max(0.01, min(tick, remaining))
            with contextlib.suppress(TimeoutError):  # socket.timeout: no event
                conn.drain_events(timeout=wait)
            # The first drain subscribed to the event channel: from now on no event
            # is missed.
            if not run.ready:
                run.ready = True
                _guarded(on_ready)
            _guarded(on_tick)
