"""CaptchaTasksChallengeMiddleware with a stand-in for the cluster's fetch_page."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import pytest
from scrapy import Request
from scrapy.http import HtmlResponse, Response

from captcha_tasks.contrib.scrapy import (
    DONT_SOLVE,
    REISSUES,
    CaptchaTasksChallengeMiddleware,
    ChallengeNotSolved,
    Options,
)
from captcha_tasks.contrib.scrapy.cookies import JAR_READ_AT
from captcha_tasks.errors import ChallengeRejected, ConfigurationError
from captcha_tasks.settings import Settings
from tests.unit.contrib.conftest import CHALLENGE, CONTENT, FakeCrawler


class Cluster:
    """Answers fetch_page like the cluster after ``delay`` seconds (or raises ``error``)."""

    def __init__(self, delay: float = 0.01, error: Exception | None = None) -> None:
        self.calls: list[str] = []
        self.delay = delay
        self.error = error

    async def __call__(self, url: str, *, timeout: float) -> dict[str, Any]:
        self.calls.append(url)
        await asyncio.wait_for(asyncio.sleep(self.delay), timeout)
        if self.error is not None:
            raise self.error
        return {"status": 200, "url": url, "solved": True, "source": "api"}


MakeMiddleware = Callable[..., tuple[CaptchaTasksChallengeMiddleware, Cluster, FakeCrawler]]


@pytest.fixture
def make(make_crawler: Callable[..., FakeCrawler], cluster: Settings) -> MakeMiddleware:
    def build(
        options: Options | None = None, cluster_double: Cluster | None = None
    ) -> tuple[CaptchaTasksChallengeMiddleware, Cluster, FakeCrawler]:
        crawler = make_crawler()
        double = cluster_double or Cluster()
        middleware = CaptchaTasksChallengeMiddleware(
            crawler,  # type: ignore[arg-type]
            options or Options(),
            cluster,
            cluster=double,
        )
        return middleware, double, crawler

    return build


def _page(url: str, body: str = CHALLENGE, **meta: Any) -> tuple[Request, HtmlResponse]:
    request = Request(url, meta=meta)
    return request, HtmlResponse(url, body=body.encode(), encoding="utf-8", request=request)


def _respond(middleware: CaptchaTasksChallengeMiddleware, *pages: tuple[Request, Response]) -> Any:
    async def run() -> list[Any]:
        calls = [middleware.process_response(request, response) for request, response in pages]
        return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 10)

    return asyncio.run(run())


def test_concurrent_challenges_of_a_host_are_one_fetch_page_and_every_request_is_reissued(
    make: MakeMiddleware,
) -> None:
    middleware, cluster, crawler = make()
    pages = [_page(f"https://shop.example/p/{n}") for n in range(8)]
    again = _respond(middleware, *pages)
    assert cluster.calls == ["https://shop.example/p/0"]
    assert all(isinstance(r, Request) for r in again)
    assert [r.url for r in again] == [request.url for request, _ in pages]
    assert all(r.dont_filter and r.meta[REISSUES] == 1 for r in again)
    assert crawler.stats.values == {
        "captcha_tasks/challenged": 8,
        "captcha_tasks/cluster_fetches": 1,
        "captcha_tasks/solves": 1,
        "captcha_tasks/reissued": 8,
    }


def test_a_page_that_is_not_challenged_passes_untouched(make: MakeMiddleware) -> None:
    middleware, cluster, _ = make()
    request, response = _page("https://shop.example/p/1", CONTENT)
    binary = Response("https://shop.example/img", body=b"data-sitekey", request=request)
    assert _respond(middleware, (request, response), (request, binary)) == [response, binary]
    assert cluster.calls == []


def test_a_request_that_read_the_jar_before_the_last_solve_is_reissued_without_one(
    make: MakeMiddleware,
) -> None:
    middleware, cluster, crawler = make()
    _respond(middleware, _page("https://shop.example/p/0", **{JAR_READ_AT: 0.0}))
    # Sent before that solve ended (its cookies were stale): no second fetch_page.
    stale = _page("https://shop.example/p/1", **{JAR_READ_AT: 0.0})
    [again] = _respond(middleware, stale)
    assert isinstance(again, Request) and cluster.calls == ["https://shop.example/p/0"]
    assert crawler.stats.values["captcha_tasks/reissued_after_an_earlier_solve"] == 1
    # Challenged with cookies read after it: the cluster is asked again.
    fresh = _page("https://shop.example/p/2", **{JAR_READ_AT: float("inf")})
    _respond(middleware, fresh)
    assert len(cluster.calls) == 2


def test_reissues_are_bounded_per_request(
    make: MakeMiddleware, caplog: pytest.LogCaptureFixture
) -> None:
    middleware, cluster, crawler = make(Options(max_reissues=2))
    [error] = _respond(middleware, _page("https://shop.example/p/1", **{REISSUES: 2}))
    assert isinstance(error, ChallengeNotSolved)
    assert "still challenged after 2 re-issue(s) (CAPTCHA_TASKS_MAX_REISSUES = 2)" in str(error)
    assert cluster.calls == [] and crawler.stats.values["captcha_tasks/gave_up"] == 1
    assert "captcha_tasks: dropping GET https://shop.example/p/1: still challenged" in caplog.text


def test_a_failed_or_late_fetch_page_drops_the_requests_with_the_reason(
    make: MakeMiddleware,
) -> None:
    middleware, _, _ = make(cluster_double=Cluster(error=ChallengeRejected("refused the token")))
    errors = _respond(middleware, *[_page(f"https://shop.example/p/{n}") for n in range(3)])
    assert all(isinstance(e, ChallengeNotSolved) for e in errors)
    assert "fetch_page failed: ChallengeRejected: " in str(errors[0])
    slow, _, _ = make(Options(solve_timeout=0.05), Cluster(delay=5))
    [late] = _respond(slow, _page("https://shop.example/p/1"))
    assert isinstance(late, ChallengeNotSolved)
    assert "within CAPTCHA_TASKS_SOLVE_TIMEOUT (0.05 s)" in str(late)


def test_a_host_off_the_allowlist_gets_its_challenge_unsolved_logged_once(
    make: MakeMiddleware, caplog: pytest.LogCaptureFixture
) -> None:
    middleware, cluster, crawler = make()
    caplog.set_level(logging.WARNING)
    pages = [_page(f"https://other.example/p/{n}") for n in range(3)]
    assert _respond(middleware, *pages) == [response for _, response in pages]
    assert cluster.calls == []
    assert caplog.text.count("other.example served a recaptcha_v2 challenge") == 1
    assert "not in CAPTCHA_TASKS_ALLOWED_DOMAINS (shop.example)" in caplog.text
    assert crawler.stats.values["captcha_tasks/challenged_not_allowed"] == 3


def test_dont_solve_hands_one_challenge_to_the_spider(make: MakeMiddleware) -> None:
    middleware, cluster, _ = make()
    request, response = _page("https://shop.example/p/1", **{DONT_SOLVE: True})
    assert _respond(middleware, (request, response)) == [response]
    assert cluster.calls == []


def test_from_crawler_needs_the_cookie_middleware_and_asyncio(
    make_crawler: Callable[..., FakeCrawler], monkeypatch: pytest.MonkeyPatch
) -> None:
    import scrapy.utils.asyncio

    monkeypatch.setattr(scrapy.utils.asyncio, "is_asyncio_available", lambda: True)
    with pytest.raises(ConfigurationError, match="needs CaptchaTasksCookiesMiddleware"):
        CaptchaTasksChallengeMiddleware.from_crawler(make_crawler())  # type: ignore[arg-type]
    crawler = make_crawler(
        DOWNLOADER_MIDDLEWARES={
            "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
            "captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700,
        }
    )
    middleware = CaptchaTasksChallengeMiddleware.from_crawler(crawler)  # type: ignore[arg-type]
    assert middleware.options == Options()
    assert [receiver for receiver, _ in crawler.signals.connected] == [middleware.spider_closed]
    monkeypatch.setattr(scrapy.utils.asyncio, "is_asyncio_available", lambda: False)
    with pytest.raises(ConfigurationError, match="TWISTED_REACTOR"):
        CaptchaTasksChallengeMiddleware.from_crawler(crawler)  # type: ignore[arg-type]
