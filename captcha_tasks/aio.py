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

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any, TypeVar, overload

from typing_extensions import ParamSpec

from .results import (
    AwsWafResult,
    BalanceResult,
    CoordinatesResult,
    DataDomeResult,
    FeedbackResult,
    GeeTestResult,
    GeeTestV4Result,
    GridResult,
    PageResult,
    PingResult,
    ReportResult,
    TokenResult,
)
from .settings import get_settings
from .worker import altcha_tasks, page_tasks, solve_tasks
from .worker.app import app
from .worker.async_results import AsyncResult, await_result, waiter_for
from .worker.celery_internals.result_backend import without_result_subscription
from .worker.task_bases import misfit
from .worker.typed import TaskResult, TypedTask

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
    "solve_aws_waf",
    "solve_coordinates",
    "solve_datadome",
    "solve_friendly_captcha",
    "solve_funcaptcha",
    "solve_geetest",
    "solve_geetest_v4",
    "solve_grid",
    "solve_hcaptcha",
    "solve_image",
    "solve_mtcaptcha",
    "solve_prosopo",
    "solve_recaptcha_v2",
    "solve_recaptcha_v3",
    "solve_turnstile",
]

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


def _checked(
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


async def _call(task: TypedTask[..., R], given: Mapping[str, Any]) -> R:
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


@_checked
async def solve_recaptcha_v2(
    sitekey: str,
    pageurl: str,
    *,
    invisible: bool = False,
    enterprise: bool = False,
    data_s: str | None = None,
    cookies: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_recaptcha_v2` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_recaptcha_v2, locals())


@_checked
async def solve_recaptcha_v3(
    sitekey: str,
    pageurl: str,
    *,
    action: str = "verify",
    min_score: float = 0.3,
    enterprise: bool = False,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_recaptcha_v3` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_recaptcha_v3, locals())


@_checked
async def solve_turnstile(
    sitekey: str,
    pageurl: str,
    *,
    action: str | None = None,
    cdata: str | None = None,
    pagedata: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_turnstile` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_turnstile, locals())


@_checked
async def solve_hcaptcha(
    sitekey: str,
    pageurl: str,
    *,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_hcaptcha` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_hcaptcha, locals())


@_checked
async def solve_funcaptcha(
    publickey: str,
    pageurl: str,
    *,
    surl: str | None = None,
    data_blob: str | None = None,
    user_agent: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_funcaptcha` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_funcaptcha, locals())


@_checked
async def solve_mtcaptcha(
    sitekey: str,
    pageurl: str,
    *,
    action: str | None = None,
    invisible: bool = False,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_mtcaptcha` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_mtcaptcha, locals())


@_checked
async def solve_prosopo(
    sitekey: str,
    pageurl: str,
    *,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_prosopo` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_prosopo, locals())


@_checked
async def solve_friendly_captcha(
    sitekey: str,
    pageurl: str,
    *,
    module_script_url: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_friendly_captcha` (same arguments, and
    ``timeout=``)."""
    return await _call(solve_tasks.solve_friendly_captcha, locals())


@_checked
async def solve_geetest(
    gt: str,
    challenge: str,
    pageurl: str,
    *,
    api_server: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> GeeTestResult:
    """``await`` :func:`captcha_tasks.solve_geetest` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_geetest, locals())


@_checked
async def solve_geetest_v4(
    captcha_id: str,
    pageurl: str,
    *,
    api_server: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> GeeTestV4Result:
    """``await`` :func:`captcha_tasks.solve_geetest_v4` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_geetest_v4, locals())


@_checked
async def solve_aws_waf(
    sitekey: str,
    iv: str,
    context: str,
    pageurl: str,
    *,
    challenge_script: str | None = None,
    captcha_script: str | None = None,
    proxy_id: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> AwsWafResult:
    """``await`` :func:`captcha_tasks.solve_aws_waf` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_aws_waf, locals())


@_checked
async def solve_image(
    image_b64: str,
    *,
    numeric: int | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
    phrase: bool | None = None,
    regsense: bool | None = None,
    calc: bool | None = None,
    lang: str | None = None,
    textinstructions: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_image` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_image, locals())


@_checked
async def solve_datadome(
    captcha_url: str,
    pageurl: str,
    user_agent: str,
    *,
    proxy_id: str | None = None,
    datadome_cookie: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> DataDomeResult:
    """``await`` :func:`captcha_tasks.solve_datadome` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_datadome, locals())


@_checked
async def solve_coordinates(
    image_b64: str,
    *,
    textinstructions: str | None = None,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> CoordinatesResult:
    """``await`` :func:`captcha_tasks.solve_coordinates` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_coordinates, locals())


@_checked
async def solve_grid(
    image_b64: str,
    instruction: str,
    *,
    rows: int = 3,
    cols: int = 3,
    provider: str | None = None,
    exclude: Sequence[str] = (),
    timeout: float | None = DEFAULT_TIMEOUT,
) -> GridResult:
    """``await`` :func:`captcha_tasks.solve_grid` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.solve_grid, locals())


@_checked
async def solve_altcha(
    pageurl: str,
    *,
    challenge_json: str | dict[str, Any] | None = None,
    challenge_url: str | None = None,
    proxy_id: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> TokenResult:
    """``await`` :func:`captcha_tasks.solve_altcha` (same arguments, and ``timeout=``)."""
    return await _call(altcha_tasks.solve_altcha, locals())


@_checked
async def fetch_page(
    url: str,
    *,
    form: dict[str, str] | None = None,
    isolated: bool = False,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> PageResult:
    """``await`` :func:`captcha_tasks.fetch_page` (same arguments, and ``timeout=``)."""
    return await _call(page_tasks.fetch_page, locals())


@_checked
async def get_balance(
    provider: str | None = None,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> BalanceResult:
    """``await`` :func:`captcha_tasks.get_balance` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.get_balance, locals())


@_checked
async def report_solution(
    task_id: str,
    correct: bool = False,
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> ReportResult:
    """``await`` :func:`captcha_tasks.report_solution` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.report_solution, locals())


async def feedback(task_id: str, accepted: bool = True) -> FeedbackResult:
    """``await`` :func:`captcha_tasks.feedback` (same arguments): its few Redis round
    trips run on the loop's default executor, so the loop never waits on them."""
    from .worker.feedback import feedback as feedback_now

    return await asyncio.to_thread(feedback_now, task_id, accepted)


@_checked
async def ping(
    *,
    timeout: float | None = DEFAULT_TIMEOUT,
) -> PingResult:
    """``await`` :func:`captcha_tasks.ping` (same arguments, and ``timeout=``)."""
    return await _call(solve_tasks.ping, locals())


def _deprecated(name: str) -> Callable[..., Awaitable[Any]]:
    async def awaiting(*args: Any, timeout: float | None = DEFAULT_TIMEOUT, **kwargs: Any) -> Any:
        from .worker import deprecated

        return await call(deprecated.ALIASES[name], *args, timeout=timeout, **kwargs)

    awaiting.__name__ = awaiting.__qualname__ = name
    return awaiting


#: Deprecated names of 0.2 (they warn once, then send the family's task).
solve_recaptcha_v2_enterprise = _deprecated("solve_recaptcha_v2_enterprise")
solve_turnstile_challenge = _deprecated("solve_turnstile_challenge")
