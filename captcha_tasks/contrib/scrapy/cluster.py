"""The one call the crawl makes to the cluster: ``fetch_page`` of a challenged URL,
awaited without blocking the event loop.

``fetch_page`` is what gives the crawl the token pool, the host's session lock and the
shared jar exactly as workers have them: the worker fetches the page with the host's
shared cookies, takes a pooled token or solves under the lock (or parks until whoever
holds it has saved fresh cookies), submits the challenge and saves the cookies. When it
returns, the host's shared jar opens the page; the crawl re-issues its request.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any, cast

__all__ = ["fetch_on_cluster"]


async def fetch_on_cluster(url: str, *, timeout: float) -> dict[str, Any]:
    """``captcha_tasks.fetch_page(url)``'s result (``{"status", "url", "solved",
    "source"}``); its exception if it failed; :class:`asyncio.TimeoutError` after
    ``timeout`` seconds."""
    try:
        aio: Any = importlib.import_module("captcha_tasks.aio")
    except ModuleNotFoundError:
        return await _fetch_in_a_thread(url, timeout)
    return cast("dict[str, Any]", await aio.fetch_page(url, timeout=timeout))


async def _fetch_in_a_thread(url: str, timeout: float) -> dict[str, Any]:
    # Stand-in until captcha_tasks.aio lands (it waits through Redis pub/sub, no thread).
    from ...worker.page_tasks import fetch_page

    result = fetch_page.delay(url)
    try:
        return cast("dict[str, Any]", await asyncio.to_thread(result.get, timeout=timeout))
    except Exception as exc:
        if type(exc).__name__ == "TimeoutError" and type(exc).__module__.startswith("celery"):
            raise asyncio.TimeoutError(f"fetch_page did not finish in {timeout:g} s") from None
        raise
