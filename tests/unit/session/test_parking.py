"""The parking scripts on a real redis-server: park only while the lock is held, the
release hands the parked back atomically, the sweeper wakes them after a crash."""

from __future__ import annotations

import dataclasses
import time

import pytest
import redis

from captcha_tasks.session import parking
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis

HOST = "login.example.com"


@pytest.fixture
def settings(redis_url: str) -> Settings:
    base = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})
    return dataclasses.replace(base, lock_ttl=1.0)


@pytest.fixture
def client(settings: Settings) -> redis.Redis:
    return state_redis(settings)


def parked_key(settings: Settings) -> str:
    return Keys(settings.key_prefix).session_parked(HOST)


def member(n: int, deadline: float) -> str:
    return parking.entry({"task": "t", "args": [n], "kwargs": {}, "options": {}}, deadline)


def test_a_task_parks_only_while_the_lock_is_held(settings: Settings, client: redis.Redis) -> None:
    deadline = time.time() + 10
    assert not parking.park(client, settings, HOST, member(1, deadline), deadline).parked
    assert client.zcard(parked_key(settings)) == 0  # free: nothing parked, go on

    holder = SessionLock(client, settings, HOST, owner="a")
    assert holder.acquire()
    first = parking.park(client, settings, HOST, member(2, deadline), deadline)
    assert first.parked
    # The first waiter asks for the sweeper at the lock's expiry (plus a margin).
    assert 0.5 < first.sweep_in <= settings.lock_ttl + parking.SWEEP_MARGIN
    second = parking.park(client, settings, HOST, member(3, deadline), deadline)
    assert second.parked and second.sweep_in == 0  # one sweeper per host
    ttl = client.pttl(parked_key(settings))
    assert 0 < ttl <= (10 + 2 * parking.SWEEP_MARGIN) * 1000  # the key expires
    holder.release()


def test_the_owners_release_hands_back_every_parked_task(
    settings: Settings, client: redis.Redis
) -> None:
    deadline = time.time() + 10
    holder = SessionLock(client, settings, HOST, owner="a")
    other = SessionLock(client, settings, HOST, owner="b")
    assert holder.acquire()
    members = [member(n, deadline) for n in range(3)]
    for m in members:
        assert parking.park(client, settings, HOST, m, deadline).parked
    assert other.release_collect() == parking.Released(False, [])  # not its lock
    done = holder.release_collect()
    assert done.released and sorted(done.parked) == sorted(members)
    assert holder.holder() is None
    # Handed back, not removed: a releaser that dies before re-sending loses nothing.
    assert client.zcard(parked_key(settings)) == 4  # 3 tasks + the sweeper's mark
    for m in done.parked:
        parking.forget(client, settings, HOST, m)
    assert client.zcard(parked_key(settings)) == 1
    assert parking.read_entry(members[1])[0]["args"] == [1]


def test_an_expired_lock_taken_by_another_owner_keeps_its_waiters_parked(
    settings: Settings, client: redis.Redis
) -> None:
    deadline = time.time() + 10
    late = SessionLock(client, settings, HOST, owner="late")
    assert late.acquire()
    assert parking.park(client, settings, HOST, member(1, deadline), deadline).parked
    client.delete(Keys(settings.key_prefix).session_lock(HOST))  # late's lock expired
    nxt = SessionLock(client, settings, HOST, owner="next")
    assert nxt.acquire()
    assert late.release_collect() == parking.Released(False, [])  # next's release wakes
    done = nxt.release_collect()
    assert done.released and len(done.parked) == 1


def test_the_sweeper_wakes_everyone_once_a_crashed_holders_lock_expires(
    settings: Settings, client: redis.Redis
) -> None:
    deadline = time.time() + 10
    crashed = SessionLock(client, settings, HOST, owner="crashed")
    assert crashed.acquire()
    first = parking.park(client, settings, HOST, member(1, deadline), deadline)
    parking.park(client, settings, HOST, member(2, deadline), deadline)
    held = parking.sweep(client, settings, HOST, first.sweep_due)
    assert held.parked == [] and held.again_in > 0  # still held: come back later
    # The held sweep's new due is the lock's expiry again, which can be within a
    # millisecond of first.sweep_due: only a due other than held.due is stale.
    stale = parking.sweep(client, settings, HOST, held.due - 1)
    assert stale.again_in == 0  # not the host's sweeper: it does not come back
    time.sleep(settings.lock_ttl + 0.1)  # the holder never releases: its lock expires
    free = parking.sweep(client, settings, HOST, held.due)
    assert len(free.parked) == 2 and free.again_in == 0


def test_the_sweeper_hands_back_waiters_past_their_deadline_while_held(
    settings: Settings, client: redis.Redis
) -> None:
    holder = SessionLock(client, settings, HOST, owner="a")
    assert holder.acquire()
    soon, later = time.time() + 0.2, time.time() + 30
    first = parking.park(client, settings, HOST, member(1, soon), soon)
    # The sweeper comes at the earlier of the lock's expiry and the deadline.
    assert first.sweep_in <= 0.2 + parking.SWEEP_MARGIN + 0.05
    parking.park(client, settings, HOST, member(2, later), later)
    time.sleep(0.3)
    found = parking.sweep(client, settings, HOST, first.sweep_due)
    assert [parking.read_entry(m)[0]["args"] for m in found.parked] == [[1]]
    assert found.again_in > 0  # the other still waits
    holder.release()


def test_a_re_parked_task_is_not_lost_when_its_old_member_is_forgotten(
    settings: Settings, client: redis.Redis
) -> None:
    # Re-sent, run and parked again before the releaser removed its old member: the
    # two parks are distinct members, so forgetting the old one keeps the new one.
    deadline = time.time() + 10
    message = {"task": "t", "args": [1], "kwargs": {}, "options": {}}
    a = SessionLock(client, settings, HOST, owner="a")
    assert a.acquire()
    old = parking.entry(message, deadline)
    parking.park(client, settings, HOST, old, deadline)
    done = a.release_collect()
    b = SessionLock(client, settings, HOST, owner="b")
    assert b.acquire()
    new = parking.entry(message, deadline)
    assert new != old and parking.park(client, settings, HOST, new, deadline).parked
    for m in done.parked:
        parking.forget(client, settings, HOST, m)
    assert b.release_collect().parked == [new]
