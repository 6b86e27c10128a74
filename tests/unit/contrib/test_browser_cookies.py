"""Cookies between a browser context and the shared jar: the pure diff, the store's merge
and contrib.playwright's snapshots per context, with a stand-in context (no browser)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from captcha_tasks.contrib import playwright as pw
from captcha_tasks.errors import TargetNotAllowed
from captcha_tasks.session.cookie_model import CookieSnapshot, StoredCookie
from captcha_tasks.session.cookies import CookieStore, browser_jar, diff_browser
from captcha_tasks.settings import Settings
from captcha_tasks.state import state_redis

NOW = 1_750_000_000.0
HOST = "shop.example.com"


def entry(**fields: Any) -> dict[str, Any]:
    """One cookie as Playwright's ``context.cookies()`` reports it."""
    base: dict[str, Any] = {
        "name": "sid",
        "value": "v1",
        "domain": HOST,
        "path": "/",
        "expires": -1,
        "httpOnly": True,
        "secure": False,
        "sameSite": "Lax",
    }
    return {**base, **fields}


def test_browser_jar_takes_what_the_host_is_sent_and_says_what_it_refused() -> None:
    cookies = [
        entry(),
        entry(name="wide", domain=".example.com", path="/cart"),
        entry(name="other", domain="other.com"),
        entry(name="sibling", domain="www.example.com"),
        entry(name="chips", partitionKey="https://example.com"),
        entry(name="old", expires=NOW - 1),
        entry(name="bad", sameSite="Loose"),
    ]
    kept, refused = browser_jar(HOST, cookies, NOW)
    assert sorted(kept) == ["sid;shop.example.com;/", "wide;.example.com;/cart"]
    assert all(c.set_at == NOW for c in kept.values())
    assert len(refused) == 1 and "'bad'" in refused[0] and "sameSite" in refused[0]


def test_diff_browser_sets_what_changed_and_deletes_what_went() -> None:
    seen = {
        "same": StoredCookie("same", "1", HOST, expires=int(NOW) + 100, set_at=NOW - 50),
        "changed": StoredCookie("changed", "1", HOST, set_at=NOW - 50),
        "gone": StoredCookie("gone", "1", HOST, set_at=NOW - 40),
        "refreshed": StoredCookie("refreshed", "1", HOST, expires=int(NOW) + 10, set_at=NOW),
    }
    snapshot = CookieSnapshot(HOST, {c.identity: c for c in seen.values()})
    current = {
        # As a browser reports it: sameSite spelled out, a fraction of a second off.
        "same": dataclasses.replace(seen["same"], same_site="Lax", expires=int(NOW) + 101),
        "changed": dataclasses.replace(seen["changed"], value="2"),
        "refreshed": dataclasses.replace(seen["refreshed"], expires=int(NOW) + 3600),
        "new": StoredCookie("new", "1", HOST),
    }
    ops = diff_browser({c.identity: c for c in current.values()}, snapshot)
    assert [(op, field.split(";")[0]) for op, field, _ in ops] == [
        ("set", "changed"),
        ("set", "new"),
        ("set", "refreshed"),
        ("del", "gone"),
    ]
    assert float(ops[-1][2]) == NOW - 40  # only the version the browser saw
    assert json.loads(ops[0][2])["value"] == "2"


#: The stand-in context's site: an address, so that the allowlist check needs no DNS.
SITE = "127.0.0.1"


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings.from_env(
        {"CAPTCHA_TASKS_REDIS_URL": redis_url, "CAPTCHA_TASKS_ALLOWED_DOMAINS": SITE}
    )


@pytest.fixture
def store(redis_url: str, settings: Settings) -> CookieStore:
    """The store the helper writes through (the process's client, so one Redis clock):
    the tests order a worker's write and the browser's by less than a millisecond, and
    two clients' estimates of Redis's clock can differ by more (up to their round trips,
    more under load), which would order such writes either way."""
    return CookieStore(state_redis(settings), settings)


def site_entry(**fields: Any) -> dict[str, Any]:
    return entry(**{"domain": SITE, **fields})


class FakeContext:
    """What the helpers use of a Playwright ``BrowserContext``."""

    def __init__(self) -> None:
        self.jar: dict[tuple[str, str, str], dict[str, Any]] = {}

    async def cookies(self) -> list[dict[str, Any]]:
        return [dict(c) for c in self.jar.values()]

    async def add_cookies(self, cookies: list[dict[str, Any]]) -> None:
        for c in cookies:
            self.jar[(c["name"], c["domain"], c["path"])] = dict(c)

    def set(self, **fields: Any) -> None:
        c = site_entry(**fields)
        self.jar[(c["name"], c["domain"], c["path"])] = c

    def delete(self, name: str) -> None:
        self.jar = {k: v for k, v in self.jar.items() if k[0] != name}


def values(store: CookieStore) -> dict[str, str]:
    return {c.name: c.value for c in store.load(SITE)}


def test_export_writes_only_what_the_browser_changed_since_it_was_given_the_jar(
    store: CookieStore, settings: Settings
) -> None:
    context = FakeContext()
    context.set(name="mine", value="b1")
    context.set(name="sid", value="b1")
    url = f"http://{SITE}:8080/cart"

    async def scenario() -> list[int]:
        counts = [await pw.export_cookies(context, url, settings=settings)]  # all new: 2
        store.import_browser(SITE, [site_entry(name="sid", value="worker")])  # a worker's login
        counts.append(await pw.import_cookies(context, url, settings=settings))  # 2 cookies
        # A worker refreshes sid again; the browser only touches its own cookie.
        store.import_browser(SITE, [site_entry(name="sid", value="worker2")])
        context.set(name="mine", value="b2")
        counts.append(await pw.export_cookies(context, url, settings=settings))  # mine only
        counts.append(await pw.export_cookies(context, url, settings=settings))  # nothing
        context.delete("mine")
        counts.append(await pw.export_cookies(context, url, settings=settings))  # a delete
        return counts

    assert asyncio.run(scenario()) == [2, 2, 1, 0, 0]
    assert values(store) == {"sid": "worker2"}  # the browser's older sid did not win


def test_a_context_that_never_imported_exports_everything_and_deletes_nothing(
    store: CookieStore, settings: Settings
) -> None:
    store.import_browser(SITE, [site_entry(name="kept", value="1")])
    context = FakeContext()
    context.set(name="sid", value="b")
    context.set(name="elsewhere", domain="example.com")
    assert asyncio.run(pw.export_cookies(context, SITE, settings=settings)) == 1
    assert values(store) == {"kept": "1", "sid": "b"}


@pytest.mark.parametrize("target", ["127.0.0.2", "https://example.org/", "ftp://127.0.0.1/"])
def test_hosts_off_the_allowlist_are_refused_before_redis_is_touched(
    store: CookieStore, settings: Settings, target: str
) -> None:
    store.import_browser(SITE, [site_entry(name="secret", value="1")])
    context = FakeContext()
    with pytest.raises(TargetNotAllowed):
        asyncio.run(pw.import_cookies(context, target, settings=settings))
    with pytest.raises(TargetNotAllowed):
        asyncio.run(pw.export_cookies(context, target, settings=settings))
    assert context.jar == {}
