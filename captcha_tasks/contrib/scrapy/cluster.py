"""The one call the crawl makes to the cluster: ``fetch_page`` of a challenged URL,
awaited on the crawl's event loop (:mod:`captcha_tasks.aio`: Redis pub/sub, no thread).

``fetch_page`` is what gives the crawl the token pool, the host's session lock and the
shared jar exactly as workers have them: the worker fetches the page with the host's
shared cookies, takes a pooled token or solves under the lock (or parks until whoever
holds it has saved fresh cookies), submits the challenge and saves the cookies. When it
returns, the host's shared jar opens the page; the crawl re-issues its request.
"""

from __future__ import annotations

from typing import Any, cast

from ... import aio

__all__ = ["fetch_on_cluster"]


async def fetch_on_cluster(url: str, *, timeout: float) -> dict[str, Any]:
    """``captcha_tasks.fetch_page(url)``'s result (``{"status", "url", "solved",
    "source"}``); its exception if it failed; :class:`asyncio.TimeoutError` after
    ``timeout`` seconds (the task goes on; its cookies still reach the shared jar)."""
    return cast("dict[str, Any]", await aio.fetch_page(url, timeout=timeout))
