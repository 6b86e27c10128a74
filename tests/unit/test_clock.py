"""Redis's clock for what workers compare, the host's (with the test offset) for the rest."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
import requests

from captcha_tasks.engine import admit
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.session import parking
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.state import clock as clock_module
from captcha_tasks.state.clock import TEST_CLOCK_OFFSET_ENV, RedisClock, clock_of, local_time


class FakeRedis:
    """``time()`` answers ``now`` (seconds), or raises ``error``; counts the calls."""

    def __init__(self, now: float) -> None:
        self.now = now
        self.error: Exception | None = None
        self.calls = 0
        self.delay = 0.0
        self.mono: list[float] | None = None

    def time(self) -> tuple[int, int]:
        self.calls += 1
        if self.error is not None:
            raise self.error
        if self.mono is not None:
            self.mono[0] += self.delay
        return int(self.now), round((self.now % 1) * 1e6)


class Mono:
    def __init__(self) -> None:
        self.value = [1000.0]

    def __call__(self) -> float:
        return self.value[0]


@pytest.fixture
def skewed_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[float]:
    """This process's clock 30 s ahead, as the fault suite's skewed worker's."""
    monkeypatch.setenv(TEST_CLOCK_OFFSET_ENV, "30")
    clock_module._test_offset.cache_clear()
    yield 30.0
    monkeypatch.delenv(TEST_CLOCK_OFFSET_ENV)
    clock_module._test_offset.cache_clear()


def test_the_test_offset_moves_the_hosts_clock_only(skewed_host: float) -> None:
    assert local_time() - time.time() == pytest.approx(skewed_host, abs=0.05)


def test_redis_time_carried_by_the_monotonic_clock() -> None:
    fake, mono = FakeRedis(5000.25), Mono()
    clock = RedisClock(fake, monotonic=mono, fallback=lambda: -1.0)  # type: ignore[arg-type]
    assert clock() == pytest.approx(5000.25)  # the first call reads it
    mono.value[0] += 2.5
    assert clock() == pytest.approx(5002.75) and fake.calls == 1


def test_before_redis_answers_the_hosts_clock_and_no_storm() -> None:
    fake, mono = FakeRedis(5000.0), Mono()
    fake.error = redis.ConnectionError("away")
    clock = RedisClock(fake, monotonic=mono, fallback=lambda: 42.0)  # type: ignore[arg-type]
    assert clock() == 42.0 and clock() == 42.0
    assert fake.calls == 1  # tried again only after a second
    mono.value[0] += 1.5
    fake.error = None
    assert clock() == pytest.approx(5000.0) and clock.synced


def test_read_again_in_the_background_and_a_slow_reading_is_not_trusted() -> None:
    fake, mono = FakeRedis(5000.0), Mono()
    clock = RedisClock(fake, monotonic=mono, resync=30.0)  # type: ignore[arg-type]
    clock()
    mono.value[0] += 31.0
    fake.now = 5031.5  # Redis's clock moved half a second more than ours
    fake.mono, fake.delay = mono.value, 2.0  # and this reading takes 2 s
    clock()
    _wait_reader()
    assert fake.calls == 2
    assert clock() == pytest.approx(5000.0 + 31.0 + 2.0)  # kept the first reading
    fake.delay = 0.0
    mono.value[0] += 1.0  # retried a second later
    clock()
    _wait_reader()
    assert clock() == pytest.approx(5031.5)


def _wait_reader() -> None:
    for thread in threading.enumerate():
        if thread.name == "redis-clock":
            thread.join(timeout=5)


def test_one_clock_per_client_and_it_is_redis(redis_url: str, skewed_host: float) -> None:
    client = redis.Redis.from_url(redis_url)
    clock = clock_of(client)
    assert clock_of(client) is clock
    assert abs(clock() - time.time()) < 0.5  # Redis runs here: its clock is the right one
    assert clock.offset() == pytest.approx(skewed_host, abs=0.5)


def test_a_skewed_host_stamps_shared_state_by_redis_clock(
    redis_url: str, skewed_host: float
) -> None:
    settings = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})
    client, keys = state_redis(settings), Keys(settings.key_prefix)
    # A job's admission (its queue deadline, its place in the queue).
    task_id = str(uuid.uuid4())
    assert admit(
        client,
        settings,
        task_id,
        RecaptchaV2("6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-", "https://example.com/skew"),
    )
    assert abs(float(client.hget(keys.job(task_id), "enqueued_at")) - time.time()) < 1.0
    # A cookie's set_at (which write is fresher).
    session = requests.Session()
    session.cookies.set("sid", "v", domain="skew.example.com", path="/")
    store = CookieStore(client, settings)
    store.merge(session, "skew.example.com")
    (cookie,) = store.load("skew.example.com")
    assert abs(cookie.set_at - time.time()) < 1.0
    # A parked page's lock deadline (compared with Redis's TIME in lock_park.lua).
    deadline = parking.deadline_after(settings, 2)
    assert abs(deadline - (time.time() + 2 * settings.lock_ttl)) < 1.0
