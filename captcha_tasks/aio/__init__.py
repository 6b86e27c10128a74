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

Each ``aio.<task>(..., timeout=DEFAULT_TIMEOUT)`` takes the Celery task's own
parameters (typed: mypy and editors check them), sends it exactly as ``.delay()``
would (same checks in the caller first: a bad call raises ``InvalidTaskInput`` at
the ``await`` and sends nothing; same routing) and returns what ``.get()`` would: the
result, or the task's exception raised. :func:`send` sends without waiting and gives
the ``AsyncResult``; :func:`result` waits for one.

How it waits (:mod:`captcha_tasks.aio.async_results`): the Redis result backend
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

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from ..results import (
    BalanceResult,
    FeedbackResult,
    PageResult,
    PingResult,
    ReportResult,
    TokenResult,
)
from ..worker import altcha_tasks, page_tasks, solve_tasks
from . import kinds
from .awaiting import DEFAULT_TIMEOUT, aclose, call, call_with, checked, result, send
from .kinds import *  # noqa: F403  (every captcha kind's solve_<type>)

__all__ = [
    "DEFAULT_TIMEOUT",
    "aclose",
    "call",
    "feedback",
    "fetch_page",
    "get_balance",
    "ping",
    "report_solution",
    "result",
    "send",
    "solve_altcha",
    *kinds.__all__,
]


@checked
async def solve_altcha(
    pageurl: str,
    *,
    challenge_json: str | dict[str, Any] | None = None,
    challenge_url: str | None = None,
    proxy_id: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_altcha` (same arguments, and ``timeout=``)."""
    return await call_with(altcha_tasks.solve_altcha, locals())


@checked
async def fetch_page(
    url: str,
    *,
    form: dict[str, str] | None = None,
    isolated: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> PageResult:
    """``await`` :func:`captcha_tasks.fetch_page` (same arguments, and ``timeout=``)."""
    return await call_with(page_tasks.fetch_page, locals())


@checked
async def get_balance(
    provider: str | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> BalanceResult:
    """``await`` :func:`captcha_tasks.get_balance` (same arguments, and ``timeout=``)."""
    return await call_with(solve_tasks.get_balance, locals())


@checked
async def report_solution(
    task_id: str,
    correct: bool = False,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> ReportResult:
    """``await`` :func:`captcha_tasks.report_solution` (same arguments, and ``timeout=``)."""
    return await call_with(solve_tasks.report_solution, locals())


async def feedback(task_id: str, accepted: bool = True) -> FeedbackResult:
    """``await`` :func:`captcha_tasks.feedback` (same arguments): its few Redis round
    trips run on the loop's default executor, so the loop never waits on them."""
    from ..worker.feedback import feedback as feedback_now

    return await asyncio.to_thread(feedback_now, task_id, accepted)


@checked
async def ping(
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> PingResult:
    """``await`` :func:`captcha_tasks.ping` (same arguments, and ``timeout=``)."""
    return await call_with(solve_tasks.ping, locals())


def _deprecated(name: str) -> Callable[..., Awaitable[Any]]:
    async def awaiting(*args: Any, timeout: float | None = DEFAULT_TIMEOUT, **kwargs: Any) -> Any:
        from ..worker import deprecated

        return await call(deprecated.ALIASES[name], *args, timeout=timeout, **kwargs)

    awaiting.__name__ = awaiting.__qualname__ = name
    return awaiting


#: Deprecated names of 0.2 (they warn once, then send the family's task).
solve_recaptcha_v2_enterprise = _deprecated("solve_recaptcha_v2_enterprise")
solve_turnstile_challenge = _deprecated("solve_turnstile_challenge")
