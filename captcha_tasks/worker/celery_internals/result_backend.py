"""The result backend: Celery's Redis backend, where a final state stays final.

A solve's result is written by the solve engine, not by the execution that admitted
it. If a worker is SIGKILLed after admitting a task but before acknowledging its
message, Redis hands the message out again after the visibility timeout, and with
``task_track_started`` the new execution stores ``STARTED`` before it runs. Celery
refuses to overwrite ``SUCCESS`` (with a read, then a write), but not ``FAILURE`` or
``REVOKED``: a solve that had failed (``SubmitUncertain`` after that very kill) would
go back to ``STARTED`` and never end for its caller. Here every state is stored by
one Lua script: a passing state leaves a final one alone, a final one leaves a
``SUCCESS`` alone (Celery's rule, without its extra read).

``celeryconfig.py`` installs it for ``redis://`` and ``rediss://`` URLs through
Celery's ``override_backends`` setting (:class:`SentinelResultBackend` for
``sentinel://`` ones); the URL itself stays as configured.

Its result consumer returns from ``AsyncResult.get()`` as soon as the result is known.
Celery's consumer reads the stored state first, but then (default drainer, i.e. not
under gevent/eventlet) waits for one pub/sub message, up to a second, before it looks
whether the result it just read is final. That wait ends early only while the
consumer's pub/sub connection has other messages coming; once the results it was
subscribed to are all in (``delay()`` subscribes, the first ``get()`` drains and
buffers the others' results and unsubscribes them), redis-py's ``get_message`` has no
channel to read and sleeps the whole second. So with Celery's consumer
``[r.get() for r in results]`` started right after enqueueing takes ~1 s per already
finished task. And its ``ResultSet.get()`` (``group(...).get()``) reads the states once,
then sleeps ``interval`` (0.5 s) before noticing that once was all it was asked for.

Its consumer also keeps the pub/sub connection out of ``AsyncResult.__del__``. Celery's
finalizer (``backend.remove_pending_result`` -> ``cancel_for``) sends ``UNSUBSCRIBE`` for
its task whenever the result is collected, even when the consumer unsubscribed it
already (when the final state came in: celery/celery#10477, where that second
``UNSUBSCRIBE`` from the garbage collector deadlocks a send in progress) or never
subscribed it (:func:`without_result_subscription`). Results a script still holds at
exit are collected during interpreter finalization, after ``atexit`` and after
``sys.meta_path`` is gone (celery/celery#6512): by then redis-py's ``PubSub`` may have
been finalized first and dropped its connection, so the ``UNSUBSCRIBE`` opens a new
one, whose parser imports ``hiredis`` and fails with ``ImportError: sys.meta_path is
None``, printed as ``Exception ignored in: AsyncResult.__del__`` once per result. Here
only a channel still subscribed is unsubscribed, and an ``atexit`` hook (which runs
before finalization) closes the consumer's connection and forgets its channels, so the
finalizers that come after have nothing to send.

What this relies on is the assumption ``celery-redis-backend`` (:mod:`.contracts`):
Celery's Redis backend stores every state through ``_store_result`` and
``_set_with_state``, and its consumer keeps ``_pubsub`` and ``subscribed_to``. Where it
does not hold, :func:`backends` names none, Celery's own Redis backend stores the
results, and the worker says so once: the windows above come back (celery/celery#6090
guards SUCCESS only; celery/celery#7052 is get()'s wait; celery/celery#10477, fixed
after Celery 5.6.3 by celery/celery#10497, the second UNSUBSCRIBE).
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import weakref
from collections.abc import Iterator
from typing import Any

from celery import states
from celery.backends.redis import RedisBackend, SentinelBackend
from celery.backends.redis import ResultConsumer as RedisResultConsumer
from celery.exceptions import BackendStoreError
from kombu.utils.encoding import bytes_to_str

from ...state.scripts import run
from .contracts import holds

__all__ = [
    "ResultBackend",
    "ResultConsumer",
    "SentinelResultBackend",
    "backends",
    "stop_result_consumers",
    "without_result_subscription",
]

#: Set while :mod:`captcha_tasks.aio` sends: its caller waits on a pub/sub connection of
#: its own, so Celery's blocking consumer must not subscribe the task too (it would
#: buffer every such result until a ``get()`` that never comes).
_NO_SUBSCRIPTION: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "captcha_tasks_no_result_subscription", default=False
)


@contextlib.contextmanager
def without_result_subscription() -> Iterator[None]:
    """Tasks sent inside are not subscribed by Celery's own result consumer."""
    token = _NO_SUBSCRIPTION.set(True)
    try:
        yield
    finally:
        _NO_SUBSCRIPTION.reset(token)


#: Every consumer that opened a pub/sub connection in this process (stopped at exit).
_STARTED: weakref.WeakSet[ResultConsumer] = weakref.WeakSet()


class ResultConsumer(RedisResultConsumer):  # type: ignore[misc]
    """Celery's Redis result consumer that does not wait for a result it already has,
    and whose connection is closed before the interpreter finalizes what is left."""

    #: The pub/sub connection (redis-py's ``PubSub``), opened by the first subscription.
    _pubsub: Any = None

    def start(self, initial_task_id: str, **kwargs: Any) -> None:
        _STARTED.add(self)
        super().start(initial_task_id, **kwargs)

    def stop(self) -> None:
        """Close the pub/sub connection and forget its channels: a result collected
        afterwards unsubscribes nothing, and a later send starts the consumer again."""
        pubsub, self._pubsub = self._pubsub, None
        self.subscribed_to.clear()
        if pubsub is not None:
            with contextlib.suppress(Exception):  # closing only drops the socket
                pubsub.close()

    def cancel_for(self, task_id: str) -> None:
        # Only a channel still subscribed has anything to unsubscribe (module docstring).
        if self.backend.get_key_for_task(task_id) in self.subscribed_to:
            super().cancel_for(task_id)

    def on_wait_for_pending(self, result: Any, **kwargs: Any) -> None:
        # One pass over a result set's stored states (``max_iterations=1``): Celery's
        # ``get_many`` sleeps ``interval`` after each pass, the last one included.
        super().on_wait_for_pending(result, **{**kwargs, "interval": 0})

    def drain_events_until(
        self, p: Any, timeout: float | None = None, on_interval: Any = None
    ) -> Iterator[Any]:
        # ``p`` is the result's (or result set's) ``on_ready`` promise: when the state
        # read just before this (``on_wait_for_pending``) found it final, there is
        # nothing to wait for.
        if getattr(p, "ready", False):
            return iter(())
        result: Iterator[Any] = super().drain_events_until(
            p, timeout=timeout, on_interval=on_interval
        )
        return result


@atexit.register
def stop_result_consumers() -> None:
    """Stop every started consumer (registered at import, so it runs after the ``atexit``
    hooks of the code that uses results, and before interpreter finalization)."""
    for consumer in list(_STARTED):
        consumer.stop()


class ResultBackend(RedisBackend):  # type: ignore[misc]
    """Redis result backend that never replaces a final state with a passing one, and
    whose ``get()`` returns at once for a finished task."""

    ResultConsumer = ResultConsumer

    def on_task_call(self, producer: Any, task_id: str) -> None:
        # Celery subscribes every sent task's channel so that a later get() is fast;
        # an asyncio caller waits through its own subscription instead.
        if not _NO_SUBSCRIPTION.get():
            super().on_task_call(producer, task_id)

    def _store_result(
        self,
        task_id: Any,
        result: Any,
        state: str,
        traceback: Any = None,
        request: Any = None,
        **kwargs: Any,
    ) -> Any:
        # Celery's own reads the stored state first (to leave a SUCCESS alone), then
        # writes in a transaction: two round trips per result. The script does both.
        meta = self._get_result_meta(
            result=result, state=state, traceback=traceback, request=request
        )
        meta["task_id"] = bytes_to_str(task_id)  # type: ignore[no-untyped-call]
        try:
            self._set_with_state(self.get_key_for_task(task_id), self.encode(meta), state)
        except BackendStoreError as exc:
            raise BackendStoreError(str(exc), state=state, task_id=task_id) from exc
        return result

    def _set_with_state(self, key: Any, value: Any, state: str) -> Any:
        if isinstance(value, str) and len(value) > self._MAX_STR_VALUE_SIZE:
            raise BackendStoreError("value too large for Redis backend")
        final = "final" if state in states.READY_STATES else "passing"
        # Celery 5.7 keeps failures for ``result_failure_expires`` (``failure_expires``);
        # earlier releases, and states other than FAILURE, for ``result_expires``.
        expires = self.expires
        if state == states.FAILURE and getattr(self, "failure_expires", None) is not None:
            expires = self.failure_expires
        return self.ensure(self._set_unless_final, (key, value, final, expires))

    def _set_unless_final(
        self, key: Any, value: Any, final: str = "passing", expires: Any = None
    ) -> bool:
        args = [value, int(expires or 0), final]
        return bool(run(self.client, "store_result", [key], args))


class SentinelResultBackend(ResultBackend, SentinelBackend):  # type: ignore[misc]
    """The same over Redis Sentinel (``sentinel://`` URLs): Celery's sentinel backend
    finds the master (``result_backend_transport_options["master_name"]``), this
    class stores every state with the same script."""


def backends() -> dict[str, str]:
    """Celery's ``override_backends``: these backends for the Redis URL schemes, or none
    (Celery's own) where ``celery-redis-backend`` does not hold."""
    if not holds("celery-redis-backend"):
        return {}
    return {
        "redis": f"{__name__}:ResultBackend",
        "rediss": f"{__name__}:ResultBackend",
        "sentinel": f"{__name__}:SentinelResultBackend",
    }
