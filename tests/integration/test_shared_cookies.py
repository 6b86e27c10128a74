"""Shared cookies against a real redis-server and a real (loopback) site."""

from __future__ import annotations

import json
import os
import random
import stat
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
import requests
from celery import Celery
from celery.exceptions import Retry
from click.testing import CliRunner

from captcha_tasks import SharedCookiesTask
from captcha_tasks.cli.sessions import sessions_group
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.session.cookies import (
    MAX_TTL,
    SESSION_COOKIE_TTL,
    CookieStore,
    StoredCookie,
)
from captcha_tasks.settings import Settings, get_settings
from captcha_tasks.state import Keys

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

HOST = "127.0.0.1"  # where the loopback site below listens


class _Site(BaseHTTPRequestHandler):
    """``/cookie?set=<Set-Cookie value>&del=<name>`` sets and deletes cookies;
    ``.../echo`` answers with the Cookie header it received."""

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        echo = url.path.endswith("/echo")
        body = self.headers.get("Cookie", "").encode() if echo else b"ok"
        self.send_response(200)
        for value in query.get("set", []):
            self.send_header("Set-Cookie", value)
        for name in query.get("del", []):
            self.send_header("Set-Cookie", f"{name}=; Max-Age=0; Path=/")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    server = ThreadingHTTPServer((HOST, 0), _Site)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield f"http://{HOST}:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return redis.Redis.from_url(redis_url, decode_responses=True)


@pytest.fixture
def make_store(client: redis.Redis) -> Callable[..., CookieStore]:
    def make(clock: Callable[[], float] = time.time, prefix: str = "ct:") -> CookieStore:
        return CookieStore(client, Settings(key_prefix=prefix), clock=clock)

    return make


def visit(session: requests.Session, site: str, *sets: str, delete: str = "") -> str:
    params: dict[str, Any] = {"set": list(sets), "del": [delete] if delete else []}
    session.get(f"{site}/cookie", params=params, timeout=5).raise_for_status()
    return session.get(f"{site}/echo", timeout=5).text


def values(store: CookieStore, host: str = HOST) -> dict[str, str]:
    return {c.name: c.value for c in store.load(host)}


def test_attributes_survive_a_round_trip(make_store: Any, site: str) -> None:
    store = make_store()
    a = requests.Session()
    snapshot = store.apply(a, HOST)
    visit(
        a,
        site,
        "sid=abc; Path=/; Max-Age=3600; HttpOnly; SameSite=Strict",
        "pref=dark; Path=/app",
        "tok=t1; Path=/; Secure",
    )
    originals = {c.name: StoredCookie.from_jar(c) for c in a.cookies}
    assert store.merge(a, HOST, snapshot).written == 3

    b = requests.Session()
    loaded = store.apply(b, HOST)
    assert {c.name: StoredCookie.from_jar(c) for c in b.cookies} == originals
    assert all(loaded.cookies[c.identity].same_as(c) for c in originals.values())
    sid = loaded.cookies[originals["sid"].identity]
    assert (sid.http_only, sid.same_site, sid.expires is not None) == (True, "Strict", True)
    # The jar sends them as the site set them: path-scoped, Secure kept off plain http.
    assert b.get(f"{site}/echo", timeout=5).text == "sid=abc"
    assert b.get(f"{site}/app/echo", timeout=5).text == "pref=dark; sid=abc"


def test_expired_cookies_are_dropped_and_never_applied(make_store: Any, client: Any) -> None:
    now = time.time()
    writer = make_store(clock=lambda: now)
    jar = requests.Session()
    jar.cookies.set_cookie(StoredCookie("short", "1", HOST, expires=int(now) + 5).to_jar())
    jar.cookies.set_cookie(StoredCookie("long", "2", HOST, expires=int(now) + 3600).to_jar())
    assert writer.merge(jar, HOST).written == 2

    later = make_store(clock=lambda: now + 10)
    session = requests.Session()
    later.apply(session, HOST)
    assert [c.name for c in session.cookies] == ["long"]
    assert client.hkeys(Keys().cookies(HOST)) == [f"long;{HOST};/"]  # deleted from Redis too


def test_a_stale_jar_keeps_the_fresher_value_and_adds_its_new_cookies(
    make_store: Any, site: str
) -> None:
    store = make_store()
    seed = requests.Session()
    visit(seed, site, "sid=v1; Path=/", "theme=light; Path=/")
    store.merge(seed, HOST)

    a, b = requests.Session(), requests.Session()
    snap_a, snap_b = store.apply(a, HOST), store.apply(b, HOST)
    visit(b, site, "sid=v2; Path=/")  # B's login rotates the session id ...
    assert store.merge(b, HOST, snap_b).written == 1
    visit(a, site, "cart=3; Path=/")  # ... while A, still holding sid=v1, adds a cart
    result = store.merge(a, HOST, snap_a)

    assert result.written == 1 and result.stale == 0
    assert values(store) == {"sid": "v2", "theme": "light", "cart": "3"}


def test_an_older_change_arriving_later_does_not_overwrite_a_newer_one(make_store: Any) -> None:
    now = time.time()
    seen = make_store(clock=lambda: now).load(HOST)  # empty: both workers start from nothing
    assert seen == []
    late = requests.Session()
    late.cookies.set_cookie(StoredCookie("sid", "older", HOST).to_jar())
    fresh = requests.Session()
    fresh.cookies.set_cookie(StoredCookie("sid", "newer", HOST).to_jar())
    assert make_store(clock=lambda: now + 2).merge(fresh, HOST).written == 1
    result = make_store(clock=lambda: now + 1).merge(late, HOST)  # stamped before, lands after
    assert (result.written, result.stale) == (0, 1)
    assert values(make_store()) == {"sid": "newer"}


def test_concurrent_merges_end_with_the_freshest_value_of_each_cookie(make_store: Any) -> None:
    threads, rounds, names = 8, 25, ["c0", "c1", "c2"]
    base = time.time()
    rng = random.Random(7)
    stamps = [base + i / 1000 for i in range(threads * rounds)]
    rng.shuffle(stamps)  # arrival order unrelated to freshness
    plan = [(stamp, rng.sample(names, 2)) for stamp in stamps]
    barrier = threading.Barrier(threads)
    outcomes: list[tuple[int, int]] = []
    lock = threading.Lock()

    def worker(mine: list[tuple[float, list[str]]]) -> None:
        barrier.wait(timeout=10)
        for stamp, chosen in mine:
            session = requests.Session()
            for name in chosen:
                session.cookies.set_cookie(StoredCookie(name, repr(stamp), HOST).to_jar())
            result = make_store(clock=lambda stamp=stamp: stamp).merge(session, HOST)
            with lock:
                outcomes.append((result.written, result.stale))

    pool = [threading.Thread(target=worker, args=(plan[i::threads],)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=30)

    assert len(outcomes) == threads * rounds
    assert sum(w + s for w, s in outcomes) == threads * rounds * 2
    assert sum(s for _, s in outcomes) > 0  # some older writes arrived late and were refused
    freshest = {name: max(stamp for stamp, chosen in plan if name in chosen) for name in names}
    stored = {c.name: c for c in make_store(clock=lambda: base).load(HOST)}
    assert {name: c.set_at for name, c in stored.items()} == freshest
    assert {name: c.value for name, c in stored.items()} == {
        name: repr(stamp) for name, stamp in freshest.items()
    }


def test_server_side_deletion_propagates_but_not_over_a_newer_value(
    make_store: Any, site: str
) -> None:
    store = make_store()
    seed = requests.Session()
    visit(seed, site, "sid=v1; Path=/", "keep=1; Path=/")
    store.merge(seed, HOST)

    a = requests.Session()
    snap = store.apply(a, HOST)
    assert visit(a, site, delete="sid") == "keep=1"
    assert store.merge(a, HOST, snap).deleted == 1
    assert values(store) == {"keep": "1"}

    visit(seed, site, "sid=v2; Path=/")
    store.merge(seed, HOST)
    a, b = requests.Session(), requests.Session()
    snap_a, snap_b = store.apply(a, HOST), store.apply(b, HOST)
    visit(b, site, "sid=v3; Path=/")
    store.merge(b, HOST, snap_b)
    visit(a, site, delete="sid")  # A logs out the sid it saw (v2), not B's new v3
    assert store.merge(a, HOST, snap_a).stale == 1
    assert values(store) == {"keep": "1", "sid": "v3"}


def test_playwright_round_trip_and_use_in_requests(make_store: Any, site: str) -> None:
    store, mirror = make_store(), make_store(prefix="mirror:")
    expiry = int(time.time()) + 7200
    jar = requests.Session()
    for cookie in (
        StoredCookie("sid", "s" * 40, ".example.com", "/", expiry, True, True, "Strict"),
        StoredCookie("lang", "en", "www.example.com", "/docs", None, False, False, None),
    ):
        jar.cookies.set_cookie(cookie.to_jar())
    store.merge(jar, "www.example.com")
    exported = store.export_browser("www.example.com")
    assert exported == [
        {
            "name": "sid",
            "value": "s" * 40,
            "domain": ".example.com",
            "path": "/",
            "expires": expiry,
            "httpOnly": True,
            "secure": True,
            "sameSite": "Strict",
        },
        {
            "name": "lang",
            "value": "en",
            "domain": "www.example.com",
            "path": "/docs",
            "expires": -1,
            "httpOnly": False,
            "secure": False,
            "sameSite": "Lax",
        },
    ]
    assert mirror.import_browser("www.example.com", exported).written == 2
    assert mirror.export_browser("WWW.Example.com:443") == exported

    # A browser's cf_clearance is bound to its IP and user agent: never the host's to share.
    bound = {"name": "cf_clearance", "value": "b0und", "domain": HOST, "path": "/"}
    assert mirror.import_browser(HOST, [bound]).written == 0
    # What a Playwright context.cookies() call returns, used by a requests session.
    mirror.import_browser(
        HOST,
        [
            {
                "name": "shop_session",
                "value": "abc123",
                "domain": HOST,
                "path": "/",
                "expires": time.time() + 600.5,
                "httpOnly": True,
                "secure": False,
                "sameSite": "None",
            },
        ],
    )
    session = requests.Session()
    mirror.apply(session, HOST)
    assert session.get(f"{site}/echo", timeout=5).text == "shop_session=abc123"


def test_bad_playwright_input_raises_and_writes_nothing(make_store: Any, client: Any) -> None:
    store = make_store()
    good = {"name": "ok", "value": "1", "domain": "example.com"}
    with pytest.raises(InvalidTaskInput, match="cookie #1"):
        store.import_browser("example.com", [good, {"name": "x", "value": "1", "path": "/"}])
    with pytest.raises(InvalidTaskInput, match="list"):
        store.import_browser("example.com", good)
    assert not client.exists(Keys().cookies("example.com"))


def test_the_key_ttl_follows_the_latest_expiry_capped(make_store: Any, client: Any) -> None:
    store, key = make_store(), Keys().cookies("example.com")
    now = int(time.time())
    store.import_browser(
        "example.com", [{"name": "a", "value": "1", "domain": "example.com", "expires": now + 3600}]
    )
    assert 3590 <= client.ttl(key) <= 3600
    store.import_browser("example.com", [{"name": "s", "value": "1", "domain": "example.com"}])
    assert SESSION_COOKIE_TTL - 10 <= client.ttl(key) <= SESSION_COOKIE_TTL
    store.import_browser(
        "example.com",
        [{"name": "y", "value": "1", "domain": "example.com", "expires": now + 400 * 86_400}],
    )
    assert MAX_TTL - 10 <= client.ttl(key) <= MAX_TTL
    assert store.clear("example.com") == 3 and not client.exists(key)


# -- the task mixin --------------------------------------------------------------------

app = Celery("test_shared_cookies", set_as_current=False)
calls: list[dict[str, Any]] = []


@app.task(base=SharedCookiesTask, bind=True, name="tests.shared_cookies.visit")  # type: ignore[untyped-decorator]
def visit_task(
    self: Any, url: str, *, sets: tuple[str, ...] = (), fail: str = "", meet: Any = None
) -> str:
    session = self.http
    seen = session.get(f"{url}/echo", timeout=5).text
    if meet is not None:
        meet.wait(timeout=10)  # the other execution is in its body too
        assert self.http is session
    calls.append({"session": session, "seen": seen})
    if sets:
        self.http.get(f"{url}/cookie", params={"set": list(sets)}, timeout=5)
    if fail == "error":
        raise RuntimeError("boom")
    if fail == "retry":
        raise Retry("again")
    return str(seen)


@pytest.fixture
def task_store(redis_url: str) -> CookieStore:
    settings = get_settings()  # what the mixin uses: the session's Redis, flushed
    assert settings.state_url == redis_url
    return CookieStore(redis.Redis.from_url(redis_url, decode_responses=True), settings)


def test_the_mixin_loads_before_and_merges_after_the_body(task_store: Any, site: str) -> None:
    seed = requests.Session()
    visit(seed, site, "sid=one; Path=/")
    task_store.merge(seed, HOST)

    assert visit_task(site, sets=("sid=two; Path=/",)) == "sid=one"
    assert values(task_store) == {"sid": "two"}
    assert visit_task.apply(args=(site,), kwargs={"sets": ["x=1; Path=/"]}).get() == "sid=two"
    assert values(task_store) == {"sid": "two", "x": "1"}
    with pytest.raises(RuntimeError, match=r"self\.http exists only while the task runs"):
        _ = visit_task.http


@pytest.mark.parametrize(("fail", "raised"), [("error", RuntimeError), ("retry", Retry)])
def test_the_mixin_merges_when_the_body_raises(
    task_store: Any, site: str, fail: str, raised: type[Exception]
) -> None:
    with pytest.raises(raised):
        visit_task(site, sets=(f"after_{fail}=1; Path=/",), fail=fail)
    assert values(task_store) == {f"after_{fail}": "1"}


def test_the_mixin_shares_nothing_without_a_url_host(task_store: Any, client: Any) -> None:
    calls.clear()
    with pytest.raises(requests.exceptions.MissingSchema):
        visit_task("no-url")  # the body still has its session; nothing is loaded or merged
    assert client.keys("*") == []


def test_concurrent_executions_each_get_their_own_session(task_store: Any, site: str) -> None:
    calls.clear()
    meet = threading.Barrier(2)
    runs = [
        threading.Thread(
            target=visit_task, args=(site,), kwargs={"sets": (f"t{i}=1",), "meet": meet}
        )
        for i in range(2)
    ]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=20)
    assert len(calls) == 2 and calls[0]["session"] is not calls[1]["session"]
    assert values(task_store) == {"t0": "1", "t1": "1"}


# -- the CLI ---------------------------------------------------------------------------


def test_cli_masks_by_default_and_round_trips_files(
    task_store: Any, tmp_path: Path, redis_url: str
) -> None:
    runner = CliRunner()
    secret = "s3cr3t-value-0123456789"
    state = {
        "cookies": [
            {"name": "sid", "value": secret, "domain": ".example.com", "path": "/", "expires": -1},
            {"name": "ga", "value": "x", "domain": ".google.com", "path": "/", "expires": -1},
        ],
        "origins": [],
    }
    source = tmp_path / "state.json"
    source.write_text(json.dumps(state))

    done = runner.invoke(sessions_group, ["import", "www.example.com", str(source)])
    assert done.exit_code == 0, done.output
    assert "imported 1 cookies" in done.output and "1 of other domains" in done.output

    for args in (
        ["show", "www.example.com"],
        ["show", "www.example.com", "--json"],
        ["show", "www.example.com", "--playwright"],
    ):
        shown = runner.invoke(sessions_group, args)
        assert shown.exit_code == 0 and "sid" in shown.output and secret not in shown.output
    revealed = runner.invoke(sessions_group, ["show", "www.example.com", "--json", "--reveal"])
    assert secret in revealed.output

    out = tmp_path / "out.json"
    exported = runner.invoke(sessions_group, ["export", "www.example.com", "-o", str(out)])
    assert exported.exit_code == 0
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert json.loads(out.read_text())[0]["value"] == secret

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"name": "sid", "value": 3, "domain": "example.com"}]))
    failed = runner.invoke(sessions_group, ["import", "example.com", str(bad)])
    assert failed.exit_code == 1 and "'value' must be a string" in failed.output

    cleared = runner.invoke(sessions_group, ["clear", "www.example.com"])
    assert "cleared 1 shared cookies of www.example.com" in cleared.output
    assert task_store.load("www.example.com") == []
