"""The solve engine as plain code: a real redis-server, the sandbox, engines in threads."""

from __future__ import annotations

import dataclasses
import functools
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests

from captcha_tasks.engine import Engine, Job, admit
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.engine.timing import FirstPollLearner
from captcha_tasks.errors import (
    CaptchaTasksError,
    CaptchaUnsolvable,
    InvalidApiKey,
    SolveTimeout,
    SubmitUncertain,
)
from captcha_tasks.fleet.heartbeat import live_workers
from captcha_tasks.provider import RecaptchaV2, SolverClient
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.state.keys import STRUCTURE_TTL
from captcha_tasks.state.scripts import run
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_dev.redis_server import RedisServer
from captcha_tasks_sandbox import DEV_API_KEY
from tests.support.provider_settings import with_provider

pytestmark = pytest.mark.integration
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


class Outcomes:
    """A Completer that records what the engine ended."""

    def __init__(self) -> None:
        self.results: dict[str, dict[str, Any]] = {}
        self.errors: dict[str, CaptchaTasksError] = {}
        self._lock = threading.Lock()

    def succeed(self, job: Job, result: dict[str, Any]) -> None:
        with self._lock:
            assert job.task_id not in self.results, "a job ended twice"
            self.results[job.task_id] = result

    def fail(self, job: Job, error: CaptchaTasksError) -> None:
        with self._lock:
            assert job.task_id not in self.errors, "a job ended twice"
            self.errors[job.task_id] = error

    def ended(self) -> int:
        with self._lock:
            return len(self.results) + len(self.errors)


@pytest.fixture
def make_engines(redis_url: str) -> Iterator[Callable[..., tuple[list[Engine], Outcomes]]]:
    engines: list[Engine] = []

    def make(
        sandbox_url: str, *, count: int = 1, redis: str | None = None, **settings_fields: Any
    ) -> tuple[list[Engine], Outcomes]:
        # The provider's own (threads=, api_key=) go to its configuration.
        provider_fields = {
            name: settings_fields.pop(name)
            for name in ("threads", "api_key")
            if name in settings_fields
        }
        settings = with_provider(
            dataclasses.replace(
                Settings.from_env(
                    {
                        "CAPTCHA_TASKS_REDIS_URL": redis or redis_url,
                        "CAPTCHA_TASKS_SOLVER_URL": sandbox_url,
                        "CAPTCHAAI_API_KEY": DEV_API_KEY,
                        "CAPTCHA_TASKS_TIME_SCALE": "0.05",
                        "CAPTCHA_TASKS_HTTP_TIMEOUT": "5",
                    }
                ),
                **settings_fields,
            ),
            **provider_fields,
        )
        outcomes = Outcomes()
        made = [
            Engine(
                settings,
                state_redis(settings),
                SolverClient.from_settings(settings),
                outcomes,
                live_workers=functools.partial(
                    live_workers, state_redis(settings), Keys(settings.key_prefix)
                ),
                name=f"e{i}",
            ).start()
            for i in range(count)
        ]
        engines.extend(made)
        return made, outcomes

    yield make
    for engine in engines:
        engine.stop(timeout=10)


def _admit(engine: Engine, n: int, *, page: str = "p") -> list[str]:
    ids = []
    for i in range(n):
        task_id = str(uuid.uuid4())
        captcha = RecaptchaV2(SITEKEY, f"https://example.com/{page}/{i}")
        assert admit(engine.redis, engine.settings, task_id, captcha)
        ids.append(task_id)
    return ids


def test_the_budget_is_never_exceeded_and_every_job_solves_once(
    sandbox_factory: Any, make_engines: Any
) -> None:
    sandbox = sandbox_factory(threads=5)
    engines, outcomes = make_engines(sandbox.url, count=2, threads=5)
    ids = _admit(engines[0], 25)
    wait_until(lambda: outcomes.ended() == 25, timeout=60, what="25 solves")
    assert set(outcomes.results) == set(ids) and not outcomes.errors
    stats = sandbox.stats()
    assert stats["max_in_flight"] <= 5
    assert stats["no_slot"] == 0
    assert stats["submitted"] == 25 and stats["duplicates"] == 0
    result = outcomes.results[ids[0]]
    assert result["source"] == "api" and result["type"] == "recaptcha_v2"
    assert result["captcha_id"] and result["submits"] == 1
    assert result["expires_at"] > result["solve_seconds"]


def test_a_redelivered_admission_is_not_queued_twice(sandbox: Any, make_engines: Any) -> None:
    engines, outcomes = make_engines(sandbox.url)
    task_id = str(uuid.uuid4())
    captcha = RecaptchaV2(SITEKEY, "https://example.com/once")
    assert admit(engines[0].redis, engines[0].settings, task_id, captcha)
    assert not admit(engines[0].redis, engines[0].settings, task_id, captcha)
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the solve")
    assert sandbox.stats()["submitted"] == 1


def test_one_engine_holds_many_captchas_in_flight(sandbox_factory: Any, make_engines: Any) -> None:
    sandbox = sandbox_factory(threads=60, latency={"recaptcha_v2": 60.0})  # 3 s at 0.05
    engines, outcomes = make_engines(sandbox.url, threads=60)
    _admit(engines[0], 60)
    wait_until(lambda: sandbox.stats()["in_flight"] >= 55, timeout=20, what="55 in flight")
    wait_until(lambda: outcomes.ended() == 60, timeout=60, what="60 solves")
    assert not outcomes.errors
    assert sandbox.stats()["max_in_flight"] == 60


def test_no_slot_answers_back_off_and_never_reach_the_caller(
    sandbox_factory: Any, make_engines: Any
) -> None:
    # Another client uses half the plan: the provider refuses beyond 3 in flight.
    sandbox = sandbox_factory(threads=3)
    engines, outcomes = make_engines(sandbox.url, threads=6)
    _admit(engines[0], 12)
    wait_until(lambda: outcomes.ended() == 12, timeout=90, what="12 solves")
    assert len(outcomes.results) == 12, outcomes.errors
    stats = sandbox.stats()
    assert stats["no_slot"] > 0 and stats["max_in_flight"] <= 3
    assert stats["solved"] == 12 and stats["duplicates"] == 0
    # The budget follows what the provider holds (learned from its answers) instead
    # of asking again and again: about one "no slot" per surplus thread per probe.
    print("no-slot answers:", stats["no_slot"])
    assert stats["no_slot"] <= 12


def test_an_unsolvable_captcha_is_resubmitted_once(sandbox: Any, make_engines: Any) -> None:
    admin = f"{sandbox.url}/admin/config"
    requests.post(admin, json={"unsolvable_rate": 1.0}, timeout=5).raise_for_status()
    engines, outcomes = make_engines(sandbox.url)
    [task_id] = _admit(engines[0], 1)
    # The sandbox decides at submit time: once the first is in, the next one solves.
    wait_until(lambda: sandbox.stats()["submitted"] >= 1, timeout=30, what="the submit")
    requests.post(admin, json={"unsolvable_rate": 0.0}, timeout=5).raise_for_status()
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the resubmit")
    assert sandbox.stats()["unsolvable"] == 1
    assert outcomes.results[task_id]["submits"] == 2
    assert sandbox.stats()["submitted"] == 2


def test_unsolvable_twice_fails_with_the_providers_code(sandbox: Any, make_engines: Any) -> None:
    requests.post(f"{sandbox.url}/admin/config", json={"unsolvable_rate": 1.0}, timeout=5)
    engines, outcomes = make_engines(sandbox.url)
    [task_id] = _admit(engines[0], 1)
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the failure")
    error = outcomes.errors[task_id]
    assert isinstance(error, CaptchaUnsolvable)
    assert error.code == "ERROR_CAPTCHA_UNSOLVABLE"
    assert sandbox.stats()["submitted"] == 2


def test_a_solve_past_its_deadline_fails_with_solve_timeout(
    sandbox_factory: Any, make_engines: Any
) -> None:
    sandbox = sandbox_factory(latency={"recaptcha_v2": 600.0})  # 30 s at 0.05
    engines, outcomes = make_engines(sandbox.url)
    engines[0].settings = dataclasses.replace(engines[0].settings, time_scale=0.005)
    [task_id] = _admit(engines[0], 1)  # deadline 180 s x 0.005 = 0.9 s
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the timeout")
    assert isinstance(outcomes.errors[task_id], SolveTimeout)
    assert sandbox.stats()["submitted"] == 1


def test_a_deadline_that_passed_under_a_dead_engines_claim_still_collects_a_ready_answer(
    sandbox_factory: Any, redis_url: str, make_engines: Any
) -> None:
    """Seen in the SIGKILL fault row: an engine claimed a captcha's poll and was killed;
    by the time its claim ran out, the solve's deadline had passed, and the next engine
    failed it with SolveTimeout without asking the provider, which had the answer."""
    sandbox = sandbox_factory(latency={"recaptcha_v2": 2.0})  # ready 0.1 s after submit
    settings = Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_SOLVER_URL": sandbox.url,
            "CAPTCHAAI_API_KEY": DEV_API_KEY,
            "CAPTCHA_TASKS_TIME_SCALE": "0.05",
        }
    )
    client, keys = state_redis(settings), Keys(settings.key_prefix)
    task_id, captcha = str(uuid.uuid4()), RecaptchaV2(SITEKEY, "https://example.com/late")
    assert admit(client, settings, task_id, captcha)
    # What the dead engine left: submitted 30 s ago (deadline 9 s), its claim just ended.
    captcha_id = SolverClient.from_settings(settings).submit(captcha)
    time.sleep(0.3)  # the provider has the answer now
    client.zrem(keys.waiting, task_id)
    client.hset(
        keys.job(task_id),
        mapping={
            "state": "polling",
            "captcha_id": captcha_id,
            "submits": 1,
            "submitted_at": time.time() - 30,
        },
    )
    client.zadd(keys.due, {task_id: time.time()})

    _, outcomes = make_engines(sandbox.url)
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the last poll")
    assert not outcomes.errors, outcomes.errors
    assert outcomes.results[task_id]["captcha_id"] == captcha_id
    assert sandbox.stats()["submitted"] == 1


def test_a_poll_comes_on_time_on_a_redis_whose_timers_tick_once_a_second(
    sandbox_factory: Any, make_engines: Any
) -> None:
    """An idle engine sleeps until its next poll by its own clock. redis-server checks
    blocking commands' timeouts at its ``hz`` tick: an engine that slept in a ``BLPOP``
    timeout polled up to 100 ms late on a default (hz 10) idle server, and here up to
    a second late (its 0.15 s wait ended at the tick, 0.85 s late)."""
    sandbox = sandbox_factory(time_scale=0.01, latency={"recaptcha_v2": 2.0}, jitter=0.0)
    with RedisServer(extra_args=["--hz", "1"]) as slow_ticks:
        engines, outcomes = make_engines(
            sandbox.url, redis=slow_ticks.url, time_scale=0.01, batch_poll="off"
        )
        engine = engines[0]
        first_poll = engine.learner.default("recaptcha_v2")  # 15 s * 0.01: nothing learned
        late = []
        for i in range(3):  # one at a time: the engine idles before each poll
            (task_id,) = _admit(engine, 1, page=f"tick{i}")
            start = time.monotonic()
            wait_until(lambda n=i + 1: outcomes.ended() == n, timeout=10, what="a solve")
            assert task_id in outcomes.results, outcomes.errors
            late.append(time.monotonic() - start - first_poll)
        assert max(late) < 0.4, late
        for each in engines:
            each.stop(timeout=10)


def test_waiting_past_the_queue_timeout_fails_clearly(
    sandbox_factory: Any, make_engines: Any
) -> None:
    sandbox = sandbox_factory(threads=1, latency={"recaptcha_v2": 100.0})  # 5 s each
    engines, outcomes = make_engines(sandbox.url, threads=1, queue_timeout=1.0)
    first, second = _admit(engines[0], 2)
    wait_until(lambda: second in outcomes.errors, timeout=30, what="the queue timeout")
    assert isinstance(outcomes.errors[second], SolveTimeout)
    assert "no free thread" in str(outcomes.errors[second])
    wait_until(lambda: first in outcomes.results, timeout=30, what="the first solve")


def test_a_dead_holders_lease_comes_back(sandbox: Any, make_engines: Any) -> None:
    engines, outcomes = make_engines(sandbox.url, threads=1)
    keys = Keys(engines[0].settings.key_prefix)
    # A holder whose worker died: its lease ran out a second ago.
    engines[0].redis.zadd(keys.budget, {"dead-task": engines[0].clock() - 1})
    [task_id] = _admit(engines[0], 1)
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the solve")
    assert task_id in outcomes.results
    assert engines[0].redis.zscore(keys.budget, "dead-task") is None


def test_a_wrong_key_fails_every_job_with_its_code(sandbox: Any, make_engines: Any) -> None:
    engines, outcomes = make_engines(sandbox.url, api_key="c" * 32)
    engines[0].provider = SolverClient(sandbox.url, "c" * 32, timeout=5)
    [task_id] = _admit(engines[0], 1)
    wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the failure")
    error = outcomes.errors[task_id]
    assert isinstance(error, InvalidApiKey) and error.code == "ERROR_KEY_DOES_NOT_EXIST"
    assert sandbox.stats()["submitted"] == 0


def test_polls_stay_few_per_solve(sandbox_factory: Any, make_engines: Any) -> None:
    sandbox = sandbox_factory(threads=20)
    engines, outcomes = make_engines(sandbox.url, count=2, threads=20)
    _admit(engines[0], 60)
    wait_until(lambda: outcomes.ended() == 60, timeout=60, what="60 solves")
    stats = sandbox.stats()
    assert stats["polls"] / stats["solved"] <= 2.0


def test_one_by_one_polling_when_batches_are_off(sandbox: Any, make_engines: Any) -> None:
    engines, outcomes = make_engines(sandbox.url, batch_poll="off")
    _admit(engines[0], 5)
    wait_until(lambda: outcomes.ended() == 5, timeout=60, what="5 solves")
    assert len(outcomes.results) == 5


def test_the_first_poll_is_learned_from_recent_solves(redis_url: str) -> None:
    settings = Settings.from_env(
        {"CAPTCHA_TASKS_REDIS_URL": redis_url, "CAPTCHA_TASKS_TIME_SCALE": "1"}
    )
    learner = FirstPollLearner(settings, state_redis(settings), refresh=0)
    assert learner.first_poll("image") == 5.0  # the documented default, before samples
    for ready in (2.0, 2.2, 2.4, 2.6, 2.8, 3.0, 3.2, 3.4, 3.6, 3.8):
        learner.observe("image", not_ready_at=ready - 0.2, ready_at=ready)
    learned = learner.first_poll("image")
    assert 2.0 <= learned <= 2.6  # a low quantile of ready times, not the 5 s default


def test_a_jobs_proxy_goes_to_the_provider_from_the_pool(make_engines: Any) -> None:
    from captcha_tasks.session.proxies import ProxyPool
    from tests.support.provider_double import DEFAULT_KEY, ProviderDouble

    with ProviderDouble() as provider:
        engines, outcomes = make_engines(provider.base_url, api_key=DEFAULT_KEY)
        engines[0].provider = SolverClient(provider.base_url, DEFAULT_KEY, timeout=5)
        pool = ProxyPool(engines[0].redis, engines[0].settings)
        proxy_id = pool.add("http://bob:s3cret-pw@203.0.113.9:3128")
        task_id = str(uuid.uuid4())
        captcha = RecaptchaV2(SITEKEY, "https://example.com/proxied")
        assert admit(engines[0].redis, engines[0].settings, task_id, captcha, proxy_id=proxy_id)
        wait_until(lambda: outcomes.ended() == 1, timeout=30, what="the solve")
        assert task_id in outcomes.results
        [submit] = [r for r in provider.requests if r.endpoint == "/in.php"]
        assert submit.params["proxy"] == "bob:s3cret-pw@203.0.113.9:3128"
        assert submit.params["proxytype"] == "HTTP"
        # Only the id travels through Redis job records, never the credentials.
        assert "s3cret-pw" not in str(engines[0].redis.hgetall(f"ct:job:{task_id}"))


def test_an_engine_whose_key_is_refused_steps_aside_for_the_others(
    sandbox: Any, make_engines: Any
) -> None:
    # Mid-rollout, one worker came up with a bad key: its refusals must not fail the
    # fleet's requests; the healthy engine solves them. The bad engine meets the jobs
    # alone first: beside a running healthy engine it might never claim one (on a
    # loaded machine the healthy one took all twelve first, and the test showed nothing).
    (bad,), outcomes = make_engines(sandbox.url)
    bad.provider = SolverClient(sandbox.url, "d" * 32, timeout=5)
    for worker in ("good@host", "bad@host"):  # both workers beat: the fleet has another
        bad.redis.set(Keys().heartbeat(worker), "{}", ex=60)
    ids = _admit(bad, 12)
    wait_until(lambda: sandbox.stats()["bad_key"] >= 1, timeout=30, what="the bad key refused")
    (good,), _ = make_engines(sandbox.url)
    good.completer = outcomes
    wait_until(lambda: outcomes.ended() == 12, timeout=60, what="12 solves")
    assert set(outcomes.results) == set(ids), outcomes.errors
    assert sandbox.stats()["bad_key"] >= 1  # the bad engine did try, then stepped aside
    assert bad.stats.snapshot().get("paused", 0) >= 1


# -- a submit is never sent twice ------------------------------------------------------


def test_a_submit_answered_too_late_fails_uncertain_and_is_sent_once(
    sandbox_factory: Any, make_engines: Any
) -> None:
    # Every in.php answer comes after the client's timeout; the submits take effect.
    sandbox = sandbox_factory(slow_rate=1.0, slow_seconds=2.0, fault_paths=("in.php",))
    engines, outcomes = make_engines(sandbox.url, http_timeout=0.5)
    ids = _admit(engines[0], 3)
    wait_until(lambda: outcomes.ended() == 3, timeout=30, what="3 failures")
    for task_id in ids:
        error = outcomes.errors[task_id]
        assert isinstance(error, SubmitUncertain) and error.code == "SUBMIT_OUTCOME_UNKNOWN"
        assert "not paid twice" in str(error)
    time.sleep(1.0)  # longer than a transient error's back-off (0.25 s at this scale)
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"], stats["slow_injected"]) == (3, 0, 3)
    assert len({c["fingerprint"] for c in _sandbox_captchas(sandbox)}) == 3
    counts = engines[0].stats.snapshot()
    assert counts["submit_uncertain"] == counts["failed:SUBMIT_OUTCOME_UNKNOWN"] == 3
    keys = Keys(engines[0].settings.key_prefix)
    assert engines[0].redis.zcard(keys.budget) == 0  # their threads are free again
    assert engines[0].redis.hget(keys.job(ids[0]), "error") == "SUBMIT_OUTCOME_UNKNOWN"


def test_slow_poll_answers_are_retried_and_every_job_submits_once(
    sandbox_factory: Any, make_engines: Any
) -> None:
    sandbox = sandbox_factory(slow_rate=1.0, slow_seconds=1.0, fault_paths=("res.php",))
    engines, outcomes = make_engines(sandbox.url, http_timeout=0.5)
    ids = _admit(engines[0], 5)
    wait_until(lambda: sandbox.stats()["slow_injected"] >= 2, timeout=30, what="slow polls")
    _configure(sandbox, slow_rate=0.0)
    wait_until(lambda: outcomes.ended() == 5, timeout=30, what="5 solves")
    assert set(outcomes.results) == set(ids), outcomes.errors
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (5, 0)
    assert engines[0].stats.snapshot()["poll_retry:NETWORK"] >= 2
    assert all(result["submits"] == 1 for result in outcomes.results.values())


@pytest.mark.parametrize("readers", ["all", "one"])
def test_reads_that_keep_failing_end_in_a_timeout_at_the_deadline(
    sandbox_factory: Any, make_engines: Any, readers: str
) -> None:
    # Every read answers 502 (a transient error: retried) from the moment of submit on.
    sandbox = sandbox_factory(fail_rate=1.0, fault_paths=("res.php",))
    engines, outcomes = make_engines(sandbox.url, readers=readers)
    ids = _admit(engines[0], 3)
    deadline = engines[0].settings.scaled(180.0)  # reCAPTCHA v2's, scaled: 9 s
    started = time.monotonic()
    wait_until(lambda: outcomes.ended() == 3, timeout=deadline + 15, what="3 timeouts")
    took = time.monotonic() - started
    for task_id in ids:
        error = outcomes.errors[task_id]
        assert isinstance(error, SolveTimeout), error
        assert "502" in str(error) or "HTTP" in str(error), error  # the reads' failure named
    # Given up at the deadline, not before it and not long after (a retry's back-off).
    assert deadline * 0.9 <= took <= deadline + 5, took
    stats = sandbox.stats()
    assert stats["submitted"] == 3 and stats["duplicates"] == 0 and stats["errors_injected"] >= 3


def test_502_bursts_on_submit_are_retried_and_every_job_submits_once(
    sandbox_factory: Any, make_engines: Any
) -> None:
    sandbox = sandbox_factory(fail_rate=1.0, fault_paths=("in.php",))
    engines, outcomes = make_engines(sandbox.url)
    ids = _admit(engines[0], 5)
    wait_until(lambda: sandbox.stats()["errors_injected"] >= 8, timeout=30, what="502 pages")
    _configure(sandbox, fail_rate=0.0)
    wait_until(lambda: outcomes.ended() == 5, timeout=30, what="5 solves")
    assert set(outcomes.results) == set(ids), outcomes.errors
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (5, 0)
    assert engines[0].stats.snapshot()["submit_retry:HTTP_502"] >= 8
    assert all(result["submits"] == 1 for result in outcomes.results.values())


def test_a_dead_engines_jobs_are_resubmitted_only_if_never_sent(
    sandbox: Any, redis_url: str, make_engines: Any
) -> None:
    settings = _engine_settings(redis_url, sandbox.url)
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    never_sent, being_sent = str(uuid.uuid4()), str(uuid.uuid4())
    for task_id in (never_sent, being_sent):
        captcha = RecaptchaV2(SITEKEY, f"https://example.com/dead/{task_id}")
        assert admit(client, settings, task_id, captcha, now=time.time())  # the test's clock
    # An engine took both (its claims have run out since), started sending one, and died.
    now = time.time()
    # (claims that ran out a second ago)
    taken = [c.job.task_id for c in SolveQueue(client, settings, claim_s=-1).acquire(now, 2)]
    assert sorted(taken) == sorted([never_sent, being_sent])
    marked = run(
        client,
        "sending",
        [keys.job(being_sent), keys.due],
        [being_sent, now - 1, now, "dead-engine", STRUCTURE_TTL],
    )
    assert marked == 1
    assert client.hget(keys.job(never_sent), "state") == "submitting"

    engines, outcomes = make_engines(sandbox.url)
    wait_until(lambda: outcomes.ended() == 2, timeout=30, what="both jobs ended")
    assert outcomes.results[never_sent]["submits"] == 1
    error = outcomes.errors[being_sent]
    assert isinstance(error, SubmitUncertain) and error.code == "SUBMIT_OUTCOME_UNKNOWN"
    assert "dead-engine" in str(error)
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (1, 0)  # only the never-sent one
    counts = engines[0].stats.snapshot()
    assert counts["resubmits_after_crash"] == 1
    assert counts["submit_uncertain"] == counts["submit_uncertain_after_crash"] == 1
    assert client.zcard(keys.budget) == 0

    # An engine that took a job before the others took it over sends nothing.
    stale = Job.from_fields(
        being_sent, {**client.hgetall(keys.job(being_sent)), "state": "submitting"}
    )
    engines[0]._submit(stale)
    assert engines[0].stats.snapshot()["send_skipped"] == 1
    assert sandbox.stats()["submitted"] == 1


def test_jobs_a_dead_engine_ended_but_never_reported_are_reported(
    sandbox: Any, redis_url: str, make_engines: Any
) -> None:
    # The engine ended two jobs in Redis (one solved, one failed) and died before telling
    # Celery: without the stored outcome both tasks would wait forever (lost).
    settings = _engine_settings(redis_url, sandbox.url)
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    solved, failed, reported = str(uuid.uuid4()), str(uuid.uuid4()), str(uuid.uuid4())
    for task_id in (solved, failed, reported):
        captcha = RecaptchaV2(SITEKEY, f"https://example.com/ended/{task_id}")
        assert admit(client, settings, task_id, captcha, now=time.time())  # the test's clock
    now = time.time()
    taken = SolveQueue(client, settings, claim_s=60).acquire(now, 3)
    assert len(taken) == 3
    finish_keys = [keys.budget, keys.wake, keys.waiting]
    # finish.lua's spend type, nano-USD and TTL (nothing to count), expected state and
    # claim (any), and a wake-up for a waiting job.
    no_spend = ["", 0, 0, "", "", 1]
    result = {"type": "recaptcha_v2", "solution": "token-from-before", "submits": 1}
    assert run(
        client,
        "finish",
        [keys.job(solved), keys.due, *finish_keys],
        [solved, "", "done", now - 1, *no_spend, "result", json.dumps(result)],
    )
    assert run(
        client,
        "finish",
        [keys.job(failed), keys.due, *finish_keys],
        [
            failed,
            "",
            "failed",
            now - 1,
            *no_spend,
            "error",
            "TIMEOUT",
            "error_type",
            "SolveTimeout",
            "error_message",
            "no answer 9 s after submit",
        ],
    )
    # This one was reported before its engine died: nothing more to do.
    done = [reported, "", "done", now - 1, *no_spend, "result", json.dumps(result), "reported", "1"]
    assert run(client, "finish", [keys.job(reported), keys.due, *finish_keys], done)

    engines, outcomes = make_engines(sandbox.url)
    wait_until(lambda: outcomes.ended() == 2, timeout=30, what="both reported")
    assert outcomes.results == {solved: result}
    error = outcomes.errors[failed]
    assert isinstance(error, SolveTimeout) and error.code == "TIMEOUT"
    wait_until(lambda: client.zcard(keys.due) == 0, timeout=10, what="due emptied")
    assert engines[0].stats.snapshot()["reported_after_crash"] == 2
    assert sandbox.stats()["submitted"] == 0


def _configure(sandbox: Any, **changes: Any) -> None:
    requests.post(f"{sandbox.url}/admin/config", json=changes, timeout=5).raise_for_status()


def _sandbox_captchas(sandbox: Any) -> list[dict[str, Any]]:
    reply = requests.get(f"{sandbox.url}/admin/captchas", timeout=5)
    reply.raise_for_status()
    return list(reply.json()["captchas"])


def _engine_settings(redis_url: str, sandbox_url: str) -> Settings:
    """The settings ``make_engines`` gives its engines (for state set up before them)."""
    return Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_SOLVER_URL": sandbox_url,
            "CAPTCHAAI_API_KEY": DEV_API_KEY,
            "CAPTCHA_TASKS_TIME_SCALE": "0.05",
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "5",
        }
    )


def test_retried_provider_calls_are_logged_without_flooding(
    sandbox_factory: Any, make_engines: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A provider that is away is seen in the worker's log (retries were silent), once per
    interval however many calls fail."""
    sandbox = sandbox_factory(fail_rate=1.0)  # every request: an HTML 502 page
    engines, _ = make_engines(sandbox.url)
    with caplog.at_level("WARNING", logger="captcha_tasks.engine.loop"):
        _admit(engines[0], 3)
        wait_until(lambda: sandbox.stats()["requests"] >= 6, timeout=30, what="retried submits")
    lines = [r.getMessage() for r in caplog.records if "failed, retrying" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "a submit failed, retrying" in lines[0] and "502" in lines[0]
