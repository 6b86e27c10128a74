"""``CaptchaTasksCookiesMiddleware``: a crawl's cookies for the cluster's hosts live in the
cluster's shared jar, so a spider and the Celery workers are one visitor per site.

It replaces Scrapy's ``CookiesMiddleware`` (same place, 700)::

    DOWNLOADER_MIDDLEWARES = {
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700,
    }

For a request to a host in ``CAPTCHA_TASKS_ALLOWED_DOMAINS`` it reads the host's shared
jar (one Redis call, awaited: the reactor never blocks on it) and sends those cookies;
``Request.cookies`` join the shared jar as Scrapy's would join its jar; a response's
``Set-Cookie`` is merged back (a load and a merge, only when there is one) with the rule
every worker follows: the freshest write of each cookie wins, a deleted cookie is
deleted. Every other host gets Scrapy's own ``CookiesMiddleware``, unchanged, jars per
``cookiejar`` meta key included. ``dont_merge_cookies`` is honoured for both.

Cookie values are never logged (``COOKIES_DEBUG`` shows them for the other hosts only,
as Scrapy does).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from scrapy import signals
from scrapy.downloadermiddlewares.cookies import CookiesMiddleware
from scrapy.exceptions import NotConfigured

from ...session.cookie_model import CookieSnapshot, normalize_host
from ...settings import Settings, get_settings
from .jar import SharedJars, changes, request_jar
from .options import Options, allowlisted, require_asyncio

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.http.cookies import CookieJar

__all__ = ["JAR_READ_AT", "CaptchaTasksCookiesMiddleware"]

log = logging.getLogger(__name__)

#: Request meta: when (``time.monotonic()``) the request's shared cookies were read.
#: The challenge middleware compares it with its host's last solve.
JAR_READ_AT = "_captcha_tasks_jar_read_at"


class CaptchaTasksCookiesMiddleware:
    """Scrapy's cookie handling, with the cluster's shared jar for allowlisted hosts."""

    def __init__(
        self,
        crawler: Crawler,
        settings: Settings | None = None,
        *,
        jars: SharedJars | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.crawler = crawler
        self.settings = settings if settings is not None else get_settings()
        self.jars = jars if jars is not None else SharedJars(self.settings)
        self.clock = clock
        #: Scrapy's own middleware, for every host the cluster does not serve.
        self.local = CookiesMiddleware(crawler.settings.getbool("COOKIES_DEBUG"))
        self.local.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CaptchaTasksCookiesMiddleware:
        options = Options.from_settings(crawler.settings)
        if not options.enabled:
            raise NotConfigured("CAPTCHA_TASKS_ENABLED is false")
        if not crawler.settings.getbool("COOKIES_ENABLED"):
            raise NotConfigured("COOKIES_ENABLED is false")
        require_asyncio()
        middleware = cls(crawler)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    async def spider_closed(self) -> None:
        await self.jars.aclose()

    async def process_request(self, request: Request) -> None:
        if request.meta.get("dont_merge_cookies", False):
            return None
        if not allowlisted(request.url, self.settings):
            self.local.process_request(request)
            return None
        host = normalize_host(request.url)
        request.meta[JAR_READ_AT] = self.clock()
        jar, snapshot = request_jar(host, await self.jars.load(host))
        # Scrapy's parsing of Request.cookies (dicts, lists of dicts), then its jar's policy.
        own = self.local._get_request_cookies(jar, request)
        for cookie in own:
            jar.set_cookie_if_ok(cookie, request)
        if own:
            await self._merge(jar, snapshot, "Request.cookies")
        request.headers.pop("Cookie", None)
        jar.add_cookie_header(request)
        sent = len(request.headers.getlist("Cookie"))
        self._stat("captcha_tasks/cookies/requests_shared")
        if sent and snapshot.cookies:
            self._stat("captcha_tasks/cookies/requests_with_shared_cookies")
        return None

    async def process_response(self, request: Request, response: Response) -> Response:
        if request.meta.get("dont_merge_cookies", False):
            return response
        if not allowlisted(request.url, self.settings):
            result = self.local.process_response(request, response)
            assert result is response  # Scrapy's cookie middleware never replaces it
            return response
        if not response.headers.getlist("Set-Cookie"):
            return response  # nothing to merge: no Redis call at all
        host = normalize_host(request.url)
        jar, snapshot = request_jar(host, await self.jars.load(host))
        jar.extract_cookies(response, request)
        await self._merge(jar, snapshot, "Set-Cookie")
        return response

    async def _merge(self, jar: CookieJar, snapshot: CookieSnapshot, origin: str) -> None:
        now = self.jars.clock()
        result = await self.jars.merge(snapshot.host, changes(jar, snapshot, now), now)
        if result.written or result.deleted or result.stale:
            # Counts only: never a cookie's value.
            log.debug(
                "captcha_tasks: %s of %s: %d cookie(s) written to the shared jar, "
                "%d deleted, %d older than the jar's (kept the jar's)",
                origin,
                snapshot.host,
                result.written,
                result.deleted,
                result.stale,
            )
        self._stat("captcha_tasks/cookies/written", result.written)
        self._stat("captcha_tasks/cookies/deleted", result.deleted)

    def _stat(self, key: str, count: int = 1) -> None:
        if count and self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, count)
