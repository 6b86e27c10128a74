"""Shared cookies as plain data: host names, conversions, the browser format, diffs."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
import requests

from captcha_tasks import SharedCookiesTask
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.session.cookies import (
    CookieSnapshot,
    StoredCookie,
    diff_jar,
    domain_matches,
    mask_value,
    normalize_host,
    parse_browser_cookies,
)

NOW = 1_750_000_000.0


def cookie(**fields: Any) -> StoredCookie:
    base: dict[str, Any] = {"name": "sid", "value": "v1", "domain": "example.com", "set_at": NOW}
    return StoredCookie(**{**base, **fields})


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Example.COM", "example.com"),
        ("example.com:8443", "example.com"),
        ("example.com.", "example.com"),
        ("https://User:pw@WWW.Example.com:8443/login?x=1", "www.example.com"),
        ("Bücher.Example", "xn--bcher-kva.example"),
        ("http://bücher.example/", "xn--bcher-kva.example"),
        ("xn--bcher-kva.example", "xn--bcher-kva.example"),
        ("127.0.0.1:8000", "127.0.0.1"),
        ("[::1]:8080", "::1"),
        ("http://[0:0::1]:8080/x", "::1"),
        ("my_host.internal", "my_host.internal"),
    ],
)
def test_normalize_host(raw: str, expected: str) -> None:
    assert normalize_host(raw) == expected


@pytest.mark.parametrize("raw", ["", "exa mple.com", "a..b", ".example.com", "http:///x", "ü..de"])
def test_normalize_host_rejects_garbage(raw: str) -> None:
    with pytest.raises(InvalidTaskInput):
        normalize_host(raw)


@pytest.mark.parametrize(
    ("domain", "host", "sent"),
    [
        ("example.com", "example.com", True),
        ("example.com", "www.example.com", False),  # host-only
        (".example.com", "www.example.com", True),
        (".example.com", "example.com", True),
        (".example.com", "badexample.com", False),
        ("other.com", "example.com", False),
        ("localhost.local", "localhost", True),  # http.cookiejar's name for dotless hosts
    ],
)
def test_domain_matches(domain: str, host: str, sent: bool) -> None:
    assert domain_matches(domain, host) is sent


def test_mask_value_never_shows_short_values_and_keeps_a_prefix_of_long_ones() -> None:
    assert mask_value("secret") == "***(6)"
    masked = mask_value("0123456789abcdefXYZ")
    assert masked.startswith("0123") and "XYZ" not in masked and "(19)" in masked


def test_stored_cookie_json_round_trip_keeps_every_attribute() -> None:
    original = cookie(
        domain=".example.com",
        path="/app",
        expires=int(NOW) + 60,
        secure=True,
        http_only=True,
        same_site="Strict",
        set_at=NOW + 0.123456,
    )
    assert StoredCookie.from_json(original.to_json()) == original
    assert json.loads(original.to_json())["set_at"] == NOW + 0.123456
    assert original.identity == "sid;.example.com;/app"


def test_jar_round_trip_keeps_attributes_and_is_sent_like_the_original() -> None:
    original = cookie(
        domain=".example.com",
        path="/app",
        expires=int(NOW) + 10**8,
        secure=True,
        http_only=True,
        same_site="Lax",
    )
    jar_cookie = original.to_jar()
    assert jar_cookie.domain_specified and jar_cookie.has_nonstandard_attr("HttpOnly")
    assert StoredCookie.from_jar(jar_cookie, set_at=NOW) == original

    session = requests.Session()
    session.cookies.set_cookie(jar_cookie)
    prepared = session.prepare_request(requests.Request("GET", "https://www.example.com/app/x"))
    assert prepared.headers.get("Cookie") == "sid=v1"
    plain = session.prepare_request(requests.Request("GET", "http://www.example.com/app/x"))
    assert "Cookie" not in plain.headers  # Secure


def test_from_jar_reads_attributes_whatever_the_servers_spelling() -> None:
    jar_cookie = cookie().to_jar()
    jar_cookie._rest = {"httponly": None, "samesite": "none"}  # type: ignore[attr-defined]
    parsed = StoredCookie.from_jar(jar_cookie)
    assert parsed.http_only and parsed.same_site == "None"


def test_diff_jar_writes_only_what_changed_and_deletes_what_disappeared() -> None:
    kept, changed, gone = cookie(name="kept"), cookie(name="changed"), cookie(name="gone")
    snapshot = CookieSnapshot("example.com", {c.identity: c for c in (kept, changed, gone)})
    jar = requests.cookies.RequestsCookieJar()
    jar.set_cookie(kept.to_jar())
    jar.set_cookie(dataclasses.replace(changed, value="v2").to_jar())
    jar.set_cookie(cookie(name="new").to_jar())
    jar.set_cookie(cookie(name="other", domain="other.com").to_jar())  # not this host's
    later = NOW + 5

    ops = diff_jar(jar, "example.com", snapshot, later)

    assert [(op, field) for op, field, _ in ops] == [
        ("set", "changed;example.com;/"),
        ("set", "new;example.com;/"),
        ("del", "gone;example.com;/"),
    ]
    assert json.loads(ops[0][2])["set_at"] == later and json.loads(ops[0][2])["value"] == "v2"
    assert float(ops[2][2]) == gone.set_at  # deleted only if nobody set it since we saw it


def test_diff_jar_treats_an_attribute_change_and_an_expiry_as_changes() -> None:
    seen = cookie(expires=int(NOW) + 100)
    snapshot = CookieSnapshot("example.com", {seen.identity: seen})
    jar = requests.cookies.RequestsCookieJar()
    jar.set_cookie(dataclasses.replace(seen, http_only=True).to_jar())
    assert [op for op, _, _ in diff_jar(jar, "example.com", snapshot, NOW)] == ["set"]
    # The same jar after the cookie's expiry: it is gone, not rewritten.
    assert [op for op, _, _ in diff_jar(jar, "example.com", snapshot, NOW + 200)] == ["del"]


def test_parse_browser_cookies_accepts_playwright_and_puppeteer_shapes() -> None:
    entries: list[dict[str, Any]] = [
        {
            "name": "a",
            "value": "1",
            "domain": ".Example.com",
            "path": "/",
            "expires": -1,
            "httpOnly": True,
            "secure": True,
            "sameSite": "Lax",
        },
        # Puppeteer: extra keys, fractional expiry, no sameSite
        {
            "name": "b",
            "value": "2",
            "domain": "www.example.com",
            "path": "/x",
            "expires": NOW + 60.7,
            "size": 2,
            "httpOnly": False,
            "secure": False,
            "session": False,
            "priority": "Medium",
        },
        {"name": "c", "value": "3", "url": "https://www.example.com/"},
        {"name": "old", "value": "4", "domain": "www.example.com", "expires": NOW - 1},
    ]
    parsed, expired = parse_browser_cookies("www.example.com", entries, NOW)
    assert expired == 1
    assert parsed == [
        StoredCookie("a", "1", ".example.com", "/", None, True, True, "Lax", NOW),
        StoredCookie("b", "2", "www.example.com", "/x", int(NOW + 60.7), False, False, None, NOW),
        StoredCookie("c", "3", "www.example.com", "/", None, False, False, None, NOW),
    ]
    assert parsed[0].to_browser("www.example.com") == {**entries[0], "domain": ".example.com"}


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("sid=1", "is not an object"),
        ({"value": "1", "domain": "example.com"}, "'name'"),
        ({"name": "a b", "value": "1", "domain": "example.com"}, "'name'"),
        ({"name": "a", "value": 1, "domain": "example.com"}, "'value'"),
        ({"name": "a", "value": "x;y", "domain": "example.com"}, "'value'"),
        ({"name": "a", "value": "1"}, "'domain'"),
        ({"name": "a", "value": "1", "domain": "other.com"}, "is not sent to host"),
        ({"name": "a", "value": "1", "domain": "example.com", "path": "x"}, "'path'"),
        ({"name": "a", "value": "1", "domain": "example.com", "expires": "soon"}, "'expires'"),
        ({"name": "a", "value": "1", "domain": "example.com", "expires": -5}, "'expires'"),
        ({"name": "a", "value": "1", "domain": "example.com", "secure": "yes"}, "'secure'"),
        ({"name": "a", "value": "1", "domain": "example.com", "sameSite": "Loose"}, "sameSite"),
    ],
)
def test_parse_browser_cookies_rejects_bad_entries_clearly(entry: object, message: str) -> None:
    with pytest.raises(InvalidTaskInput, match=message) as caught:
        parse_browser_cookies("example.com", [entry], NOW)
    assert "cookie #0" in str(caught.value)


def test_parse_browser_cookies_wants_a_list() -> None:
    with pytest.raises(InvalidTaskInput, match="list"):
        parse_browser_cookies("example.com", {"name": "a"}, NOW)


@pytest.mark.parametrize(
    ("args", "kwargs", "host"),
    [
        ((), {"url": "https://Shop.Example.com:8443/cart"}, "shop.example.com"),
        (("sitekey", "http://example.com/login"), {}, "example.com"),
        (("sitekey",), {"url": "ftp://example.com/"}, None),
        ((42, "not a url"), {}, None),
        (("https://a.example/",), {"url": "https://b.example/"}, "b.example"),
    ],
)
def test_default_cookie_host(args: tuple[Any, ...], kwargs: dict[str, Any], host: str) -> None:
    assert SharedCookiesTask().cookie_host(args, kwargs) == host
