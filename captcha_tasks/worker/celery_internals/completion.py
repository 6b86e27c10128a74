"""What Celery's tracer does when a task returns, done later, by the solve engine.

A solve's admitting execution ends with ``Ignore``; the engine ends the task when the
provider answers, in another thread of the worker, with no execution to return from.
Celery has no public way to end a task outside its execution (celery/celery#3823 asks
for externally handled tasks; celery/ceps#3 proposes persisted callbacks), so this is
the tracer's success path (``celery.app.trace.build_tracer``) written out with public
pieces only: the request's ``callbacks`` applied with the result, the chain's next
signature sent with the rest of the chain, then the backend's ``mark_as_done``
(which also ends a chord's part). What differs from the tracer: each callback is sent
on its own (the tracer groups several into one ``group``), and ``priority`` is not
inherited (``task_inherit_parent_priority``). A failure goes through the backend's
``mark_as_failure``, which calls the errbacks and ends a chord's part as the tracer's
does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import signature
from celery.app.task import Context

__all__ = ["fail", "succeed"]

#: ``(signature, result) -> {"argsrepr": ..., "kwargsrepr": ...}`` for a sent callback.
Reprs = Callable[[Any, Any], dict[str, str]]


def succeed(app: Any, task_id: str, request: Context, result: Any, reprs: Reprs) -> None:
    """Callbacks, the chain's next task, then the result (with chord bookkeeping)."""
    chain = list(request.chain or ())
    if request.callbacks or chain:
        sent = {"parent_id": task_id, "root_id": request.root_id or task_id}
        for callback in request.callbacks or ():
            then = signature(callback, app=app)
            then.apply_async((result,), **sent, **reprs(then, result))
        if chain:
            then = signature(chain.pop(), app=app)
            then.apply_async((result,), chain=chain, **sent, **reprs(then, result))
    app.backend.mark_as_done(task_id, result, request=request)


def fail(app: Any, task_id: str, request: Context, error: BaseException) -> None:
    """The failure stored; the backend calls the request's errbacks and ends its chord
    part."""
    app.backend.mark_as_failure(task_id, error, request=request)
