"""The proxy pool's plain parts: ids, masking, URLs, the heartbeat logic, the task mixin."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import requests
from celery import Celery

from captcha_tasks import PinnedProxyTask
from captcha_tasks.errors import InvalidTaskInput, TargetNotAllowed
from captcha_tasks.provider.classic_params import proxy_params
from captcha_tasks.provider.proxy import Proxy
from captcha_tasks.session import pinned_proxy
from captcha_tasks.session.pages import check_url
from captcha_tasks.session.pinned_proxy import ProxyKeeper
from captcha_tasks.session.proxies import (
    SCHEMES,
    NoProxyAvailable,
    ProxyView,
    UnknownProxy,
    _from_record,
    _record,
    _worker,
    checked_proxy,
    masked,
    proxy_id,
    proxy_url,
)
from captcha_tasks.settings import Settings

SECRET = "s3cr3t-Pa55"


def test_ids_are_stable_short_and_free_of_credentials() -> None:
    a = Proxy.parse(f"http://alice:{SECRET}@Proxy.Example.com:8080")
    same = Proxy.parse("socks5://alice:other@proxy.example.com:8080")
    assert proxy_id(a) == proxy_id(same)  # the password and type do not change the id
    assert len(proxy_id(a)) == 12 and int(proxy_id(a), 16) >= 0
    assert proxy_id(a) != proxy_id(Proxy.parse(f"bob:{SECRET}@proxy.example.com:8080"))
    assert proxy_id(a) != proxy_id(Proxy.parse(f"alice:{SECRET}@proxy.example.com:8081"))
    assert SECRET not in proxy_id(a)


def test_masked_forms_never_show_the_password() -> None:
    proxy = Proxy.parse(f"alice:{SECRET}@10.0.0.1:3128")
    assert masked(proxy) == "alice:***@10.0.0.1:3128"
    assert masked(Proxy.parse("10.0.0.1:3128")) == "10.0.0.1:3128"
    view = ProxyView("abc", "HTTP", masked(proxy), "w1", quarantined=False)
    for text in (str(proxy), repr(proxy), repr(view), str(view.to_dict())):
        assert SECRET not in text


def test_records_round_trip_with_credentials() -> None:
    proxy = Proxy.parse(f"10.0.0.1:3128:alice:{SECRET}", "SOCKS5")
    back = _from_record(_record(proxy))
    assert back == proxy and back.password == SECRET and back.type == "SOCKS5"


@pytest.mark.parametrize(
    ("kind", "scheme"),
    [("HTTP", "http"), ("HTTPS", "https"), ("SOCKS4", "socks4a"), ("SOCKS5", "socks5h")],
)
def test_requests_url_carries_quoted_credentials(kind: str, scheme: str) -> None:
    proxy = Proxy("proxy.example.com", 1080, kind, "al/ice", "p:w%d")  # type: ignore[arg-type]
    assert proxy_url(proxy) == f"{scheme}://al%2Fice:p%3Aw%25d@proxy.example.com:1080"
    assert proxy_url(Proxy("::1", 8080)) == "http://[::1]:8080"


TAKEN = [
    (f"socks5://alice:{SECRET}@10.0.0.1:1080", "SOCKS5", "socks5h"),
    (f"socks5h://alice:{SECRET}@10.0.0.1:1080", "SOCKS5", "socks5h"),
    (f"SOCKS5H://alice:{SECRET}@10.0.0.1:1080", "SOCKS5", "socks5h"),
    ("socks5://10.0.0.1:1080", "SOCKS5", "socks5h"),
    ("socks4://10.0.0.1:1080", "SOCKS4", "socks4a"),
    ("socks4a://10.0.0.1:1080", "SOCKS4", "socks4a"),
    (f"http://alice:{SECRET}@10.0.0.1:3128", "HTTP", "http"),
    (f"https://alice:{SECRET}@10.0.0.1:3128", "HTTPS", "https"),
    (f"10.0.0.1:3128:alice:{SECRET}", "HTTP", "http"),
]


def test_every_scheme_the_pool_takes_is_tested() -> None:
    assert set(SCHEMES) == {url.split("://")[0].lower() for url, _, _ in TAKEN if "://" in url}


@pytest.mark.parametrize(("url", "kind", "scheme"), TAKEN)
def test_every_scheme_the_pool_takes_works_for_fetches_and_the_provider(
    url: str, kind: str, scheme: str
) -> None:
    proxy = checked_proxy(url)
    assert proxy.type == kind
    # Page fetches: the URL requests gets (SOCKS names resolved by the proxy).
    assert proxy_url(proxy).startswith(f"{scheme}://")
    # The provider: in.php's proxytype, one of the four it knows.
    assert proxy_params(proxy)["proxytype"] == kind
    assert requests.adapters.HTTPAdapter().proxy_manager_for(proxy_url(proxy)) is not None


@pytest.mark.parametrize(
    ("url", "kind", "fragment"),
    [
        (f"ftp://alice:{SECRET}@10.0.0.1:21", None, "scheme ftp:// is not supported"),
        (f"socks6://alice:{SECRET}@10.0.0.1:1080", None, "scheme socks6:// is not supported"),
        (f"gopher+x-y.z://alice:{SECRET}@h:1", None, "is not supported"),
        (f"a-very-long-scheme-name://alice:{SECRET}@h:1", None, "unreadable scheme"),
        (f"socks4://alice:{SECRET}@10.0.0.1:1080", None, "SOCKS4 has no password"),
        (f"alice:{SECRET}@10.0.0.1:1080", "SOCKS4", "SOCKS4 has no password"),
    ],
)
def test_proxies_the_workers_could_not_use_are_refused_by_name(
    url: str, kind: str | None, fragment: str
) -> None:
    with pytest.raises(InvalidTaskInput) as info:
        checked_proxy(url, kind)
    text = str(info.value) + repr(info.value) + repr(info.value.args)
    assert fragment in text and SECRET not in text
    if "scheme" in fragment:
        for scheme in ("http://", "https://", "socks4://", "socks5://", "socks5h://"):
            assert scheme in str(info.value)  # names what is allowed
    with pytest.raises(InvalidTaskInput):
        checked_proxy(Proxy("10.0.0.1", 1080, "SOCKS4", "alice", SECRET))


def test_a_refused_target_never_shows_a_url_password_even_cut_short() -> None:
    settings = Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": "example.com"})
    long_password = "Lp" + "x" * 120  # longer than the 80 characters a message quotes
    for url in (
        f"http://user:{SECRET}@example.com/page",
        f"https://user:{long_password}@example.com/page",
        f"http://user:{SECRET}@example.com:99999/",
        f"http://user:pa/{SECRET}@example.com/",  # a password with '/': host "user"
    ):
        with pytest.raises(TargetNotAllowed) as info:
            check_url(url, settings)
        text = str(info.value) + repr(info.value) + repr(info.value.args)
        assert SECRET not in text and long_password[:10] not in text, text
        assert "user:***@" in text or "not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS" in text


def test_worker_names_are_checked() -> None:
    assert _worker("celery@host-1") == "celery@host-1"
    for bad in ("", "a\nb", "x" * 300):
        with pytest.raises(InvalidTaskInput):
            _worker(bad)


def test_unknown_proxy_reads_like_the_other_errors() -> None:
    err = UnknownProxy("no proxy with id 'abc' in the pool")
    assert str(err) == "UNKNOWN_PROXY: no proxy with id 'abc' in the pool"
    assert isinstance(err, KeyError)


class FakePool:
    """Stands in for ProxyPool: one proxy, leases granted while ``free``."""

    def __init__(self) -> None:
        self.proxy = Proxy.parse(f"alice:{SECRET}@10.0.0.1:3128")
        self.free = True
        self.renewals = 0
        self.renew_ok = True
        self.released: list[tuple[str, str]] = []

    def lease(self, worker: str) -> str | None:
        return "p1" if self.free else None

    def renew(self, worker: str, ident: str) -> bool:
        self.renewals += 1
        return self.renew_ok

    def release(self, worker: str, ident: str) -> bool:
        self.released.append((worker, ident))
        return True

    def get(self, ident: str) -> Proxy:
        return self.proxy

    def ids(self) -> list[str]:
        return ["p1"]


def test_keeper_renews_releases_and_re_leases(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    pool = FakePool()
    keeper = ProxyKeeper(pool, "w1", interval=60)  # type: ignore[arg-type]
    assert keeper.tick() == "p1" and keeper.proxy == pool.proxy
    assert keeper.tick() == "p1" and pool.renewals == 1
    pool.renew_ok, pool.free = False, False  # lost, and nothing free
    assert keeper.tick() is None and keeper.proxy is None
    assert keeper.tick() is None  # keeps trying, says it once
    assert sum("no free proxy" in r.getMessage() for r in caplog.records) == 1
    pool.free = True
    assert keeper.tick() == "p1"
    keeper.stop()
    assert pool.released == [("w1", "p1")] and keeper.proxy_id is None
    assert SECRET not in caplog.text
    assert "alice:***@10.0.0.1:3128" in caplog.text


def make_app() -> Celery:
    return Celery("proxy-unit", broker="memory://", set_as_current=False)


def test_mixin_without_a_worker_or_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()

    @app.task(base=PinnedProxyTask, bind=True, name="t.fetch", shared=False)
    def fetch(self: Any) -> Any:
        return self.proxy_id

    monkeypatch.setattr(pinned_proxy, "_held", lambda hostname, settings=None: None)
    fetch.push_request(hostname="w1@test")
    try:
        assert fetch.run() is None
        session = requests.Session()
        session.proxies["http"] = "http://stale:1"
        assert fetch.use_proxy(session) is None
        assert "http" not in session.proxies
        with pytest.raises(NoProxyAvailable):
            fetch.use_proxy(session, required=True)
    finally:
        fetch.pop_request()
        app.close()


def test_mixin_points_a_session_at_the_worker_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    app = make_app()
    proxy = Proxy.parse(f"alice:{SECRET}@10.0.0.1:3128")
    seen: list[str] = []

    def held(hostname: str, settings: object = None) -> tuple[str, Proxy]:
        seen.append(hostname)
        return "p1", proxy

    @app.task(base=PinnedProxyTask, bind=True, name="t.fetch", shared=False)
    def fetch(self: Any) -> Any:
        return self.proxy_id

    monkeypatch.setattr(pinned_proxy, "_held", held)
    fetch.push_request(hostname="w1@test")
    try:
        assert fetch.run() == "p1"
        session = requests.Session()
        assert fetch.use_proxy(session) == proxy
        url = f"http://alice:{SECRET}@10.0.0.1:3128"
        assert session.proxies["http"] == session.proxies["https"] == url
        assert SECRET not in repr(fetch.proxy)
    finally:
        fetch.pop_request()
        app.close()
    assert set(seen) == {"w1@test"}
