"""What every ``aio`` function is made of: :func:`send`, :func:`result` and :func:`call`,
and the wrappers of a task's own parameters (:func:`checked`, :func:`call_with`) that
:mod:`captcha_tasks.aio` and the generated :mod:`captcha_tasks.aio.kinds` are written
with. How it waits: :mod:`captcha_tasks.aio`'s text."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar, overload

from typing_extensions import ParamSpec

from ..caller.checks import misfit
from ..caller.typed import TaskResult, TypedTask
from ..settings import get_settings
from ..worker.app import app
from ..worker.celery_internals.result_backend import without_result_subscription
from .async_results import AsyncResult, await_result, waiter_for

__all__ = ["DEFAULT_TIMEOUT", "aclose", "call", "call_with", "checked", "result", "send"]

R = TypeVar("R")
P = ParamSpec("P")

#: Seconds an ``await`` waits for a result unless told otherwise (``timeout=None``: for
#: ever). Longer than any solve's own deadline at real speed (a solve that runs out of
#: time fails with ``SolveTimeout`` well before).
DEFAULT_TIMEOUT = 600.0


def send(task: TypedTask[..., R] | Any, *args: Any, **kwargs: Any) -> TaskResult[R]:
    """Send ``task`` (a task of this app, or its name) with these arguments, as
    ``.delay()`` does, without Celery's blocking result subscription."""
    if isinstance(task, str):
        if task not in app.tasks:
            app.loader.import_default_modules()  # app.include: every task module
        task = app.tasks[task]
    with without_result_subscription():
        sent: TaskResult[R] = task.apply_async(args, kwargs)
        return sent


@overload
async def result(async_result: TaskResult[R], *, timeout: float | None = DEFAULT_TIMEOUT) -> R: ...
@overload
async def result(
    async_result: AsyncResult | str, *, timeout: float | None = DEFAULT_TIMEOUT
) -> Any: ...
async def result(
    async_result: TaskResult[Any] | AsyncResult | str, *, timeout: float | None = DEFAULT_TIMEOUT
) -> Any:
    """What ``async_result.get()`` returns (or raises), awaited: ``TimeoutError`` after
    ``timeout`` seconds, with the task left running."""
    return await await_result(app, get_settings(), async_result, timeout)


async def call(
    task: TypedTask[..., R] | Any,
    *args: Any,
    timeout: float | None = DEFAULT_TIMEOUT,
    **kwargs: Any,
) -> R:
    """Send ``task`` and await its result (:func:`send`, then :func:`result`)."""
    sent: TaskResult[R] = send(task, *args, **kwargs)
    return await result(sent, timeout=timeout)


async def aclose() -> None:
    """Close the running loop's result connection now (it also closes by itself when the
    loop ends or after 30 s without a wait); awaits still pending are cancelled."""
    waiter = waiter_for(app, get_settings())
    await waiter.aclose()


def checked(
    awaiting: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    """A call that does not fit the task's parameters raises :class:`InvalidTaskInput` at
    the ``await``, as ``.delay()`` does (a misspelt keyword named with the nearest one),
    rather than Python's ``TypeError``."""
    own = inspect.signature(awaiting)

    @functools.wraps(awaiting)
    async def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            own.bind(*args, **kwargs)
        except TypeError as exc:
            task = app.tasks[f"captcha_tasks.{awaiting.__name__}"]
            given = {k: v for k, v in kwargs.items() if k != "timeout"}
            raise misfit(task, exc, given, args) from None
        return await awaiting(*args, **kwargs)

    return checked


async def call_with(task: TypedTask[..., R], given: Mapping[str, Any]) -> R:
    """Send ``task`` with a wrapper's arguments (``locals()``): its positional parameters
    as such, keyword-only ones where they differ from the default, and await it."""
    args, kwargs = [], {}
    params = inspect.signature(task.run).parameters.values()
    for param in params:
        value = given[param.name]
        if param.kind is param.KEYWORD_ONLY:
            if value is not param.default and value != param.default:
                kwargs[param.name] = value
        else:
            args.append(value)
    return await call(task, *args, timeout=given["timeout"], **kwargs)
