"""CaptchaTasksCookiesMiddleware against the test Redis: the shared jar for allowlisted
hosts, Scrapy's own jars for the others."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import scrapy.downloadermiddlewares.cookies
from scrapy import Request
from scrapy.http import HtmlResponse

from captcha_tasks.contrib.scrapy import CaptchaTasksCookiesMiddleware
from captcha_tasks.contrib.scrapy.cookies import JAR_READ_AT
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.settings import Settings
from captcha_tasks.state import state_redis
from tests.unit.contrib.conftest import CONTENT, FakeCrawler

T = TypeVar("T")
VALUE = "Sh4red-Cookie-Value-0001"


@pytest.fixture(autouse=True)
def _no_public_suffix_download(monkeypatch: pytest.MonkeyPatch) -> None:
    # Scrapy's own middleware asks tldextract, which would fetch the suffix list.
    monkeypatch.setattr(scrapy.downloadermiddlewares.cookies, "_is_public_domain", lambda d: False)


@pytest.fixture
def store(redis_url: str, cluster: Settings) -> CookieStore:
    return CookieStore(state_redis(cluster), cluster)


@pytest.fixture
def middleware(
    make_crawler: Callable[..., FakeCrawler], cluster: Settings, store: CookieStore
) -> CaptchaTasksCookiesMiddleware:
    return CaptchaTasksCookiesMiddleware(make_crawler(), cluster)  # type: ignore[arg-type]


def _run(middleware: CaptchaTasksCookiesMiddleware, work: Callable[[], Awaitable[T]]) -> T:
    async def scenario() -> T:
        try:
            return await asyncio.wait_for(work(), 10)
        finally:
            await middleware.spider_closed()  # closes its Redis client inside the loop

    return asyncio.run(scenario())


def _cookie_header(request: Request) -> str:
    return b"; ".join(request.headers.getlist("Cookie")).decode()


def _response(request: Request, *set_cookies: str) -> HtmlResponse:
    return HtmlResponse(
        request.url,
        body=CONTENT.encode(),
        encoding="utf-8",
        request=request,
        headers={"Set-Cookie": list(set_cookies)},
    )


def test_an_allowlisted_request_carries_the_shared_jar(
    middleware: CaptchaTasksCookiesMiddleware, store: CookieStore
) -> None:
    store.import_browser(
        "shop.example",
        [
            {"name": "qa_validation_cookie", "value": VALUE, "domain": "shop.example", "path": "/"},
            {"name": "cart", "value": "3", "domain": ".shop.example", "path": "/cart"},
        ],
    )
    page = Request("https://shop.example/page/1", headers={"Cookie": "stale=1"})
    cart = Request("https://shop.example/cart/x")
    _run(
        middleware,
        lambda: asyncio.gather(middleware.process_request(page), middleware.process_request(cart)),
    )
    assert _cookie_header(page) == f"qa_validation_cookie={VALUE}"  # host-only, path /
    # Each cookie on its path (one jar per host name, as for workers: www.shop.example has
    # a jar of its own).
    assert set(_cookie_header(cart).split("; ")) == {"cart=3", f"qa_validation_cookie={VALUE}"}
    assert isinstance(page.meta[JAR_READ_AT], float)
    assert middleware.crawler.stats.values["captcha_tasks/cookies/requests_shared"] == 2


def test_set_cookie_is_merged_into_the_shared_jar_and_deletions_delete(
    middleware: CaptchaTasksCookiesMiddleware,
    store: CookieStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    store.import_browser(
        "shop.example",
        [
            {"name": "old", "value": "Old-Value-0001", "domain": "shop.example", "path": "/"},
            {"name": "kept", "value": "Kept-Value-001", "domain": "shop.example", "path": "/"},
        ],
    )
    request = Request("https://shop.example/verify")

    async def respond() -> None:
        await middleware.process_request(request)
        response = _response(
            request,
            f"qa_validation_cookie={VALUE}; Path=/; Max-Age=90; HttpOnly",
            "old=; Path=/; Max-Age=0",
        )
        assert await middleware.process_response(request, response) is response

    _run(middleware, respond)
    jar = {c.name: c for c in store.load("shop.example")}
    assert set(jar) == {"qa_validation_cookie", "kept"}
    assert jar["qa_validation_cookie"].value == VALUE and jar["qa_validation_cookie"].http_only
    assert jar["kept"].value == "Kept-Value-001"  # untouched by the response: not rewritten
    assert "1 cookie(s) written to the shared jar, 1 deleted" in caplog.text
    assert VALUE not in caplog.text and "Old-Value" not in caplog.text


def test_request_cookies_join_the_shared_jar_as_they_join_scrapys(
    middleware: CaptchaTasksCookiesMiddleware, store: CookieStore
) -> None:
    request = Request("https://shop.example/a", cookies={"lang": "en-GB"})
    _run(middleware, lambda: middleware.process_request(request))
    assert _cookie_header(request) == "lang=en-GB"
    assert [(c.name, c.value) for c in store.load("shop.example")] == [("lang", "en-GB")]


def test_dont_merge_cookies_sends_and_keeps_nothing(
    middleware: CaptchaTasksCookiesMiddleware, store: CookieStore
) -> None:
    store.import_browser(
        "shop.example", [{"name": "a", "value": "b", "url": "https://shop.example"}]
    )
    request = Request("https://shop.example/a", meta={"dont_merge_cookies": True})

    async def respond() -> None:
        await middleware.process_request(request)
        await middleware.process_response(request, _response(request, "new=1; Path=/"))

    _run(middleware, respond)
    assert _cookie_header(request) == ""
    assert [c.name for c in store.load("shop.example")] == ["a"]


def test_other_hosts_keep_scrapys_own_jars_and_never_reach_redis(
    middleware: CaptchaTasksCookiesMiddleware, store: CookieStore, cluster: Settings
) -> None:
    first = Request("https://other.example/login")
    later = Request("https://other.example/account")
    elsewhere = Request("https://other.example/account", meta={"cookiejar": "second visitor"})

    async def visit() -> None:
        await middleware.process_request(first)
        await middleware.process_response(first, _response(first, "sid=Local-Session-1; Path=/"))
        await middleware.process_request(later)
        await middleware.process_request(elsewhere)

    _run(middleware, visit)
    assert _cookie_header(later) == "sid=Local-Session-1"
    assert _cookie_header(elsewhere) == ""  # Scrapy's per-`cookiejar` sessions still hold
    raw = state_redis(cluster)
    assert [key for key in raw.scan_iter("*cookies*")] == []
    assert JAR_READ_AT not in later.meta


def test_from_crawler_follows_cookies_enabled_and_captcha_tasks_enabled(
    make_crawler: Callable[..., FakeCrawler], monkeypatch: pytest.MonkeyPatch
) -> None:
    import scrapy.utils.asyncio
    from scrapy.exceptions import NotConfigured

    monkeypatch.setattr(scrapy.utils.asyncio, "is_asyncio_available", lambda: True)
    for off in ({"COOKIES_ENABLED": False}, {"CAPTCHA_TASKS_ENABLED": False}):
        with pytest.raises(NotConfigured):
            CaptchaTasksCookiesMiddleware.from_crawler(make_crawler(**off))  # type: ignore[arg-type]
    crawler: Any = make_crawler()
    middleware = CaptchaTasksCookiesMiddleware.from_crawler(crawler)
    assert [receiver for receiver, _ in crawler.signals.connected] == [middleware.spider_closed]


def test_a_redis_that_does_not_answer_fails_the_request_instead_of_sending_it_bare(
    make_crawler: Callable[..., FakeCrawler], cluster: Settings
) -> None:
    import redis

    from captcha_tasks_dev.procs import free_port

    away = dataclasses.replace(cluster, state_url=f"redis://127.0.0.1:{free_port()}/0")
    middleware = CaptchaTasksCookiesMiddleware(make_crawler(), away)  # type: ignore[arg-type]
    request = Request("https://shop.example/a")
    with pytest.raises(redis.ConnectionError):
        _run(middleware, lambda: middleware.process_request(request))
    assert _cookie_header(request) == ""
