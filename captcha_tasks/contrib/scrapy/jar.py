"""The cluster's shared cookie jars from asyncio: the same Redis hashes and Lua scripts
as :class:`~captcha_tasks.session.cookies.CookieStore`, through ``redis.asyncio``, so a
crawl never blocks its reactor on Redis.

Scrapy's requests and responses meet the stored cookies in a Scrapy
:class:`~scrapy.http.cookies.CookieJar` (the standard library's jar and policy, the one
Scrapy's own ``CookiesMiddleware`` uses): :func:`request_jar` fills one with a host's
shared cookies, and :func:`changes` turns what a response did to it into the merge
operations a worker's ``requests`` session would have produced (:func:`diff_jar`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import redis.asyncio
from scrapy.http.cookies import CookieJar

from ...session.cookie_model import CookieSnapshot, Op, StoredCookie, diff_jar, normalize_host
from ...session.cookies import MergeResult, decode_loaded, merge_args, visitor_bound
from ...settings import Settings
from ...state.clock import RedisClock
from ...state.keys import Keys
from ...state.redis import CONNECT_TIMEOUT, SOCKET_TIMEOUT, async_redis_client, redis_client
from ...state.scripts import source

__all__ = ["SharedJars", "changes", "request_jar"]


class SharedJars:
    """``load`` and ``merge`` a host's shared jar without blocking the event loop.

    The client is made on first use, in the loop that uses it (a ``redis.asyncio``
    connection belongs to one loop); :meth:`aclose` closes it.
    """

    def __init__(self, settings: Settings, *, clock: Callable[[], float] | None = None) -> None:
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        # Redis's clock (set_at stamps decide between writers on different hosts), read
        # in the background: the event loop never waits for it.
        self.clock = clock or RedisClock(
            redis_client(settings, settings.state_url), wait_first=False
        )
        self._client: redis.asyncio.Redis | None = None
        self._scripts: dict[str, Any] = {}

    def _script(self, name: str) -> Any:
        if self._client is None:
            self._client = async_redis_client(
                self.settings,
                self.settings.state_url,
                socket_timeout=SOCKET_TIMEOUT,
                socket_connect_timeout=CONNECT_TIMEOUT,
                decode_responses=True,
                health_check_interval=30,
            )
        found = self._scripts.get(name)
        if found is None:
            found = self._scripts[name] = self._client.register_script(source(name))
        return found

    async def load(self, host: str) -> list[StoredCookie]:
        """The host's live shared cookies (expired ones deleted on the way, as workers
        do); visitor-bound ones are never shared
        (:data:`~captcha_tasks.session.cookies.VISITOR_BOUND_COOKIES`)."""
        host = normalize_host(host)
        flat = await self._script("cookies_load")(
            keys=[self.keys.cookies(host)], args=[repr(self.clock())]
        )
        return [c for c in decode_loaded(list(flat), host) if not visitor_bound(c.identity)]

    async def merge(self, host: str, ops: Iterable[Op], now: float) -> MergeResult:
        """Apply ``ops`` (from :func:`changes`) with the freshness rule of every merge;
        visitor-bound cookies are left out (a crawl has no visitor jar)."""
        host = normalize_host(host)
        args = merge_args([op for op in ops if not visitor_bound(op[1])], now)
        if args is None:
            return MergeResult()
        written, stale, deleted = await self._script("cookies_merge")(
            keys=[self.keys.cookies(host)], args=args
        )
        return MergeResult(int(written), int(stale), int(deleted))

    async def aclose(self) -> None:
        client, self._client = self._client, None
        self._scripts.clear()
        if client is not None:
            await client.aclose()


def request_jar(host: str, cookies: Iterable[StoredCookie]) -> tuple[CookieJar, CookieSnapshot]:
    """A Scrapy jar holding ``cookies`` (attributes kept), and the snapshot that
    :func:`changes` compares it with later."""
    jar = CookieJar()
    loaded = list(cookies)
    for cookie in loaded:
        jar.set_cookie(cookie.to_jar())
    return jar, CookieSnapshot(normalize_host(host), {c.identity: c for c in loaded})


def changes(jar: CookieJar, snapshot: CookieSnapshot, now: float) -> list[Op]:
    """What ``jar`` changed since ``snapshot``: ``set`` for new or changed cookies,
    ``del`` for those the server deleted (never a cookie it did not touch)."""
    return diff_jar(jar.jar, snapshot.host, snapshot, now)
