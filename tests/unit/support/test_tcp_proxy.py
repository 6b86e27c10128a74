"""The fault suite's TCP proxy: forwards, partitions silently, heals in order, resets."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from captcha_tasks_dev.redis_server import RedisServer
from tests.support.tcp_proxy import TcpProxy


def _client(proxy: TcpProxy, timeout: float = 2.0) -> redis.Redis:
    # No retries: the test sees what one command met.
    return redis.Redis(
        port=proxy.port, socket_timeout=timeout, retry=Retry(NoBackoff(), 0), decode_responses=True
    )


@pytest.fixture
def proxy(redis_server: RedisServer, redis_url: str) -> TcpProxy:
    with TcpProxy(redis_server.port) as running:
        yield running
    assert not running._thread.is_alive()


def test_forwards_both_ways(proxy: TcpProxy) -> None:
    client = _client(proxy)
    client.set("k", "v" * 200_000)  # more than one read and one buffer's worth
    assert client.get("k") == "v" * 200_000
    assert proxy.stats.connections == 1
    # The proxy's thread counts bytes once send() returned; the client may have read
    # them before that line runs (seen: down 127407 of 200000+ right after the GET).
    deadline = time.monotonic() + 2.0
    while proxy.stats.down <= 200_000 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.stats.up > 200_000 and proxy.stats.down > 200_000


def test_pause_is_silent_and_resume_delivers_what_was_held(
    proxy: TcpProxy, redis_server: RedisServer
) -> None:
    client = _client(proxy, timeout=0.5)
    assert client.ping()
    proxy.pause()
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):  # no reply, no reset: the client's timeout
        client.incr("counter")
    assert time.monotonic() - started >= 0.45
    assert proxy.open_connections() >= 1  # nothing was closed by the proxy
    with redis_server.client() as direct:
        assert direct.get("counter") is None  # not delivered during the partition
        proxy.resume()
        # The command the client gave up on (and whose socket it closed) still runs.
        deadline = time.monotonic() + 5
        while direct.get("counter") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert direct.get("counter") == b"1"
    assert _client(proxy).incr("counter") == 2


def test_a_connection_opened_during_the_pause_is_held_too(proxy: TcpProxy) -> None:
    proxy.pause()
    got: list[object] = []
    thread = threading.Thread(target=lambda: got.append(_client(proxy, 5.0).incr("n")))
    thread.start()
    time.sleep(0.5)
    assert got == []
    proxy.resume()
    thread.join(timeout=5)
    assert got == [1]


def test_cut_resets_open_connections(proxy: TcpProxy) -> None:
    client = _client(proxy, timeout=5.0)
    met: list[BaseException] = []

    def wait() -> None:
        try:
            client.blpop(["nothing"], timeout=4)
        except redis.RedisError as exc:
            met.append(exc)

    thread = threading.Thread(target=wait)
    thread.start()
    deadline = time.monotonic() + 5
    while proxy.stats.up == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    proxy.cut()
    thread.join(timeout=5)
    assert proxy.stats.reset == 1
    assert len(met) == 1 and isinstance(met[0], redis.ConnectionError), met
    assert _client(proxy).ping()  # a new connection is served


def test_stop_closes_everything(redis_server: RedisServer, redis_url: str) -> None:
    proxy = TcpProxy(redis_server.port).start()
    clients = [_client(proxy) for _ in range(3)]
    for c in clients:
        assert c.ping()
    proxy.pause()
    proxy.stop()
    assert proxy.open_connections() == 0
    with pytest.raises(redis.ConnectionError):
        _client(proxy).ping()
