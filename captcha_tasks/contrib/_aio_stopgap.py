"""A stand-in for ``captcha_tasks.aio`` until it lands on main: the same three calls,
waiting on a thread (``AsyncResult.get``) instead of Redis pub/sub.

Private and temporary: :mod:`captcha_tasks.contrib.playwright` imports this module as
``aio``; once ``captcha_tasks.aio`` exists that import becomes ``from .. import aio``
and this file goes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..worker.solve_tasks import solve_hcaptcha as _hcaptcha
from ..worker.solve_tasks import solve_recaptcha_v2 as _recaptcha_v2
from ..worker.solve_tasks import solve_turnstile as _turnstile

#: Seconds a waiting thread gives up after (callers bound their own wait below it).
_THREAD_WAIT = 900.0


async def _run(task: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    result = await asyncio.to_thread(task.delay, *args, **kwargs)
    answer: dict[str, Any] = await asyncio.to_thread(result.get, timeout=_THREAD_WAIT)
    return answer


async def solve_recaptcha_v2(sitekey: str, pageurl: str, **kwargs: Any) -> dict[str, Any]:
    return await _run(_recaptcha_v2, sitekey, pageurl, **kwargs)


async def solve_turnstile(sitekey: str, pageurl: str, **kwargs: Any) -> dict[str, Any]:
    return await _run(_turnstile, sitekey, pageurl, **kwargs)


async def solve_hcaptcha(sitekey: str, pageurl: str, **kwargs: Any) -> dict[str, Any]:
    return await _run(_hcaptcha, sitekey, pageurl, **kwargs)
