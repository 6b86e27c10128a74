"""SolveQueue: each Lua step against a real Redis."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
import redis

from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys

CLAIM_S = 30.0


@pytest.fixture
def queue(client: redis.Redis, settings: Settings) -> SolveQueue:
    return SolveQueue(client, settings, claim_s=CLAIM_S)


def _submitted(queue: SolveQueue, task_id: str, now: float, captcha_id: str) -> None:
    """Take one job to ``polling`` under ``captcha_id``, first poll at ``now``."""
    (claimed,) = [c for c in queue.claim(now + CLAIM_S + 1, 10) if c.job.task_id == task_id]
    assert queue.sending(claimed.job, now, "me")
    assert queue.submitted(claimed.job, captcha_id, now, now)


def test_acquire_takes_no_more_than_the_budget(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    ids = admit_jobs(5)
    now = time.time()
    taken = queue.acquire(now, 10)
    assert [c.job.task_id for c in taken] == ids[:2]  # threads=2, oldest first
    assert all(c.job.state == "submitting" for c in taken)
    assert queue.acquire(now, 10) == []
    assert client.zcard(keys.budget) == 2
    # Ending one frees its thread for the next waiting job.
    assert queue.finish(taken[0].job, "failed", {"error": "X"}, now)
    assert [c.job.task_id for c in queue.acquire(now, 10)] == [ids[2]]


def test_acquire_takes_at_most_n(queue: SolveQueue, admit_jobs: Callable[..., list[str]]) -> None:
    admit_jobs(3)
    assert len(queue.acquire(time.time(), 1)) == 1


def test_a_learned_provider_limit_lowers_the_budget(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    admit_jobs(4)
    now = time.time()
    (first, _) = queue.acquire(now, 10)
    assert queue.requeue(first.job, "submitting", now)  # "no slot": its thread goes back
    assert queue.provider_limit(60_000) == 1  # the one captcha still held
    assert queue.acquire(now, 10) == []


def test_a_claim_is_exclusive_until_it_runs_out(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    now = time.time()
    queue.acquire(now, 10)  # claimed for its submit until now + CLAIM_S
    assert queue.claim(now + 1, 10) == []
    (claimed,) = queue.claim(now + CLAIM_S + 1, 10)  # its engine died: another takes it
    assert claimed.job.task_id == task_id and claimed.job.state == "submitting"
    assert queue.claim(now + CLAIM_S + 2, 10) == []


def test_only_one_caller_sends_a_job(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    admit_jobs(1)
    now = time.time()
    (taken,) = queue.acquire(now, 10)
    assert queue.sending(taken.job, now, "first")
    assert not queue.sending(taken.job, now, "second")


def test_finish_ends_a_job_once(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    (task_id,) = admit_jobs(1)
    now = time.time()
    (taken,) = queue.acquire(now, 10)
    _submitted(queue, task_id, now, "c1")
    assert queue.finish(taken.job, "done", {"result": "{}"}, now, captcha_id="c1")
    assert not queue.finish(taken.job, "failed", {"error": "LATE"}, now)
    assert client.hget(keys.job(task_id), "state") == "done"
    assert client.zcard(keys.budget) == 0
    # It stays in the schedule until reported, so a stopped engine's outcome is reported.
    assert client.zscore(keys.due, task_id) is not None
    queue.reported(task_id)
    assert client.zscore(keys.due, task_id) is None
    assert client.hget(keys.job(task_id), "reported") == "1"


def test_finish_of_another_captcha_id_is_refused(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    (task_id,) = admit_jobs(1)
    now = time.time()
    (taken,) = queue.acquire(now, 10)
    _submitted(queue, task_id, now, "c2")
    assert not queue.finish(taken.job, "done", {}, now, captcha_id="c1")


def test_requeue_checks_the_state_and_counts(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    (task_id,) = admit_jobs(1)
    now = time.time()
    (taken,) = queue.acquire(now, 10)
    assert not queue.requeue(taken.job, "polling", now)  # it is submitting, not polling
    assert queue.requeue(taken.job, "submitting", now + 5, counter="resubmits")
    fields = client.hgetall(keys.job(task_id))
    assert (fields["state"], fields["resubmits"]) == ("waiting", "1")
    assert client.zscore(keys.waiting, task_id) == pytest.approx(now + 5)
    assert client.zcard(keys.budget) == 0
    assert queue.acquire(now, 10) == []  # not before now + 5
    assert len(queue.acquire(now + 6, 10)) == 1


def test_reschedule_counts_polls_of_the_same_captcha_only(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    (task_id,) = admit_jobs(1)
    now = time.time()
    queue.acquire(now, 10)
    _submitted(queue, task_id, now, "c1")
    (claimed,) = queue.claim(now, 10)
    assert queue.reschedule(claimed.job, now + 3, polled=True, at=now + 1)
    fields = client.hgetall(keys.job(task_id))
    assert (fields["polls"], float(fields["last_poll_at"])) == ("1", pytest.approx(now + 1))
    assert client.zscore(keys.due, task_id) == pytest.approx(now + 3)
    assert queue.reschedule(claimed.job, now + 4, polled=False, at=now + 2)
    assert client.hget(keys.job(task_id), "polls") == "1"  # a poll that never happened
    resubmitted = type(claimed.job)(**{**claimed.job.__dict__, "captcha_id": "c0"})
    assert not queue.reschedule(resubmitted, now + 9, polled=True, at=now)


def test_a_batch_of_reschedules_moves_only_the_jobs_still_at_their_captcha(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    ids = admit_jobs(2)
    now = time.time()
    for i, taken in enumerate(queue.acquire(now, 10)):
        assert queue.sending(taken.job, now, "me")
        assert queue.submitted(taken.job, f"c{i}", now, now)
    claimed = {c.job.task_id: c.job for c in queue.claim(now, 10)}
    first, second = claimed[ids[0]], claimed[ids[1]]
    moved_on = type(second)(**{**second.__dict__, "captcha_id": "an-earlier-captcha"})
    with queue.batched():
        assert queue.reschedule(first, now + 3, polled=True, at=now + 1)
        queue.reschedule(moved_on, now + 5, polled=True, at=now + 1)
        assert client.zscore(keys.due, ids[0]) != pytest.approx(now + 3, abs=1e-3)  # not yet sent
    assert client.zscore(keys.due, ids[0]) == pytest.approx(now + 3, abs=1e-3)
    assert client.hget(keys.job(ids[0]), "polls") == "1"
    assert client.zscore(keys.due, ids[1]) != pytest.approx(now + 5, abs=1e-3)
    assert client.hget(keys.job(ids[1]), "polls") == "0"


def test_submitted_needs_a_send_in_progress(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]]
) -> None:
    admit_jobs(1)
    now = time.time()
    (taken,) = queue.acquire(now, 10)
    assert not queue.submitted(taken.job, "c1", now, now)  # never marked sending


def test_an_admission_wakes_an_engine_only_while_a_thread_is_free(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    admit_jobs(1)
    assert client.llen(keys.wake) == 1  # both threads free: an idle engine may take it
    client.delete(keys.wake)
    now = time.time()
    assert len(queue.acquire(now, 10)) == 1
    admit_jobs(1)
    assert client.llen(keys.wake) == 1  # one thread still free
    client.delete(keys.wake)
    (second,) = queue.acquire(time.time(), 10)
    admit_jobs(3)  # threads=2, both held: nobody could take them now
    assert client.llen(keys.wake) == 0
    # The thread that frees wakes an idle engine for them...
    assert queue.finish(second.job, "failed", {"error": "X"}, time.time())
    assert client.llen(keys.wake) == 1
    # ...and whoever takes a job then has a free thread for it.
    assert len(queue.acquire(time.time(), 10)) == 1


def test_a_freed_thread_wakes_an_engine_only_for_a_waiting_job_it_does_not_take_itself(
    queue: SolveQueue, admit_jobs: Callable[..., list[str]], client: redis.Redis, keys: Keys
) -> None:
    admit_jobs(2)
    now = time.time()
    first, second = (c.job for c in queue.acquire(now, 10))
    client.delete(keys.wake)
    assert queue.finish(first, "failed", {"error": "X"}, now)
    assert client.llen(keys.wake) == 0  # nothing waits: nothing to wake anyone for
    admit_jobs(1)
    client.delete(keys.wake)
    # A poll's answers: the engine refills the freed thread itself.
    assert queue.finish_many([(second, "done", {"result": "{}"}, None)], now, wake=False)
    assert client.llen(keys.wake) == 0
    assert len(queue.acquire(time.time(), 10)) == 1  # the waiting job is there to take
