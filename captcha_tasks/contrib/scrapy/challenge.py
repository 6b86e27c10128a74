"""``CaptchaTasksChallengeMiddleware``: a challenged response is solved by the cluster
and its request re-issued with the host's shared cookies.

Placed after decompression (590) and before the redirect and retry middlewares see the
response, i.e. at 585, beside :class:`~.cookies.CaptchaTasksCookiesMiddleware` (which it
needs: the re-issued request must carry the cookies the solve left)::

    DOWNLOADER_MIDDLEWARES = {
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700,
        "captcha_tasks.contrib.scrapy.CaptchaTasksChallengeMiddleware": 585,
    }

A response is challenged when :func:`~captcha_tasks.session.pages.find_challenge` finds a
widget in it, the same test ``fetch_page`` applies. For an allowlisted host the
middleware runs ``fetch_page`` on the cluster (one per host at a time inside the crawl,
:class:`~.coalesce.HostSolves`; none at all when the request read the jar before the
host's last solve finished), awaits it, and returns the request again
(``dont_filter=True``), counting re-issues in ``request.meta["captcha_tasks_reissues"]``.
Past ``CAPTCHA_TASKS_MAX_REISSUES``, or when ``fetch_page`` fails or outlives
``CAPTCHA_TASKS_SOLVE_TIMEOUT``, the request is dropped with :class:`ChallengeNotSolved`
(an ``IgnoreRequest``: its errback gets it) and one warning line. A challenge from a host
off the allowlist reaches the spider as it is (logged once per host);
``request.meta["captcha_tasks_dont_solve"] = True`` does the same for one request.

The site's verdict on every token is counted where the token is submitted, by
``fetch_page`` on the cluster (the acceptance figures per provider and type; a refused
token solved again up to ``CAPTCHA_TASKS_PAGE_ATTEMPTS``); the crawl's stats count the
refused ones (``captcha_tasks/tokens_refused``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from scrapy import signals
from scrapy.exceptions import IgnoreRequest, NotConfigured
from scrapy.http import TextResponse

from ...errors import ConfigurationError
from ...redaction import mask_url
from ...session.pages import Challenge, find_challenge
from ...settings import Settings, get_settings
from .cluster import fetch_on_cluster
from .coalesce import HostSolves
from .cookies import JAR_READ_AT, CaptchaTasksCookiesMiddleware
from .options import Options, allowlisted, enabled_middlewares, require_asyncio

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

__all__ = ["DONT_SOLVE", "REISSUES", "CaptchaTasksChallengeMiddleware", "ChallengeNotSolved"]

log = logging.getLogger(__name__)

#: Request meta: how many times this request was re-issued after a challenge.
REISSUES = "captcha_tasks_reissues"
#: Request meta: true to hand this request's challenge to the spider unsolved.
DONT_SOLVE = "captcha_tasks_dont_solve"


class ChallengeNotSolved(IgnoreRequest):
    """The crawl gave up on a challenged request (the reason is the message)."""


class Cluster(Protocol):
    async def __call__(self, url: str, *, timeout: float) -> dict[str, Any]: ...


class CaptchaTasksChallengeMiddleware:
    """Challenged responses of allowlisted hosts: solved by the cluster, re-issued."""

    def __init__(
        self,
        crawler: Crawler,
        options: Options,
        settings: Settings | None = None,
        *,
        cluster: Cluster = fetch_on_cluster,
    ) -> None:
        self.crawler = crawler
        self.options = options
        self.settings = settings if settings is not None else get_settings()
        self.cluster = cluster
        self.solves: HostSolves[dict[str, Any]] = HostSolves()
        self._refused_hosts: set[str] = set()

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CaptchaTasksChallengeMiddleware:
        options = Options.from_settings(crawler.settings)
        if not options.enabled:
            raise NotConfigured("CAPTCHA_TASKS_ENABLED is false")
        require_asyncio()
        if not any(
            issubclass(mw, CaptchaTasksCookiesMiddleware)
            for mw in enabled_middlewares(crawler.settings)
        ):
            raise ConfigurationError(
                "CaptchaTasksChallengeMiddleware needs CaptchaTasksCookiesMiddleware (a "
                "re-issued request must carry the host's shared cookies): add "
                '"captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700 to '
                "DOWNLOADER_MIDDLEWARES, in place of Scrapy's CookiesMiddleware"
            )
        middleware = cls(crawler, options)
        crawler.signals.connect(middleware.spider_closed, signal=signals.spider_closed)
        return middleware

    async def spider_closed(self) -> None:
        await self.solves.aclose()

    async def process_response(self, request: Request, response: Response) -> Response | Request:
        challenge = self._challenge(request, response)
        if challenge is None:
            return response
        host = urlsplit(response.url).netloc
        if not allowlisted(response.url, self.settings):
            self._not_allowed(host, challenge)
            return response
        self._stat("captcha_tasks/challenged")
        reissues = int(request.meta.get(REISSUES, 0))
        if reissues >= self.options.max_reissues:
            raise self._give_up(
                request,
                f"still challenged after {reissues} re-issue(s) "
                f"(CAPTCHA_TASKS_MAX_REISSUES = {self.options.max_reissues})",
            )
        if self.solves.cleared_since(host, request.meta.get(JAR_READ_AT)):
            # It read the jar before the host's last solve ended: its cookies were stale.
            self._stat("captcha_tasks/reissued_after_an_earlier_solve")
        else:
            await self._clear(request, response.url, host, challenge)
        again = request.replace(dont_filter=True)
        again.meta[REISSUES] = reissues + 1
        self._stat("captcha_tasks/reissued")
        return again

    def _challenge(self, request: Request, response: Response) -> Challenge | None:
        if request.meta.get(DONT_SOLVE) or not isinstance(response, TextResponse):
            return None
        return find_challenge(response.text, response.url)

    async def _clear(self, request: Request, url: str, host: str, challenge: Challenge) -> None:
        """Until the cluster has cleared ``host``'s challenge (this request's solve, or
        the one in flight for the host); :class:`ChallengeNotSolved` if it could not."""
        timeout = self.options.solve_timeout

        async def solve() -> dict[str, Any]:
            started = time.monotonic()
            log.info(
                "captcha_tasks: %s challenged (%s): fetch_page on the cluster", host, challenge.type
            )
            result = await self.cluster(url, timeout=timeout)
            self._stat("captcha_tasks/cluster_fetches")
            self._stat("captcha_tasks/solves", 1 if result.get("solved") else 0)
            # The site's verdict on each token is counted by fetch_page on the cluster
            # (acceptance per provider and type); the crawl's stats show the refused ones.
            self._stat("captcha_tasks/tokens_refused", max(0, int(result.get("attempts") or 1) - 1))
            log.info(
                "captcha_tasks: %s cleared by the cluster in %.2f s (solved here: %s, token: %s)",
                host,
                time.monotonic() - started,
                bool(result.get("solved")),
                result.get("source") or "none needed",
            )
            return result

        try:
            await self.solves.run(host, solve)
        except asyncio.TimeoutError:
            raise self._give_up(
                request,
                f"the cluster's fetch_page did not finish within "
                f"CAPTCHA_TASKS_SOLVE_TIMEOUT ({timeout:g} s)",
            ) from None
        except Exception as exc:
            raise self._give_up(
                request, f"the cluster's fetch_page failed: {type(exc).__name__}: {exc}"
            ) from exc

    def _not_allowed(self, host: str, challenge: Challenge) -> None:
        self._stat("captcha_tasks/challenged_not_allowed")
        if host in self._refused_hosts:
            return
        self._refused_hosts.add(host)
        allowed = ", ".join(self.settings.allowed_domains) or "none configured"
        log.warning(
            "captcha_tasks: %s served a %s challenge, but it is not in "
            "CAPTCHA_TASKS_ALLOWED_DOMAINS (%s): its challenged responses go to the spider "
            "unsolved (logged once per host)",
            host,
            challenge.type,
            allowed,
        )

    def _give_up(self, request: Request, reason: str) -> ChallengeNotSolved:
        self._stat("captcha_tasks/gave_up")
        log.warning(
            "captcha_tasks: dropping %s %s: %s", request.method, mask_url(request.url), reason
        )
        return ChallengeNotSolved(reason)

    def _stat(self, key: str, count: int = 1) -> None:
        if count and self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, count)
