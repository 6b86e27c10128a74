"""The store's split between a host's shared jar and a visitor's own jar (real
redis-server): visitor-bound cookies (DataDome's) go to and come from the visitor's key
only, every other cookie to and from the host's."""

from __future__ import annotations

import time

import pytest
import redis
import requests

from captcha_tasks.session.cookies import (
    VISITOR_BOUND_COOKIES,
    CookieStore,
    MergeResult,
    SharedSession,
    StoredCookie,
    visitor_id,
)
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys

HOST = "shop.example"
KEYS = Keys("ct:")
ONE = visitor_id("proxyone1234", "agent/1")
TWO = visitor_id("proxytwo5678", "agent/1")


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


@pytest.fixture
def store(client: redis.Redis) -> CookieStore:
    return CookieStore(client, Settings(key_prefix="ct:"), clock=time.time)


def _session(*cookies: tuple[str, str]) -> requests.Session:
    session = requests.Session()
    for name, value in cookies:
        session.cookies.set_cookie(StoredCookie(name, value, "." + HOST).to_jar())
    return session


def _fields(client: redis.Redis, key: str) -> set[str]:
    return {str(field).split(";", 1)[0] for field in client.hkeys(key)}


def test_datadome_and_cf_clearance_are_the_visitor_bound_names() -> None:
    assert frozenset({"datadome", "cf_clearance"}) == VISITOR_BOUND_COOKIES


def test_a_visitor_bound_cookie_goes_to_the_visitors_key_and_the_rest_to_the_hosts(
    store: CookieStore, client: redis.Redis
) -> None:
    assert ONE is not None and TWO is not None
    result = store.merge(_session(("datadome", "dd-one"), ("sid", "s1")), HOST, visitor=ONE)
    assert result.written == 2
    assert _fields(client, KEYS.cookies(HOST)) == {"sid"}
    assert _fields(client, KEYS.visitor_cookies(HOST, ONE)) == {"datadome"}
    assert client.ttl(KEYS.visitor_cookies(HOST, ONE)) > 0
    # Loaded by that visitor only; the shared cookie by everyone.
    assert {c.name: c.value for c in store.load(HOST, ONE)} == {"datadome": "dd-one", "sid": "s1"}
    assert {c.name for c in store.load(HOST, TWO)} == {"sid"}
    assert {c.name for c in store.load(HOST)} == {"sid"}


def test_a_session_of_another_visitor_keeps_its_own_cookie_and_shares_the_rest(
    store: CookieStore, client: redis.Redis
) -> None:
    store.merge(_session(("datadome", "dd-one"), ("sid", "s1")), HOST, visitor=ONE)
    two = SharedSession(requests.Session(), store, HOST, TWO).load()
    assert {c.name for c in two.session.cookies} == {"sid"}
    two.session.cookies.set_cookie(StoredCookie("datadome", "dd-two", "." + HOST).to_jar())
    two.session.cookies.set_cookie(StoredCookie("sid", "s2", "." + HOST).to_jar())
    assert two.save().written == 2
    assert {c.name: c.value for c in store.load(HOST, ONE)} == {"datadome": "dd-one", "sid": "s2"}
    assert {c.name: c.value for c in store.load(HOST, TWO)} == {"datadome": "dd-two", "sid": "s2"}
    assert _fields(client, KEYS.cookies(HOST)) == {"sid"}


def test_without_a_visitor_a_bound_cookie_is_neither_stored_nor_loaded(
    store: CookieStore, client: redis.Redis
) -> None:
    assert store.merge(_session(("datadome", "dd"), ("sid", "s1")), HOST).written == 1
    assert _fields(client, KEYS.cookies(HOST)) == {"sid"}
    browser = [{"name": "datadome", "value": "v", "domain": HOST}]
    assert store.import_browser(HOST, browser) == MergeResult()
    # One already in the host's jar (written by anything else) is never handed out.
    stray = StoredCookie("datadome", "stray", HOST, set_at=time.time())
    client.hset(KEYS.cookies(HOST), stray.identity, stray.to_json())
    assert {c.name for c in store.load(HOST)} == {"sid"}
    assert {c.name for c in store.load(HOST, ONE)} == {"sid"}


def test_the_visitor_is_the_proxy_id_and_a_hash_of_the_user_agent() -> None:
    one = visitor_id("abc123def456", "Mozilla/5.0 (X11)")
    assert one is not None and one.startswith("abc123def456:") and "Mozilla" not in one
    assert one == visitor_id("abc123def456", "Mozilla/5.0 (X11)")
    assert one != visitor_id("abc123def456", "Mozilla/5.0 (Mac)")
    assert one != visitor_id("fff123def456", "Mozilla/5.0 (X11)")
    # Going direct: the worker stands for the IP; neither: no visitor.
    assert visitor_id(None, "ua", "w1@host") != visitor_id(None, "ua", "w2@host")
    assert visitor_id(None, "ua") is None
