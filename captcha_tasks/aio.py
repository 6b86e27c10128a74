"""asyncio callers: ``await`` a solve, a page or any task's result, without a thread.

::

    import asyncio
    from captcha_tasks import aio

    async def main():
        token = await aio.solve_recaptcha_v2(sitekey, "https://example.com/login")
        page = await aio.fetch_page("https://example.com/account", timeout=120)
        # Many at once: one event loop, one Redis pub/sub connection for all of them.
        tokens = await asyncio.gather(*(aio.solve_turnstile(key, url) for url in urls))
        # Anything already sent with .delay() / apply_async():
        balance = await aio.result(get_balance.delay(), timeout=30)

    asyncio.run(main())

Each ``aio.<task>(*args, timeout=DEFAULT_TIMEOUT, **kwargs)`` takes the Celery task's own
arguments, sends it exactly as ``.delay()`` would (same checks in the caller first:
a bad call raises ``InvalidTaskInput`` at the ``await`` and sends nothing; same
routing) and returns what ``.get()`` would: the result, or the task's
exception raised. :func:`send` sends without waiting and gives the ``AsyncResult``;
:func:`result` waits for one.

How it waits (:mod:`captcha_tasks.worker.async_results`): the Redis result backend
publishes every state it stores on the result key's channel; each event loop keeps one
``redis.asyncio`` pub/sub connection, subscribes a channel per awaited task, and reads
the stored state once the subscription is confirmed (so a result that is already in is
returned at once). No thread, no polling loop.

- ``timeout`` (seconds, default :data:`DEFAULT_TIMEOUT`; ``None`` waits for ever) ends
  the wait with :class:`asyncio.TimeoutError`; the task itself goes on, and its result is
  still there for a later ``result()`` or ``.get()`` (for ``CAPTCHA_TASKS_RESULT_EXPIRES``).
- Cancelling the awaiting task unsubscribes its channel (when no other wait needs it).
- Sending is kombu's ordinary publish (one Redis ``LPUSH``, well under a millisecond on
  a local Redis), done on the loop: a Redis that does not answer raises
  :class:`~captcha_tasks.errors.RedisUnavailable` after the broker's retries, as
  ``.delay()`` does.
- Sent from here, a task is not subscribed by Celery's own (blocking) result consumer:
  that consumer would keep every result's message buffered until a ``.get()`` that an
  async caller never makes. ``.get()`` on the same ``AsyncResult`` still works.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from .settings import get_settings
from .worker import page_tasks, solve_more, solve_tasks
from .worker.app import app
from .worker.async_results import AsyncResult, await_result, waiter_for
from .worker.result_backend import without_result_subscription

__all__ = [
    "DEFAULT_TIMEOUT",
    "aclose",
    "call",
    "fetch_page",
    "get_balance",
    "ping",
    "report_solution",
    "result",
    "send",
    "solve_aws_waf",
    "solve_coordinates",
    "solve_funcaptcha",
    "solve_geetest",
    "solve_geetest_v4",
    "solve_hcaptcha",
    "solve_image",
    "solve_recaptcha_v2",
    "solve_recaptcha_v2_enterprise",
    "solve_recaptcha_v3",
    "solve_turnstile",
    "solve_turnstile_challenge",
]

#: Seconds an ``await`` waits for a result unless told otherwise (``timeout=None``: for
#: ever). Longer than any solve's own deadline at real speed (a solve that runs out of
#: time fails with ``SolveTimeout`` well before).
DEFAULT_TIMEOUT = 600.0


def send(task: Any, *args: Any, **kwargs: Any) -> AsyncResult:
    """Send ``task`` (a task of this app, or its name) with these arguments, as
    ``.delay()`` does, without Celery's blocking result subscription."""
    if isinstance(task, str):
        task = app.tasks[task]
    with without_result_subscription():
        return task.apply_async(args, kwargs)


async def result(
    async_result: AsyncResult | str, *, timeout: float | None = DEFAULT_TIMEOUT
) -> Any:
    """What ``async_result.get()`` returns (or raises), awaited: ``TimeoutError`` after
    ``timeout`` seconds, with the task left running."""
    return await await_result(app, get_settings(), async_result, timeout)


async def call(
    task: Any, *args: Any, timeout: float | None = DEFAULT_TIMEOUT, **kwargs: Any
) -> Any:
    """Send ``task`` and await its result (:func:`send`, then :func:`result`)."""
    return await result(send(task, *args, **kwargs), timeout=timeout)


async def aclose() -> None:
    """Close the running loop's result connection now (it also closes by itself when the
    loop ends or after 30 s without a wait); awaits still pending are cancelled."""
    waiter = waiter_for(app, get_settings())
    await waiter.aclose()


def _awaiting(task: Any) -> Callable[..., Awaitable[Any]]:
    async def awaiting(*args: Any, timeout: float | None = DEFAULT_TIMEOUT, **kwargs: Any) -> Any:
        return await call(task, *args, timeout=timeout, **kwargs)

    awaiting.__name__ = awaiting.__qualname__ = task.__name__
    # help() and IDEs show the task's own parameters, and ``timeout``.
    own = inspect.signature(task.run)
    params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
    timeout = inspect.Parameter(
        "timeout",
        inspect.Parameter.KEYWORD_ONLY,
        default=DEFAULT_TIMEOUT,
        annotation="float | None",
    )
    tail = [p for p in own.parameters.values() if p.kind is p.VAR_KEYWORD]
    awaiting.__signature__ = own.replace(parameters=[*params, timeout, *tail])  # type: ignore[attr-defined]
    awaiting.__doc__ = (
        f"``await`` :func:`captcha_tasks.{task.__name__}` (same arguments, plus "
        f"``timeout=``).\n\n{task.run.__doc__ or ''}"
    )
    return awaiting


solve_recaptcha_v2 = _awaiting(solve_tasks.solve_recaptcha_v2)
solve_recaptcha_v3 = _awaiting(solve_tasks.solve_recaptcha_v3)
solve_turnstile = _awaiting(solve_tasks.solve_turnstile)
solve_hcaptcha = _awaiting(solve_tasks.solve_hcaptcha)
solve_image = _awaiting(solve_tasks.solve_image)
solve_geetest = _awaiting(solve_tasks.solve_geetest)
solve_funcaptcha = _awaiting(solve_more.solve_funcaptcha)
solve_geetest_v4 = _awaiting(solve_more.solve_geetest_v4)
solve_aws_waf = _awaiting(solve_more.solve_aws_waf)
solve_coordinates = _awaiting(solve_more.solve_coordinates)
solve_recaptcha_v2_enterprise = _awaiting(solve_more.solve_recaptcha_v2_enterprise)
solve_turnstile_challenge = _awaiting(solve_more.solve_turnstile_challenge)
fetch_page = _awaiting(page_tasks.fetch_page)
get_balance = _awaiting(solve_tasks.get_balance)
report_solution = _awaiting(solve_tasks.report_solution)
ping = _awaiting(solve_tasks.ping)
