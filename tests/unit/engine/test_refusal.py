"""The key-refusal pause: step aside, resume once the key is taken, and end every job
when no live worker has a key the provider takes."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from captcha_tasks.engine.finish import Finisher
from captcha_tasks.engine.jobs import Job
from captcha_tasks.engine.observer import EngineStats
from captcha_tasks.engine.pool import TokenPool
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.engine.refusal import KeyRefusal
from captcha_tasks.engine.timing import FirstPollLearner
from captcha_tasks.errors import CaptchaTasksError, InvalidApiKey
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from tests.support.clock import ManualClock

from .conftest import FakeProvider, Outcomes

REFUSED = InvalidApiKey("ERROR_KEY_DOES_NOT_EXIST: refused", "ERROR_KEY_DOES_NOT_EXIST")


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(time.time())


@pytest.fixture
def make_refusal(
    client: redis.Redis, settings: Settings, clock: ManualClock
) -> Callable[..., tuple[KeyRefusal, EngineStats]]:
    def make(
        name: str = "engine@a", workers: tuple[str, ...] = ("a",)
    ) -> tuple[KeyRefusal, EngineStats]:
        stats = EngineStats()
        refusal = KeyRefusal(
            client, settings, name, live_workers=lambda: list(workers), observer=stats, clock=clock
        )
        return refusal, stats

    return make


def test_a_refusal_pauses_until_the_key_is_taken_again(
    make_refusal: Callable[..., tuple[KeyRefusal, EngineStats]],
    client: redis.Redis,
    keys: Keys,
    clock: ManualClock,
) -> None:
    refusal, stats = make_refusal()
    provider = FakeProvider(key_refused=True)
    assert not refusal.holds(provider)
    refusal.pause(REFUSED)
    assert refusal.paused and stats.snapshot()["paused"] == 1
    assert client.get(keys.key_refused("engine@a")) == "ERROR_KEY_DOES_NOT_EXIST"
    assert refusal.holds(provider)  # within the pause: the provider is not asked
    clock.now += refusal.pause_s + 1
    assert refusal.holds(provider)  # still refused (one balance call): paused again
    assert stats.snapshot()["paused"] == 2
    provider.key_refused = False
    clock.now += refusal.pause_s + 1
    assert not refusal.holds(provider)
    assert not refusal.paused
    assert client.get(keys.key_refused("engine@a")) is None


def test_other_live_workers_count_unless_their_keys_are_refused(
    make_refusal: Callable[..., tuple[KeyRefusal, EngineStats]],
) -> None:
    alone, _ = make_refusal("engine@a", ("a",))
    assert not alone.others_alive()
    first, _ = make_refusal("engine@a", ("a", "b"))
    assert first.others_alive()
    first.pause(REFUSED)
    assert first.others_alive()  # b's key is not refused
    second, _ = make_refusal("engine@b", ("a", "b"))
    second.pause(REFUSED)
    assert not first.others_alive()
    assert not second.others_alive()


def _finisher(
    queue: SolveQueue, client: redis.Redis, settings: Settings
) -> tuple[Finisher, Outcomes]:
    outcomes = Outcomes()
    finisher = Finisher(
        queue,
        outcomes,
        TokenPool(client, settings),
        FirstPollLearner(settings, client),
        EngineStats(),
        name="t",
        clock=time.time,
    )
    return finisher, outcomes


def test_when_every_key_is_refused_the_waiting_jobs_fail_with_the_refusal(
    make_refusal: Callable[..., tuple[KeyRefusal, EngineStats]],
    client: redis.Redis,
    settings: Settings,
    admit_jobs: Callable[..., list[str]],
    clock: ManualClock,
) -> None:
    ids = admit_jobs(4)
    clock.now = time.time()  # after the admissions
    queue = SolveQueue(client, settings, claim_s=30.0)
    finisher, outcomes = _finisher(queue, client, settings)
    refusal, stats = make_refusal("engine@a", ("a",))
    refusal.pause(REFUSED)
    assert refusal.fail_all_if_alone(queue, finisher.fail, finisher.report_again) == 4
    assert set(outcomes.errors) == set(ids)
    assert all(e.code == "ERROR_KEY_DOES_NOT_EXIST" for e in outcomes.errors.values())
    assert stats.snapshot()["failed_every_key_refused"] == 4


def test_while_another_worker_can_solve_nothing_fails(
    make_refusal: Callable[..., tuple[KeyRefusal, EngineStats]],
    client: redis.Redis,
    settings: Settings,
    admit_jobs: Callable[..., list[str]],
) -> None:
    admit_jobs(2)
    queue = SolveQueue(client, settings, claim_s=30.0)
    failed: list[Job] = []

    def fail(job: Job, error: CaptchaTasksError) -> bool:
        failed.append(job)
        return True

    refusal, _ = make_refusal("engine@a", ("a", "b"))
    refusal.pause(REFUSED)
    assert refusal.fail_all_if_alone(queue, fail, lambda job, fields: None) == 0
    assert failed == []
    assert len(queue.acquire(time.time(), 10)) == 2  # still waiting for the other worker
