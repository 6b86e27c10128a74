"""A batch poll's answers: their threads go to the next waiting jobs before their results
are stored, each job ends exactly once; and the batched poll interval follows the load."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis

from captcha_tasks.engine import Engine, Job
from captcha_tasks.engine.timing import (
    BATCH_LEARN_QUANTILE,
    LEARN_MIN_SAMPLES,
    FirstPollLearner,
    PollGrid,
)
from captcha_tasks.errors import CaptchaTasksError
from captcha_tasks.provider import Answer
from captcha_tasks.provider.poll_rules import CLASSIC_RULES
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until

from .conftest import FakeProvider, Outcomes


class WaitingAtEachEnd(Outcomes):
    """Records, as each result reaches its caller, how many jobs still wait for a thread."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        super().__init__()
        self.client, self.keys = client, keys
        self.waiting_then: list[int] = []

    def succeed(self, job: Job, result: dict[str, Any]) -> None:
        self.waiting_then.append(int(self.client.zcard(self.keys.waiting)))
        super().succeed(job, result)


def test_the_threads_a_batch_poll_frees_take_the_next_jobs_before_results_are_stored(
    client: redis.Redis, settings: Settings, keys: Keys, admit_jobs: Callable[..., list[str]]
) -> None:
    outcomes = WaitingAtEachEnd(client, keys)
    # Budget 2, four jobs: the first answers free the threads the last two wait for.
    engine = Engine(
        settings, client, FakeProvider(), outcomes, live_workers=lambda: ["w"], name="unit"
    )
    admit_jobs(4)
    engine.start()
    try:
        wait_until(lambda: outcomes.ended() == 4, timeout=20, what="4 solves")
    finally:
        engine.stop(timeout=10)
    assert len(outcomes.results) == 4, outcomes.errors
    # Ending a solve frees its thread, and the next waiting job took it before the
    # solve's result was stored: at the first result, fewer than 2 still waited.
    assert outcomes.waiting_then[0] < 2, outcomes.waiting_then
    assert outcomes.waiting_then[-1] == 0
    assert client.zcard(keys.budget) == 0


def _unstarted(client: redis.Redis, settings: Settings) -> tuple[Engine, Outcomes]:
    """An engine whose loop is not running: the test drives its parts."""
    outcomes = Outcomes()
    engine = Engine(
        settings, client, FakeProvider(), outcomes, live_workers=lambda: ["w"], name="unit"
    )
    return engine, outcomes


def _submitted(engine: Engine, client: redis.Redis, task_ids: list[str]) -> list[Job]:
    jobs = []
    for i, task_id in enumerate(task_ids):
        job = engine.queue.acquire(time.time(), 1)[0].job
        assert engine.queue.sending(job, time.time(), "unit")
        assert engine.queue.submitted(job, f"c{i}", time.time(), time.time())
        jobs.append(Job.from_fields(task_id, client.hgetall(engine.queue.keys.job(task_id))))  # type: ignore[arg-type]
    return jobs


def test_succeed_many_ends_each_job_once_and_calls_then_only_if_it_ended_any(
    client: redis.Redis, settings: Settings, admit_jobs: Callable[..., list[str]]
) -> None:
    engine, outcomes = _unstarted(client, settings)
    ids = admit_jobs(2)
    jobs = _submitted(engine, client, ids)
    calls: list[float] = []
    answered = [(job, Answer(job.captcha_id, f"token-{job.captcha_id}")) for job in jobs]
    at = time.time()

    def then() -> None:
        calls.append(time.time())

    assert engine.finisher.succeed_many(answered, at, then=then) == 2
    assert len(calls) == 1
    assert {r["solution"] for r in outcomes.results.values()} == {"token-c0", "token-c1"}
    # A poll racing it (or a callback) finds them ended: nothing twice, no refill.
    assert engine.finisher.succeed_many(answered, at, then=then) == 0
    assert len(calls) == 1 and outcomes.ended() == 2
    assert client.zcard(engine.queue.budget_key) == 0
    for task_id in ids:
        fields = client.hgetall(engine.queue.keys.job(task_id))
        assert (fields["state"], fields["reported"]) == ("done", "1")


def test_a_callback_and_a_poll_racing_end_a_job_once(
    client: redis.Redis, settings: Settings, admit_jobs: Callable[..., list[str]]
) -> None:
    engine, outcomes = _unstarted(client, settings)
    (job,) = _submitted(engine, client, admit_jobs(1))
    answer = [(job, Answer(job.captcha_id, "token"))]
    ended: list[int] = []
    start = threading.Barrier(4)

    def end() -> None:
        start.wait()
        ended.append(engine.finisher.succeed_many(answer, time.time()))

    threads = [threading.Thread(target=end) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert sorted(ended) == [0, 0, 0, 1]
    assert outcomes.ended() == 1


@pytest.mark.parametrize(
    ("in_flight", "fraction"),
    [(0, 1.0), (49, 1.0), (50, 0.5), (99, 0.5), (100, 0.5), (10_000, 0.5)],
)
def test_the_batched_interval_halves_as_captchas_in_flight_double(
    in_flight: int, fraction: float
) -> None:
    grid = PollGrid(1.0, batch=True, rules=CLASSIC_RULES)
    grid.note_load(in_flight)
    assert grid.interval == pytest.approx(fraction)
    # The grids nest: every tick of a longer interval is a tick of a shorter one, so
    # engines that saw slightly different loads still poll together.
    assert grid.on_tick(3.0) == 3.0


def test_the_interval_comes_back_when_the_load_falls_and_one_by_one_never_changes() -> None:
    grid = PollGrid(1.0, batch=True, rules=CLASSIC_RULES)
    grid.note_load(500)
    grid.note_load(3)
    assert grid.interval == 1.0
    alone = PollGrid(1.0, batch=False, rules=CLASSIC_RULES)
    alone.note_load(500)
    assert alone.interval == 1.0
    # A provider that refuses batch reads mid-run: its one-by-one steps are not shortened.
    refused = PollGrid(1.0, batch=True, rules=CLASSIC_RULES)
    refused.note_load(500)
    refused.batch = False
    refused.note_load(500)
    assert refused.interval == 1.0


def test_batched_first_polls_aim_lower_than_one_by_one(
    client: redis.Redis, settings: Settings
) -> None:
    samples = [1.0 + i / 100 for i in range(max(LEARN_MIN_SAMPLES, 50))]
    one_by_one = FirstPollLearner(settings, client, provider="unit-first")
    batched = FirstPollLearner(settings, client, provider="unit-first")
    batched.first_quantile = BATCH_LEARN_QUANTILE
    for s in samples:
        # A last empty poll just below the answer: the sample is (nearly) s.
        one_by_one.observe("recaptcha_v2", not_ready_at=s - 1e-6, ready_at=s)
    one_by_one.flush()
    assert batched.first_poll("recaptcha_v2") < one_by_one.first_poll("recaptcha_v2")
    # What "slower than usual" compares to stays the same quantile in both.
    assert batched.learned("recaptcha_v2") == one_by_one.learned("recaptcha_v2")


def test_a_failed_job_is_never_ended_by_a_late_answer(
    client: redis.Redis, settings: Settings, admit_jobs: Callable[..., list[str]]
) -> None:
    engine, outcomes = _unstarted(client, settings)
    (job,) = _submitted(engine, client, admit_jobs(1))
    assert engine.finisher.fail(job, CaptchaTasksError("gave up"))
    assert engine.finisher.succeed_many([(job, Answer(job.captcha_id, "late"))], time.time()) == 0
    assert list(outcomes.errors) == [job.task_id] and not outcomes.results
