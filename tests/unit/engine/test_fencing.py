"""Claims as fencing tokens: an engine that comes back after its claim ran out (cut off
from Redis for longer than the claim, paused) and whose job another engine took over
sends nothing, moves no poll and ends nothing it no longer holds."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import NamedTuple

import pytest
import redis

from captcha_tasks.engine.finish import Finisher
from captcha_tasks.engine.jobs import Job
from captcha_tasks.engine.queue import Claimed, SolveQueue
from captcha_tasks.errors import SolveTimeout, SubmitUncertain
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys

CLAIM_S = 30.0


class Race(NamedTuple):
    """One admitted job and two engines' queues: ``a`` (the one cut off) and ``b`` (the
    one taking over once a's claim ran out, at ``later``)."""

    a: SolveQueue
    b: SolveQueue
    task_id: str
    now: float

    @property
    def later(self) -> float:
        return self.now + CLAIM_S + 1


@pytest.fixture
def race(client: redis.Redis, settings: Settings, admit_jobs: Callable[..., list[str]]) -> Race:
    (task_id,) = admit_jobs(1)
    return Race(
        SolveQueue(client, settings, claim_s=CLAIM_S, claimer="engine@a"),
        SolveQueue(client, settings, claim_s=CLAIM_S, claimer="engine@b"),
        task_id,
        time.time(),
    )


@pytest.fixture
def finisher(
    client: redis.Redis, settings: Settings
) -> Callable[[SolveQueue], tuple[Finisher, _Outcomes]]:
    """A finisher for a queue's engine, and the outcomes it recorded."""
    from captcha_tasks.engine.observer import EngineStats
    from captcha_tasks.engine.pool import TokenPool
    from captcha_tasks.engine.timing import FirstPollLearner

    def make(queue: SolveQueue) -> tuple[Finisher, _Outcomes]:
        outcomes = _Outcomes()
        return Finisher(
            queue,
            outcomes,
            TokenPool(client, settings),
            FirstPollLearner(settings, client),
            EngineStats(),
            name=queue.claimer,
            clock=time.time,
        ), outcomes

    return make


def _only(claimed: list[Claimed], task_id: str) -> Job:
    (job,) = [c.job for c in claimed if c.job.task_id == task_id]
    return job


def _polling(queue: SolveQueue, task_id: str, now: float, captcha_id: str) -> Job:
    """Take one job to ``polling`` under ``captcha_id`` (its first poll at ``now``) and
    claim it for that poll: the claimed copy."""
    job = _only(queue.acquire(now, 10), task_id)
    assert queue.sending(job, now, queue.claimer)
    assert queue.submitted(job, captcha_id, now, now)
    return _only(queue.claim(now, 10), task_id)


def test_every_claim_is_a_new_token_naming_its_engine(race: Race) -> None:
    a, b, task_id, now = race
    taken = _only(a.acquire(now, 10), task_id)
    assert (taken.claim, taken.claimed_by) == ("1", "engine@a")
    again = _only(b.claim(race.later, 10), task_id)  # a's claim ran out
    assert (again.claim, again.claimed_by) == ("2", "engine@b")


def test_a_claim_taken_over_sends_nothing(race: Race) -> None:
    a, b, task_id, now = race
    stale = _only(a.acquire(now, 10), task_id)
    # a is cut off before its send; its claim runs out and b takes the job over, but
    # has not sent it yet when a comes back: a must not send it (b will).
    fresh = _only(b.claim(race.later, 10), task_id)
    assert not a.sending(stale, now + CLAIM_S + 2, "engine@a")
    assert b.sending(fresh, now + CLAIM_S + 2, "engine@b")


def test_a_send_retried_after_its_first_run_got_through_is_still_the_callers(race: Race) -> None:
    # A client that timed out sends the call again on a new connection; when the link
    # heals both get through. The caller sees the second answer: it must say "send",
    # or the job would sit in 'sending', never sent, and fail SubmitUncertain.
    a, _, task_id, now = race
    job = _only(a.acquire(now, 10), task_id)
    assert a.sending(job, now, "engine@a")
    assert a.sending(job, now, "engine@a")  # the same call, run again
    assert not a.sending(job, now + 1, "engine@a")  # another call: not twice


def test_a_stale_reschedule_does_not_move_a_job_taken_over(
    race: Race,
    client: redis.Redis,
    keys: Keys,
) -> None:
    a, b, task_id, now = race
    stale = _polling(a, task_id, now, "c1")
    later = race.later
    _only(b.claim(later, 10), task_id)  # b polls it now, claimed until later + CLAIM_S
    # a's poll (made before it was cut off) found nothing: its reschedule would put the
    # next poll at once, and a third engine would poll it beside b.
    assert not a.reschedule(stale, later + 0.5, polled=True, at=later)
    assert client.zscore(keys.due, task_id) == pytest.approx(later + CLAIM_S, abs=0.01)
    assert client.hget(keys.job(task_id), "polls") == "1"  # its read was made: it counts


def test_a_stale_requeue_of_a_polled_job_is_refused(race: Race) -> None:
    a, b, task_id, now = race
    stale = _polling(a, task_id, now, "c1")
    fresh = _only(b.claim(race.later, 10), task_id)
    assert not a.requeue(stale, "polling", now, counter="resubmits")
    assert b.requeue(fresh, "polling", now, counter="resubmits")


def test_the_sender_records_its_captcha_even_after_its_claim_was_taken_over(
    race: Race,
    finisher: Callable[[SolveQueue], tuple[Finisher, _Outcomes]],
    client: redis.Redis,
    keys: Keys,
) -> None:
    # a sent the job and got its captcha id, then was cut off; its claim ran out and b
    # claimed the job ('sending': maybe at the provider) to fail it. a's record comes
    # first: the captcha is at the provider, billed, so the job is polled, and b's
    # failure of the send it gave up on ends nothing.
    a, b, task_id, now = race
    job = _only(a.acquire(now, 10), task_id)
    assert a.sending(job, now, "engine@a")
    taken_over = _only(b.claim(race.later, 10), task_id)
    assert taken_over.state == "sending"
    assert not b.submitted(job, "c9", now, now)  # only the sender records its captcha
    assert a.submitted(job, "c9", now, now)
    b_finisher, outcomes = finisher(b)
    assert not b_finisher.fail(taken_over, SubmitUncertain("gave up"), expected="sending")
    assert client.hget(keys.job(task_id), "state") == "polling"
    assert outcomes.failed == []


def test_a_send_given_up_on_fails_while_its_sender_is_silent(
    race: Race,
    finisher: Callable[[SolveQueue], tuple[Finisher, _Outcomes]],
) -> None:
    a, b, task_id, now = race
    job = _only(a.acquire(now, 10), task_id)
    assert a.sending(job, now, "engine@a")
    taken_over = _only(b.claim(race.later, 10), task_id)
    b_finisher, outcomes = finisher(b)
    assert b_finisher.fail(taken_over, SubmitUncertain("gave up"), expected="sending")
    assert outcomes.failed == [task_id]
    assert not a.submitted(job, "c9", now, now)  # too late: it failed


def test_a_polled_captchas_error_ends_nothing_once_the_job_moved_to_another(
    race: Race,
    finisher: Callable[[SolveQueue], tuple[Finisher, _Outcomes]],
) -> None:
    # a polled c1 and found it past its deadline while b, having taken the job over,
    # found c1 unsolvable and resubmitted it as c2: a's verdict is about c1 only.
    a, b, task_id, now = race
    stale = _polling(a, task_id, now, "c1")
    fresh = _only(b.claim(race.later, 10), task_id)
    assert b.requeue(fresh, "polling", now, counter="resubmits")
    _polling(b, task_id, now, "c2")
    a_finisher, outcomes = finisher(a)
    assert not a_finisher.fail(stale, SolveTimeout("late"))
    assert outcomes.failed == []


class _Outcomes:
    def __init__(self) -> None:
        self.failed: list[str] = []

    def succeed(self, job: Job, result: dict[str, object]) -> None:
        raise AssertionError("nothing is solved here")

    def fail(self, job: Job, error: object) -> None:
        self.failed.append(job.task_id)
