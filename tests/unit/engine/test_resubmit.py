"""An unsolvable captcha's one resubmit: the new captcha starts afresh (its reads, its
last empty poll), while the result still counts every provider call of the solve."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from captcha_tasks.engine import Engine
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.engine.timing import TOKEN_TTL
from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks.provider import Answer, Polled
from captcha_tasks.provider.poll_rules import CLASSIC_RULES
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until

from .conftest import FakeProvider, Outcomes

RunEngine = Callable[[FakeProvider], Outcomes]


def unsolvable_after_a_wait_then_ready(captcha_id: str, poll: int) -> Polled:
    """The first captcha: not ready, then unsolvable; the resubmitted one: ready at once."""
    if captcha_id == "c1":
        if poll == 1:
            return None
        return CaptchaUnsolvable("workers gave up", "ERROR_CAPTCHA_UNSOLVABLE")
    return Answer(captcha_id, f"token-{captcha_id}")


@pytest.fixture
def run_engine(client: redis.Redis, settings: Settings) -> Iterator[RunEngine]:
    engines: list[Engine] = []

    def run(provider: FakeProvider) -> Outcomes:
        outcomes = Outcomes()
        engine = Engine(
            settings, client, provider, outcomes, live_workers=lambda: ["w"], name="resubmit"
        )
        engines.append(engine.start())
        return outcomes

    yield run
    for engine in engines:
        engine.stop(timeout=10)


def _solve_once(
    run_engine: RunEngine, admit_jobs: Callable[..., list[str]], provider: FakeProvider
) -> tuple[str, dict[str, object]]:
    outcomes = run_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the solve")
    assert task_id in outcomes.results, outcomes.errors
    return task_id, outcomes.results[task_id]


def test_the_resubmitted_captcha_counts_from_its_own_submit(
    run_engine: RunEngine,
    admit_jobs: Callable[..., list[str]],
    client: redis.Redis,
    keys: Keys,
    settings: Settings,
) -> None:
    provider = FakeProvider(unsolvable_after_a_wait_then_ready)
    task_id, result = _solve_once(run_engine, admit_jobs, provider)
    assert [c for c, _ in provider.submitted] == ["c1", "c2"]
    assert result["captcha_id"] == "c2" and result["solution"] == "token-c2"
    job = client.hgetall(keys.job(task_id))
    submitted_at = float(job["submitted_at"])
    # The second captcha answered its first poll: its token is no older than its submit,
    # not counted from the first captcha's last empty poll (which came before it).
    ttl = settings.scaled(TOKEN_TTL["recaptcha_v2"])
    assert result["expires_at"] == pytest.approx(submitted_at + ttl, abs=0.002)
    # The learner hears "the first poll answered, after solve_seconds": a sample from
    # the later half of that wait, never one pulled down (or below zero) by the old
    # captcha's poll.
    (sample,) = client.lrange(keys.timing("recaptcha_v2"), 0, -1)
    solve_seconds = float(result["solve_seconds"])
    assert 0.5 * solve_seconds - 0.002 <= float(sample) <= solve_seconds + 0.002
    assert float(sample) > 0


def test_the_result_counts_every_provider_call_of_the_solve(
    run_engine: RunEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    provider = FakeProvider(unsolvable_after_a_wait_then_ready)
    _, result = _solve_once(run_engine, admit_jobs, provider)
    reads = provider.count("get") + sum(
        len(ids) for kind, ids in provider.requests if kind == "get_many"
    )
    # c1: not ready, unsolvable; c2: the answer.
    assert (result["submits"], result["polls"]) == (2, 3) == (provider.count("submit"), reads)


def test_the_read_cap_counts_the_reads_of_the_new_captcha_only(
    run_engine: RunEngine, admit_jobs: Callable[..., list[str]]
) -> None:
    # Two reads of a task, then the provider loses it: c1 used both; c2 gets its own two.
    rules = dataclasses.replace(CLASSIC_RULES, provider="tiny", max_reads=2)

    def c2_ready_on_second_poll(captcha_id: str, poll: int) -> Polled:
        if captcha_id == "c1":
            return unsolvable_after_a_wait_then_ready(captcha_id, poll)
        return Answer(captcha_id, "token") if poll == 2 else None

    provider = FakeProvider(c2_ready_on_second_poll, poll_rules=rules)
    _, result = _solve_once(run_engine, admit_jobs, provider)
    assert (result["captcha_id"], result["polls"]) == ("c2", 4)


def test_submitted_resets_what_belongs_to_the_previous_captcha(
    client: redis.Redis, settings: Settings, keys: Keys, admit_jobs: Callable[..., list[str]]
) -> None:
    queue = SolveQueue(client, settings, claim_s=30.0)
    (task_id,) = admit_jobs(1)
    now = time.time()
    (taken,) = queue.acquire(now, 10)
    assert queue.sending(taken.job, now, "me")
    assert queue.submitted(taken.job, "c1", now, now)
    (polled,) = queue.claim(now, 10)
    assert queue.reschedule(polled.job, now + 2, polled=True, at=now + 1)
    assert queue.reschedule(polled.job, now + 3, polled=True, at=now + 2)
    (polled,) = queue.claim(now + 3, 10)
    assert queue.requeue(polled.job, "polling", now + 4, counter="resubmits")  # unsolvable
    (again,) = queue.acquire(now + 4, 10)
    assert queue.sending(again.job, now + 4, "me")
    assert queue.submitted(again.job, "c2", now + 5, now + 6)
    fields = client.hgetall(keys.job(task_id))
    assert "last_poll_at" not in fields
    assert (fields["captcha_id"], fields["polls"], fields["submits"]) == ("c2", "0", "2")
    assert float(fields["submitted_at"]) == pytest.approx(now + 5)
    # The first captcha's three reads (two empty, one unsolvable) stay in the solve's count.
    assert fields["earlier_polls"] == "3"
