"""The proxy pool on a real redis-server: leases, heartbeats, crashes, quarantine, CLI;
and page fetches through real (loopback) SOCKS proxies."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis
import requests
from celery import Celery, signals
from click.testing import CliRunner

from captcha_tasks import PinnedProxyTask
from captcha_tasks.cli.proxies import proxies_group
from captcha_tasks.errors import ProxyRejected
from captcha_tasks.provider.classic_params import proxy_params
from captcha_tasks.session.pages import Page, fetch
from captcha_tasks.session.pinned_proxy import ProxyKeeper, current_proxy, forget_current_proxy
from captcha_tasks.session.proxies import ProxyPool, UnknownProxy, checked_proxy, proxy_url
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.state.keys import PROXY_POOL_TTL
from captcha_tasks.worker.proxy_step import ProxyLeaseStep
from captcha_tasks_dev.procs import free_port, wait_until
from tests.support.processes import SpawnPython, read_line
from tests.support.socks_proxy import SocksProxy
from tests.support.workers import ROOT

pytestmark = pytest.mark.integration

SECRET = "Zq9-very-secret"
LEASE_TTL = 1.0


@pytest.fixture
def settings(redis_url: str) -> Settings:
    base = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})
    return dataclasses.replace(base, proxy_lease_ttl=LEASE_TTL, proxy_cooldown=1.5)


@pytest.fixture
def client(settings: Settings) -> redis.Redis:
    return state_redis(settings)


@pytest.fixture
def pool(client: redis.Redis, settings: Settings) -> ProxyPool:
    return ProxyPool(client, settings)


def add_proxies(pool: ProxyPool, n: int) -> list[str]:
    return [pool.add(f"http://user{i}:{SECRET}@10.0.0.{i + 1}:3128") for i in range(n)]


def test_add_get_list_remove(pool: ProxyPool, client: redis.Redis, settings: Settings) -> None:
    first = pool.add(f"http://alice:{SECRET}@10.0.0.1:8080")
    assert pool.add(f"alice:{SECRET}-new@10.0.0.1:8080", "SOCKS5") == first  # stable id: update
    assert pool.get(first).password == f"{SECRET}-new" and pool.get(first).type == "SOCKS5"
    second = pool.add(f"10.0.0.2:1080:bob:{SECRET}")
    assert 0 < client.ttl(Keys(settings.key_prefix).proxies) <= PROXY_POOL_TTL
    views = {v.id: v for v in pool.list()}
    assert views[first].proxy == "alice:***@10.0.0.1:8080"
    assert views[second].proxy == "bob:***@10.0.0.2:1080" and views[second].holder is None
    assert pool.remove(first)
    assert not pool.remove(first)
    assert pool.ids() == [second]
    with pytest.raises(UnknownProxy):
        pool.get(first)


def test_the_password_shows_in_no_view_key_or_repr(
    pool: ProxyPool, client: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    ids = add_proxies(pool, 3)
    keeper = ProxyKeeper(pool, "w1@test", LEASE_TTL / 3).start()
    try:
        pool.report_bad(ids[1], f"refused with http://user1:{SECRET}@10.0.0.2:3128")
        shown = [repr(pool.list()), json.dumps([v.to_dict() for v in pool.list()])]
        shown += [repr(pool.get(i)) + str(pool.get(i)) for i in ids]
        shown += [repr(pool.worker_proxy("w1@test")), repr(keeper.proxy), repr(pool)]
        for text in shown:
            assert SECRET not in text
        assert "user1:***@10.0.0.2:3128" in shown[0]
        keys = [k for k in client.scan_iter("*")]
        assert keys and not any(SECRET in k for k in keys)
        for key in keys:  # only the pool hash holds credentials
            if client.type(key) == "string":
                assert SECRET not in (client.get(key) or "")
        assert SECRET not in caplog.text
    finally:
        keeper.stop()


def test_concurrent_leasing_never_hands_a_proxy_out_twice(
    pool: ProxyPool, settings: Settings, redis_url: str
) -> None:
    ids = add_proxies(pool, 6)
    # Processes and threads all lease at once: 4 processes x 6 threads for 6 proxies.
    code = textwrap.dedent(
        """
        import dataclasses, json, sys, threading
        from captcha_tasks.settings import Settings
        from captcha_tasks.state import state_redis
        from captcha_tasks.session.proxies import ProxyPool
        s = dataclasses.replace(Settings.from_env(), proxy_lease_ttl=30.0)
        pool = ProxyPool(state_redis(s), s)
        barrier, got, lock = threading.Barrier(6), {}, threading.Lock()
        def one(n):
            name = f"p{sys.argv[1]}-t{n}"
            barrier.wait()
            ident = pool.lease(name)
            with lock:
                got[name] = ident
        threads = [threading.Thread(target=one, args=(n,)) for n in range(6)]
        [t.start() for t in threads]
        [t.join() for t in threads]
        print(json.dumps(got), flush=True)
        """
    )
    env = {**os.environ, "CAPTCHA_TASKS_REDIS_URL": redis_url}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(p)], cwd=ROOT, env=env, stdout=subprocess.PIPE
        )
        for p in range(4)
    ]
    got: dict[str, str | None] = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0
        got.update(json.loads(out))
    held = [i for i in got.values() if i is not None]
    assert len(got) == 24
    assert sorted(held) == sorted(ids)  # every proxy leased, none twice
    for worker, ident in got.items():
        if ident is not None:
            assert pool.holder(ident) == worker
            assert pool.lease(worker) == ident  # a worker keeps its lease


def test_churn_in_threads_never_overlaps(pool: ProxyPool) -> None:
    add_proxies(pool, 4)
    claims: dict[str, str] = {}
    violations: list[str] = []
    mutex = threading.Lock()
    stop_at = time.monotonic() + 1.5

    def churn(worker: str) -> None:
        rng = random.Random(worker)
        while time.monotonic() < stop_at:
            ident = pool.lease(worker)
            if ident is None:
                time.sleep(0.001)
                continue
            with mutex:
                if claims.get(ident, worker) != worker:
                    violations.append(f"{ident}: {claims[ident]} and {worker}")
                claims[ident] = worker
            time.sleep(rng.random() / 200)
            assert pool.renew(worker, ident)
            with mutex:
                del claims[ident]
            assert pool.release(worker, ident)

    threads = [threading.Thread(target=churn, args=(f"w{n}",)) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not violations


def test_release_and_renew_are_owner_checked(pool: ProxyPool) -> None:
    (ident,) = add_proxies(pool, 1)
    assert pool.lease("w1") == ident
    assert pool.lease("w2") is None
    assert not pool.release("w2", ident)
    assert not pool.renew("w2", ident)
    assert pool.holder(ident) == "w1"
    assert pool.release("w1", ident)
    assert pool.worker_proxy("w1") is None
    assert pool.lease("w2") == ident


def test_renew_keeps_a_lease_and_a_lapsed_one_returns(pool: ProxyPool) -> None:
    (ident,) = add_proxies(pool, 1)
    assert pool.lease("w1") == ident
    deadline = time.monotonic() + 2.5 * LEASE_TTL
    while time.monotonic() < deadline:
        time.sleep(LEASE_TTL / 3)
        assert pool.renew("w1", ident)
        assert pool.lease("w2") is None
    time.sleep(LEASE_TTL + 0.2)  # no heartbeat: the lease lapses
    assert pool.holder(ident) is None
    assert not pool.renew("w1", ident)
    assert pool.lease("w2") == ident


class FakeWorker:
    """What a bootstep sees of a worker (hashable, as signal senders must be)."""

    def __init__(self, hostname: str) -> None:
        self.hostname = hostname
        self.app = None


HOLDER = textwrap.dedent(
    """
    import dataclasses, sys, time
    from captcha_tasks.settings import Settings
    from captcha_tasks.session.pinned_proxy import ProxyKeeper
    s = dataclasses.replace(Settings.from_env(), proxy_lease_ttl=float(sys.argv[1]))
    keeper = ProxyKeeper.from_settings(s, "doomed@test").start()
    print(keeper.proxy_id, flush=True)
    while True:
        time.sleep(1)
    """
)


def test_a_killed_holders_proxy_returns_within_the_lease_ttl(
    pool: ProxyPool, spawn: SpawnPython
) -> None:
    (ident,) = add_proxies(pool, 1)
    proc = spawn(HOLDER, str(LEASE_TTL))
    assert read_line(proc, 30) == ident
    time.sleep(2.5 * LEASE_TTL)  # its heartbeat keeps the lease past its TTL
    assert pool.holder(ident) == "doomed@test"
    assert pool.lease("survivor") is None

    proc.kill()  # SIGKILL: no release
    proc.wait(timeout=10)
    killed_at = time.monotonic()
    while pool.lease("survivor") is None:
        assert time.monotonic() - killed_at < LEASE_TTL + 0.5, "proxy never came back"
        time.sleep(0.02)
    assert pool.holder(ident) == "survivor"


def test_quarantine_moves_the_holder_and_excludes_the_proxy(
    pool: ProxyPool, settings: Settings
) -> None:
    ids = add_proxies(pool, 2)
    keeper = ProxyKeeper(pool, "w1", LEASE_TTL / 3).start()
    try:
        bad = keeper.proxy_id
        assert bad in ids
        assert pool.report_bad(bad, "HTTP 407") == "w1"
        assert pool.holder(bad) is None and pool.quarantined(bad)
        view = next(v for v in pool.list() if v.id == bad)
        assert view.quarantined and view.quarantine_reason == "HTTP 407"
        left = view.quarantine_seconds_left
        assert left is not None and 0 < left <= settings.proxy_cooldown
        # The heartbeat finds the lease gone and moves to the other proxy.
        wait_until(lambda: keeper.proxy_id not in (None, bad), timeout=5, what="re-lease")
        good = keeper.proxy_id
        keeper.stop()
        assert pool.lease("w2") == good  # the quarantined one is not handed out
        assert pool.lease("w3") is None
        # After the cooldown (w2 kept alive meanwhile) the proxy is handed out again.
        wait_until(
            lambda: pool.renew("w2", str(good)) and pool.lease("w3") == bad,
            timeout=settings.proxy_cooldown + 2,
            what="the end of the quarantine",
        )
        assert not pool.quarantined(bad)
    finally:
        keeper.stop()
    with pytest.raises(UnknownProxy):
        pool.report_bad("nope")


def test_a_removed_proxy_is_dropped_by_its_holder(pool: ProxyPool) -> None:
    ids = add_proxies(pool, 2)
    keeper = ProxyKeeper(pool, "w1", LEASE_TTL / 3).start()
    try:
        first = keeper.proxy_id
        assert pool.remove(str(first))
        wait_until(lambda: keeper.proxy_id not in (None, first), timeout=5, what="re-lease")
        assert keeper.proxy_id == next(i for i in ids if i != first)
    finally:
        keeper.stop()


def test_the_bootstep_leases_heartbeats_and_releases(
    pool: ProxyPool, settings_env: Callable[..., None], redis_url: str
) -> None:
    settings_env(CAPTCHA_TASKS_REDIS_URL=redis_url, CAPTCHA_TASKS_PROXY_LEASE_TTL=str(LEASE_TTL))
    worker = FakeWorker("step1@test")
    step = ProxyLeaseStep(worker)
    step.start(worker)  # empty pool: runs without a proxy
    try:
        assert step.keeper is not None and step.keeper.proxy_id is None
        assert current_proxy("step1@test") is None
        (ident,) = add_proxies(pool, 1)
        wait_until(lambda: pool.holder(ident) == "step1@test", timeout=5, what="lease")
        forget_current_proxy()
        proxy = current_proxy("step1@test")
        assert proxy is not None and proxy.password == SECRET
        time.sleep(2.5 * LEASE_TTL)
        assert pool.holder(ident) == "step1@test"  # heartbeats keep it

        # A task in this worker sees it through the mixin.
        app = Celery("step-test", broker="memory://", set_as_current=False)

        @app.task(base=PinnedProxyTask, bind=True, name="t.fetch", shared=False)
        def fetch(self: Any) -> Any:
            session = requests.Session()
            self.use_proxy(session, required=True)
            return self.proxy_id, session.proxies["https"]

        fetch.push_request(hostname="step1@test")
        try:
            got_id, url = fetch.run()
        finally:
            fetch.pop_request()
            app.close()
        assert got_id == ident and url == f"http://user0:{SECRET}@10.0.0.1:3128"

        step.stop(worker)  # warm shutdown: kept while the pool drains
        assert pool.holder(ident) == "step1@test"
        signals.worker_shutdown.send(sender=worker)  # the pool has drained
        assert pool.holder(ident) is None and step.keeper is None
    finally:
        step.terminate(worker)

    step.start(worker)  # a cold shutdown releases at once
    assert pool.holder(ident) == "step1@test"
    step.terminate(worker)
    assert pool.holder(ident) is None


def test_cli_manages_the_pool(
    pool: ProxyPool, settings: Settings, settings_env: Callable[..., None], redis_url: str
) -> None:
    settings_env(CAPTCHA_TASKS_REDIS_URL=redis_url, CAPTCHA_TASKS_PROXY_COOLDOWN="60")
    env = {"CAPTCHA_TASKS_REDIS_URL": redis_url}
    runner = CliRunner()
    outputs: list[str] = []

    def cli(*args: str, code: int = 0, stdin: str | None = None) -> str:
        result = runner.invoke(proxies_group, list(args), env=env, input=stdin)
        assert result.exit_code == code, result.output
        outputs.append(result.output)
        return result.output

    first = cli("add", f"http://alice:{SECRET}@10.0.0.1:8080").split()[0]
    second = cli("add", "--type", "socks5", f"bob:{SECRET}@proxy.example.com:1080").split()[0]
    third = cli("add", "-", stdin=f"10.0.0.3:3128:carol:{SECRET}\n").split()[0]
    assert pool.get(second).type == "SOCKS5" and pool.get(third).username == "carol"
    cli("add", "http://alice:pw@bad host:1", code=2)
    long_lease = ProxyPool(pool.client, dataclasses.replace(settings, proxy_lease_ttl=60.0))
    leased = long_lease.lease("w1@test")
    assert leased in (first, second, third)

    table = cli("list")
    assert "alice:***@10.0.0.1:8080" in table and "bob:***@proxy.example.com:1080" in table
    assert "w1@test" in table
    reported = cli("report-bad", second, "--reason", "slow")
    assert reported.startswith(f"quarantined {second} for 60 s")
    assert ("taken from w1@test" in reported) == (leased == second)
    rows = {row["id"]: row for row in json.loads(cli("list", "--json"))}
    assert set(rows) == {first, second, third}
    assert rows[second]["quarantined"] and rows[second]["quarantine_reason"] == "slow"
    assert rows[first]["proxy"] == "alice:***@10.0.0.1:8080"
    holders = {i for i, r in rows.items() if r["holder"] == "w1@test"}
    assert holders == (set() if leased == second else {leased})
    assert "quarantined" in cli("list")

    assert cli("remove", first) == f"removed {first}\n"
    cli("remove", first, code=1)
    cli("report-bad", first, code=1)
    assert first not in cli("list")
    for out in outputs:
        assert SECRET not in out


def test_a_task_reports_its_proxy_bad_and_the_worker_moves_on(
    pool: ProxyPool, settings_env: Callable[..., None], redis_url: str
) -> None:
    settings_env(CAPTCHA_TASKS_REDIS_URL=redis_url, CAPTCHA_TASKS_PROXY_LEASE_TTL=str(LEASE_TTL))
    add_proxies(pool, 2)
    keeper = ProxyKeeper(pool, "w1@test", LEASE_TTL / 3).start()
    app = Celery("report-test", broker="memory://", set_as_current=False)

    @app.task(base=PinnedProxyTask, bind=True, name="t.fetch", shared=False)
    def fetch(self: Any) -> Any:
        before = self.proxy_id
        return before, self.report_bad_proxy(f"HTTP 407 via {self.proxy}")

    try:
        forget_current_proxy()
        fetch.push_request(hostname="w1@test")
        try:
            bad, new = fetch.run()
        finally:
            fetch.pop_request()
        assert bad == keeper.proxy_id and new not in (None, bad)
        assert pool.quarantined(bad) and pool.holder(new) == "w1@test"
        reason = next(v.quarantine_reason for v in pool.list() if v.id == bad)
        assert reason is not None and "HTTP 407" in reason and SECRET not in reason
        wait_until(lambda: keeper.proxy_id == new, timeout=5, what="the keeper to follow")
        assert pool.holder(new) == "w1@test"
    finally:
        keeper.stop()
        app.close()


# -- page fetches through SOCKS proxies (tests/support/socks_proxy.py, loopback only) ---------

SOCKS_USER = "sockuser"
SOCKS_PASSWORD = "S0cks-Pa55word"


@pytest.fixture
def socks() -> Iterator[SocksProxy]:
    with SocksProxy(username=SOCKS_USER, password=SOCKS_PASSWORD) as proxy:
        yield proxy


def _fetch_via(proxy_url_: str, url: str, host: str) -> Page:
    settings = Settings.from_env({"CAPTCHA_TASKS_ALLOWED_DOMAINS": host})
    with requests.Session() as session:
        session.proxies.update({"http": proxy_url_, "https": proxy_url_})
        return fetch(session, url, settings)


def _demo_host(sandbox: Any) -> str:
    return str(sandbox.demo_url.split("//")[1])


@pytest.mark.parametrize("scheme", ["socks5", "socks5h"])
def test_pages_are_fetched_through_a_socks5_proxy_with_credentials(
    demo_sandbox: Any, socks: SocksProxy, scheme: str
) -> None:
    host = _demo_host(demo_sandbox)
    # As the pool hands it to a worker: parsed, checked, and turned into requests' URL.
    proxy = checked_proxy(socks.url(scheme))
    assert proxy.type == "SOCKS5" and proxy_params(proxy)["proxytype"] == "SOCKS5"
    page = _fetch_via(proxy_url(proxy), f"{demo_sandbox.demo_url}/page/socks", host)
    assert page.status == 200 and 'class="g-recaptcha"' in page.text
    assert demo_sandbox.demo.stats()["challenges"] == 1
    (tunnel,) = socks.tunnels  # the page came through the proxy, authenticated
    assert tunnel.method == "userpass" and tunnel.username == SOCKS_USER and tunnel.auth_ok
    assert tunnel.target == ("127.0.0.1", int(host.split(":")[1]))


def test_socks_proxies_without_credentials_and_socks4(demo_sandbox: Any) -> None:
    host = _demo_host(demo_sandbox)
    with SocksProxy() as open_proxy:
        for url in (open_proxy.url("socks5"), open_proxy.url("socks4")):
            page = _fetch_via(
                proxy_url(checked_proxy(url)), f"{demo_sandbox.demo_url}/page/a", host
            )
            assert page.status == 200
        assert [(h.version, h.method) for h in open_proxy.tunnels] == [(5, "none"), (4, "userid")]
        assert open_proxy.connections == 2


def test_names_are_resolved_by_the_socks_proxy(demo_sandbox: Any) -> None:
    # socks5h/socks4a (what the pool builds): the proxy gets the name, not an address.
    port = int(_demo_host(demo_sandbox).split(":")[1])
    with SocksProxy() as open_proxy:
        for kind in ("SOCKS5", "SOCKS4"):
            url = proxy_url(checked_proxy(open_proxy.url("socks5"), kind))
            with requests.Session() as session:
                session.proxies.update({"http": url})
                assert session.get(f"http://localhost:{port}/healthz", timeout=10).ok
        targets = [(h.version, h.address_type, h.target) for h in open_proxy.tunnels]
    assert targets == [(5, "domain", ("localhost", port)), (4, "domain", ("localhost", port))]


@pytest.mark.parametrize(
    ("make_url", "code", "fragment"),
    [
        (lambda p: p.url(password="wrong-password"), "PROXY_AUTH_FAILED", "username or password"),
        (lambda p: p.url(username="nobody"), "PROXY_AUTH_FAILED", "username or password"),
        (
            lambda p: f"socks5h://{SOCKS_USER}:{SOCKS_PASSWORD}@127.0.0.1:{free_port()}",
            "PROXY_CONNECTION_FAILED",
            "cannot connect to the proxy",
        ),
        (
            lambda p: f"http://{SOCKS_USER}:{SOCKS_PASSWORD}@127.0.0.1:{free_port()}",
            "PROXY_CONNECTION_FAILED",
            "cannot connect to the proxy",
        ),
    ],
)
def test_a_proxy_failure_is_a_typed_error_without_the_password(
    demo_sandbox: Any,
    socks: SocksProxy,
    make_url: Callable[[SocksProxy], str],
    code: str,
    fragment: str,
) -> None:
    url = make_url(socks)
    with pytest.raises(ProxyRejected) as info:
        _fetch_via(url, f"{demo_sandbox.demo_url}/page/x", _demo_host(demo_sandbox))
    error = info.value
    assert error.code == code and fragment in str(error)
    assert not isinstance(error, requests.RequestException)
    assert error.__cause__ is None and error.__suppress_context__
    for text in (str(error), repr(error), repr(error.args)):
        assert SOCKS_PASSWORD not in text and "wrong-password" not in text
    assert f"{SOCKS_USER}:***@" in str(error) or "nobody:***@" in str(error)
    assert demo_sandbox.demo.stats()["challenges"] == 0
    if code == "PROXY_AUTH_FAILED":
        assert [h.auth_ok for h in socks.handshakes] == [False] and not socks.tunnels


def test_a_target_the_proxy_cannot_reach_is_a_typed_error(socks: SocksProxy) -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(ProxyRejected) as info:
        _fetch_via(socks.url(), f"http://127.0.0.1:{port}/", f"127.0.0.1:{port}")
    assert info.value.code == "PROXY_CONNECT_REFUSED"
    assert f"could not connect to 127.0.0.1:{port}" in str(info.value)
    assert SOCKS_PASSWORD not in repr(info.value.args)


def test_the_socks_double_is_bounded_and_stops_everything() -> None:
    proxy = SocksProxy(max_connections=2, timeout=5).start()
    idle = [socket.create_connection(("127.0.0.1", proxy.port), timeout=5) for _ in range(3)]
    try:
        wait_until(
            lambda: proxy.connections + proxy.turned_away == 3, timeout=5, what="three connections"
        )
        assert (proxy.connections, proxy.turned_away) == (2, 1)
    finally:
        proxy.stop()  # closes the two half-open handshakes and joins their threads
        for sock in idle:
            sock.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("socks-")]
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=1).close()
