"""An isolated or retried page's own cookie jar (real redis-server): kept under the page's
task id apart from the host's shared jar, with a bounded TTL, read back over a session's
cookies, and gone with :meth:`PageJar.clear`."""

from __future__ import annotations

import time

import pytest
import redis
import requests

from captcha_tasks.session.cookies import PAGE_JAR_TTL, CookieStore, PageJar, StoredCookie
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys

HOST = "shop.example"
KEYS = Keys("ct:")
SETTINGS = Settings(key_prefix="ct:")


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


def _session(*cookies: tuple[str, str], expires: int | None = None) -> requests.Session:
    session = requests.Session()
    for name, value in cookies:
        session.cookies.set_cookie(StoredCookie(name, value, "." + HOST, expires=expires).to_jar())
    return session


def test_a_pages_cookies_are_its_own_not_the_hosts(client: redis.Redis) -> None:
    page = PageJar(client, SETTINGS, "task-1")
    assert page.merge(_session(("sid", "visitor-1")), HOST).written == 1
    assert KEYS.page_cookies(HOST, "task-1") == "ct:cookies:shop.example:page:task-1"
    assert client.hkeys(KEYS.page_cookies(HOST, "task-1")) == ["sid;.shop.example;/"]
    assert not client.exists(KEYS.cookies(HOST))  # the shared jar is untouched
    assert CookieStore(client, SETTINGS).load(HOST) == []
    assert [c.value for c in PageJar(client, SETTINGS, "task-2").load(HOST)] == []
    # A session cookie keeps the page's jar at most PAGE_JAR_TTL.
    assert 0 < client.ttl(KEYS.page_cookies(HOST, "task-1")) <= PAGE_JAR_TTL


def test_the_pages_cookies_are_applied_over_the_shared_ones(client: redis.Redis) -> None:
    CookieStore(client, SETTINGS).merge(_session(("sid", "the-jars"), ("lang", "en")), HOST)
    PageJar(client, SETTINGS, "task-1").merge(_session(("sid", "the-pages")), HOST)
    session = requests.Session()
    CookieStore(client, SETTINGS).apply(session, HOST)
    PageJar(client, SETTINGS, "task-1").apply(session, HOST)
    assert {c.name: c.value for c in session.cookies} == {"sid": "the-pages", "lang": "en"}


def test_a_long_lived_cookie_is_kept_no_longer_than_the_cap(client: redis.Redis) -> None:
    year = int(time.time()) + 365 * 86_400
    PageJar(client, SETTINGS, "task-1").merge(_session(("sid", "s"), expires=year), HOST)
    assert PAGE_JAR_TTL - 5 <= client.ttl(KEYS.page_cookies(HOST, "task-1")) <= PAGE_JAR_TTL


def test_clear_deletes_the_pages_jar_only(client: redis.Redis) -> None:
    CookieStore(client, SETTINGS).merge(_session(("lang", "en")), HOST)
    page = PageJar(client, SETTINGS, "task-1")
    page.merge(_session(("sid", "s")), HOST)
    assert page.clear(HOST) == 1
    assert not client.exists(KEYS.page_cookies(HOST, "task-1"))
    assert client.exists(KEYS.cookies(HOST))
