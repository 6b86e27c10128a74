"""A stored result's meta turned into what ``AsyncResult.get()`` returns or raises.

:mod:`captcha_tasks.aio.async_results` waits for a result on its own pub/sub
connection and holds the final meta: Celery's ``AsyncResult`` takes such a meta through
``_maybe_set_cache`` (children, cached state, the exception rebuilt from its module and
name, a remote traceback where ``task_remote_tracebacks`` is on) and has no public
method for it. This relies on the assumption ``celery-result-cache``
(:mod:`.contracts`); where it does not hold, the meta goes through the backend's public
decoding: the same value, the same exception, without a remote traceback.
"""

from __future__ import annotations

from typing import Any

from celery import states
from celery.result import AsyncResult

from .contracts import holds

__all__ = ["outcome"]


def outcome(async_result: AsyncResult, meta: dict[str, Any]) -> Any:
    """What ``async_result.get()`` returns for the final ``meta``, or raises."""
    if holds("celery-result-cache"):
        async_result._maybe_set_cache(meta)
        return async_result.maybe_throw(propagate=True)
    backend = async_result.backend
    meta = backend.meta_from_decoded(meta)
    if meta["status"] in states.PROPAGATE_STATES:
        raise backend.exception_to_python(meta["result"])
    return meta["result"]
