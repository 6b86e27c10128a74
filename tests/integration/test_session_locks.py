"""Session locks on a real redis-server: exclusive, owner-checked, expiring, retrying."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import pytest
from celery import Celery
from celery.exceptions import Retry

from captcha_tasks import SessionLockTask
from captcha_tasks.session.locks import (
    SessionLock,
    SessionLockBusy,
    SessionLockTimeout,
    lock_wait_policy,
)
from captcha_tasks.settings import Settings, get_settings
from captcha_tasks.state import Keys, state_redis
from tests.support.processes import LOCK_HOLDER, SpawnPython, read_line

pytestmark = pytest.mark.integration

HOST = "login.example.com"


@pytest.fixture
def settings(redis_url: str) -> Settings:
    base = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})
    return dataclasses.replace(base, lock_ttl=1.0)


def new_lock(settings: Settings, owner: str, host: str = HOST) -> SessionLock:
    return SessionLock(state_redis(settings), settings, host, owner=owner)


def test_only_one_owner_holds_the_lock(settings: Settings) -> None:
    a, b = new_lock(settings, "a"), new_lock(settings, "b")
    assert a.acquire()
    assert not b.acquire()
    assert a.holder() == b.holder() == "a"
    assert a.owned() and not b.owned()
    assert a.release()
    assert b.acquire()
    assert a.holder() == "b"
    assert b.release()
    assert a.holder() is None


def test_hosts_are_normalised_and_locked_separately(settings: Settings) -> None:
    a = new_lock(settings, "a", "https://LOGIN.Example.com:443/path")
    assert a.host == HOST
    assert a.key == Keys(settings.key_prefix).session_lock(HOST)
    assert a.acquire()
    assert not new_lock(settings, "b", "login.example.com.").acquire()
    other = new_lock(settings, "b", "other.example.com")
    assert other.acquire()
    other.release()
    a.release()


def test_lock_has_the_configured_ttl(settings: Settings) -> None:
    lock = new_lock(settings, "a")
    assert lock.acquire()
    remaining = lock.remaining()
    assert remaining is not None and 0.5 < remaining <= settings.lock_ttl
    lock.release()
    assert lock.remaining() is None


def test_release_by_another_owner_is_refused(settings: Settings) -> None:
    a, b = new_lock(settings, "a"), new_lock(settings, "b")
    assert a.acquire()
    assert not b.release()  # b never held it: nothing deleted
    assert a.holder() == "a"
    # a's lock expires while a still "works"; b takes it; a's late release must not free b's.
    time.sleep(settings.lock_ttl + 0.2)
    assert b.acquire()
    assert not a.release()
    assert not a.extend()
    assert a.holder() == "b" and b.owned()
    assert b.release()


def test_extend_keeps_the_lock_past_its_ttl(settings: Settings) -> None:
    a, b = new_lock(settings, "a"), new_lock(settings, "b")
    assert a.acquire()
    deadline = time.monotonic() + 2.5 * settings.lock_ttl
    while time.monotonic() < deadline:
        time.sleep(settings.lock_ttl / 3)
        assert a.extend()
        assert not b.acquire()
    assert a.extend(5.0)
    remaining = a.remaining()
    assert remaining is not None and remaining > 4.0
    assert a.release()


def test_the_block_form_raises_busy_when_held(settings: Settings) -> None:
    with new_lock(settings, "a") as held:
        assert held.owned()
        with pytest.raises(SessionLockBusy, match="held by a"), new_lock(settings, "b"):
            pass
    assert new_lock(settings, "c").holder() is None


def test_a_killed_holder_is_replaced_within_the_lock_ttl(
    settings: Settings, spawn: SpawnPython
) -> None:
    proc = spawn(LOCK_HOLDER, str(settings.lock_ttl), HOST)
    assert read_line(proc, 30) == "acquired"
    waiter = new_lock(settings, "survivor")
    time.sleep(1.5 * settings.lock_ttl)  # alive: it keeps the lock past one TTL
    assert not waiter.acquire()
    assert waiter.holder() == "doomed"

    proc.kill()  # SIGKILL: no release, no clean-up
    proc.wait(timeout=10)
    killed_at = time.monotonic()
    assert waiter.holder() == "doomed"
    while not waiter.acquire():
        assert time.monotonic() - killed_at < settings.lock_ttl + 0.5, "lock never freed"
        time.sleep(0.02)
    assert time.monotonic() - killed_at <= settings.lock_ttl + 0.5
    assert waiter.holder() == "survivor"
    waiter.release()


# -- the task mixin ---------------------------------------------------------------------


@pytest.fixture
def lock_app(redis_url: str, settings_env: Callable[..., None]) -> Celery:
    settings_env(CAPTCHA_TASKS_REDIS_URL=redis_url, CAPTCHA_TASKS_LOCK_TTL="1")
    return Celery("locks-test", broker="memory://", backend="cache+memory://", set_as_current=False)


def make_task(app: Celery, runs: list[str]) -> Any:
    @app.task(base=SessionLockTask, bind=True, name="test.relogin", shared=False)
    def relogin(self: Any, host: str) -> str:
        runs.append(host)
        with self.session_lock(host) as lock:
            assert lock.owned()
            return str(lock.holder())

    return relogin


def test_the_mixin_retries_with_a_short_countdown_instead_of_blocking(lock_app: Celery) -> None:
    settings = get_settings()
    task = make_task(lock_app, [])
    other = new_lock(settings, "other-worker")
    assert other.acquire()
    countdown, max_retries = lock_wait_policy(settings)
    assert countdown == pytest.approx(settings.scaled(2.0))
    assert max_retries * countdown >= 2 * settings.lock_ttl

    task.push_request(
        id="t1", args=(HOST,), kwargs={}, retries=0, hostname="w1@test", called_directly=False
    )
    try:
        started = time.monotonic()
        with pytest.raises(Retry) as info:
            task.run(HOST)
        assert time.monotonic() - started < 0.5  # no blocking wait
    finally:
        task.pop_request()
    assert isinstance(info.value.exc, SessionLockBusy)
    assert "other-worker" in str(info.value.exc)
    assert countdown <= float(info.value.when) <= countdown * 1.2
    assert other.holder() == "other-worker"  # the waiter took nothing

    # The last allowed attempt gives up with a typed error instead of retrying.
    task.push_request(
        id="t1",
        args=(HOST,),
        kwargs={},
        retries=max_retries,
        hostname="w1@test",
        called_directly=False,
    )
    try:
        with pytest.raises(SessionLockTimeout, match=HOST):
            task.run(HOST)
    finally:
        task.pop_request()
    other.release()


def test_the_mixin_holds_the_lock_for_the_block_then_releases(lock_app: Celery) -> None:
    task = make_task(lock_app, [])
    task.push_request(id="t2", retries=0, hostname="w1@test", called_directly=False)
    try:
        assert task.run("HTTPS://Login.Example.com/x") == "w1@test"
    finally:
        task.pop_request()
    assert new_lock(get_settings(), "probe").holder() is None


def test_eager_waiter_gives_up_after_about_two_lock_ttls(lock_app: Celery) -> None:
    lock_app.conf.task_always_eager = True
    runs: list[str] = []
    task = make_task(lock_app, runs)
    settings = get_settings()
    other = new_lock(settings, "other-worker")
    assert other.acquire()
    _, max_retries = lock_wait_policy(settings)
    result = task.apply(args=(HOST,))
    assert result.state == "FAILURE"
    assert isinstance(result.result, SessionLockTimeout)
    assert len(runs) == max_retries + 1  # eager mode runs the retries at once
    other.release()
    assert task.apply(args=(HOST,)).get() is not None


def test_a_block_that_outlives_the_ttl_does_not_free_the_next_holder(
    lock_app: Celery,
) -> None:
    settings = get_settings()

    @lock_app.task(base=SessionLockTask, bind=True, name="test.slow", shared=False)
    def slow(self: Any, host: str) -> None:
        with self.session_lock(host):
            time.sleep(settings.lock_ttl + 0.2)
            assert new_lock(settings, "next").acquire()  # expired: someone else got it

    slow.push_request(id="t3", retries=0, hostname="w1@test", called_directly=False)
    try:
        slow.run(HOST)
    finally:
        slow.pop_request()
    assert new_lock(settings, "probe").holder() == "next"
