"""Solve tasks are admitted by the worker's consumer, without a trip through its pool.

A solve task's execution only validates its arguments and records the job in Redis
(one script, a few milliseconds); the engine ends the task later. Sent to the prefork
pool like any task, that costs more than the admission itself: the request is pickled
to a child and its outcome back, and with ``task_acks_late`` and a prefetch of one per
process a worker admits at most as many solves at a time as it has children.

So solve tasks carry a Celery execution strategy (``Task.Strategy``, the hook Celery's
own ``celery.worker.strategy.default`` fills) that is Celery's default one in every
respect (the request object, ``task-received`` with redacted arguments, revoked and
expired tasks, ETAs, rate limits) but for its last step: a plain message (no ETA, no
rate limit) is admitted right there, in the consumer, and acknowledged once its job is
in Redis. Anything else goes to the pool, as Celery's own strategy sends every message:
a message with an ETA or under a rate limit, one in Celery's message protocol 1, one
that a token pool may serve, and any that raised (bad input, Redis unavailable): the
pool runs it again and records what it raises as any task's failure. Admission is
idempotent by task id, so that second run never queues a solve twice.

Celery has no public hook for work done in the consumer (celery/celery#8337 asks for a
configurable default strategy). What this relies on is the assumption
``celery-strategy`` (:mod:`.contracts`): Celery's default strategy hands ready requests
to ``consumer.on_task_request``, and ``celery.worker.state.task_ready`` ends one. Where
it does not hold, :func:`solve_strategy` is Celery's default strategy itself, and every
solve is admitted in the pool (slower, the same outcome), which it says once.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable
from typing import Any

from celery.exceptions import Ignore

from .contracts import holds

__all__ = ["NotInline", "admitting_inline", "solve_strategy"]

log = logging.getLogger(__name__)

_inline: contextvars.ContextVar[bool] = contextvars.ContextVar("admit_inline", default=False)


class NotInline(Exception):  # a signal between two functions here: never escapes
    """Raised by an admission that the consumer must not finish itself (a token pool
    may serve it: taking a token is the pool's job, with its own result)."""


def admitting_inline() -> bool:
    """Whether the admission running now is the consumer's (see :class:`NotInline`)."""
    return _inline.get()


class _Consumer:
    """The worker's consumer as Celery's default strategy sees it, but for where a
    ready request goes (:func:`solve_strategy`)."""

    def __init__(self, consumer: Any, on_task_request: Any) -> None:
        self._consumer = consumer
        self.on_task_request = on_task_request

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


def solve_strategy(task: Any, app: Any, consumer: Any, **options: Any) -> Any:
    """Celery's default strategy for ``task``, admitting plain messages in the consumer
    (every message goes to the pool where ``celery-strategy`` does not hold)."""
    from celery.worker.strategy import default

    if not holds("celery-strategy"):
        return default(task, app, consumer, **options)
    from celery.worker.state import task_ready

    to_pool = consumer.on_task_request

    def on_task_request(request: Any) -> None:
        if not admit_in_consumer(task, request, task_ready):
            to_pool(request)

    return default(task, app, _Consumer(consumer, on_task_request), **options)


def admit_in_consumer(task: Any, request: Any, task_ready: Callable[[Any], None]) -> bool:
    """Run ``task``'s admission for ``request`` here; True if it ended with the job in
    Redis and the message acknowledged (``task_ready`` told), False to send it to the
    pool instead."""
    if request.eta is not None:
        return False
    payload = request.message.payload
    if not (isinstance(payload, list | tuple) and len(payload) == 3):
        return False  # protocol 1 or a hybrid message: the pool reads those
    args, kwargs, embed = payload
    context = dict(request.request_dict)
    context.update(embed or {})
    context.update(args=args, kwargs=kwargs, called_directly=False, is_eager=False)
    kwargs = dict(kwargs)  # the request keeps the message's own
    token = _inline.set(True)
    task.push_request(**context)
    try:
        task.before_start(request.id, args, kwargs)
        task(*args, **kwargs)
    except Ignore:
        pass  # admitted (or seen before; the task logged which): the engine ends the task
    except NotInline:
        return False
    except Exception as exc:
        # The pool runs it again and stores the failure as for any task.
        log.debug("admission of %s in the consumer raised %r: sent to the pool", request.id, exc)
        return False
    else:
        log.warning("%s returned in the consumer: sending it to the pool", request.id)
        return False
    finally:
        task.pop_request()
        _inline.reset(token)
    task_ready(request)
    request.acknowledge()
    return True
