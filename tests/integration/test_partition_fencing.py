"""Claims fence off an engine cut off from Redis: a real partition (a proxy that stops
forwarding), a command the engine gave up on delivered when the link heals, after
another engine took its job over. The late command must change nothing.

The engine's client has a short socket timeout and no retries, as the package's own
clients (``state.redis_client``); the other engine talks to Redis directly."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from captcha_tasks.engine import admit
from captcha_tasks.engine.queue import Claimed, SolveQueue
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, redis_client, state_redis
from captcha_tasks.state.scripts import source
from captcha_tasks_dev.redis_server import RedisServer
from tests.support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
CLAIM_S = 5.0


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})


@pytest.fixture
def proxy(redis_server: RedisServer, settings: Settings) -> Iterator[TcpProxy]:
    with TcpProxy(redis_server.port) as running:
        yield running


@pytest.fixture
def cut_off(proxy: TcpProxy, settings: Settings) -> SolveQueue:
    """Engine ``a``: its Redis is behind the proxy (1 s socket timeout, no retries)."""
    client = redis_client(settings, proxy.url(), timeout=1.0)
    for name in ("sending", "reschedule", "requeue", "claim", "acquire", "submitted"):
        client.script_load(source(name))  # no NOSCRIPT round trip during the partition
    return SolveQueue(client, settings, claim_s=CLAIM_S, claimer="engine@a")


@pytest.fixture
def other(settings: Settings) -> SolveQueue:
    return SolveQueue(state_redis(settings), settings, claim_s=CLAIM_S, claimer="engine@b")


@pytest.fixture
def one_job(settings: Settings) -> str:
    task_id = "job-cut-off"
    captcha = RecaptchaV2(SITEKEY, "https://example.com/partition")
    assert admit(state_redis(settings), settings, task_id, captcha, now=time.time() - 1)
    return task_id


def _only(claimed: list[Claimed]) -> Claimed:
    assert len(claimed) == 1, claimed
    return claimed[0]


def _heal(proxy: TcpProxy, before: int) -> None:
    proxy.resume()
    deadline = time.monotonic() + 5
    while proxy.stats.up <= before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxy.stats.up > before, "the held command never reached Redis"
    time.sleep(0.2)  # Redis runs it


def test_a_send_given_up_on_and_delivered_late_leaves_the_job_to_its_new_holder(
    proxy: TcpProxy, cut_off: SolveQueue, other: SolveQueue, one_job: str, settings: Settings
) -> None:
    now = time.time()
    stale = _only(cut_off.acquire(now, 1)).job
    proxy.pause()
    before = proxy.stats.up
    with pytest.raises(redis.TimeoutError):  # a gives up: it sends nothing
        cut_off.sending(stale, now, "engine@a")
    # a's claim runs out; b takes the job over before a's held command arrives.
    fresh = _only(other.claim(now + CLAIM_S + 1, 1)).job
    _heal(proxy, before)
    # a's late 'sending' must not have taken the job: else b may not send it, nobody
    # ever does, and the job fails SubmitUncertain without having been sent.
    assert other.sending(fresh, now + CLAIM_S + 1, "engine@b")
    fields = state_redis(settings).hgetall(Keys(settings.key_prefix).job(one_job))
    assert fields["sender"] == "engine@b"


def test_a_reschedule_given_up_on_and_delivered_late_moves_nothing(
    proxy: TcpProxy, cut_off: SolveQueue, other: SolveQueue, one_job: str, settings: Settings
) -> None:
    client, keys = state_redis(settings), Keys(settings.key_prefix)
    now = time.time()
    job = _only(other.acquire(now, 1)).job
    assert other.sending(job, now, "engine@b") and other.submitted(job, "c1", now, now)
    stale = _only(cut_off.claim(now, 1)).job  # a polls it
    proxy.pause()
    before = proxy.stats.up
    with pytest.raises(redis.TimeoutError):  # "not ready, poll at once": given up on
        cut_off.reschedule(stale, now + 0.05, polled=True, at=now)
    later = now + CLAIM_S + 1
    _only(other.claim(later, 1))  # a's claim ran out: b polls it, claimed until later + 5
    _heal(proxy, before)
    # a's late reschedule would make the job due at once, while b holds it: another
    # engine would poll it beside b. Its read was made, though: that counts.
    assert client.zscore(keys.due, one_job) == pytest.approx(later + CLAIM_S, abs=0.01)
    assert client.hget(keys.job(one_job), "polls") == "1"
