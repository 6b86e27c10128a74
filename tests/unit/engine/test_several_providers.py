"""Several providers at once: routing in acquire.lua, the breaker, and
failover between two engines (one per provider) against a real redis-server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
import redis

from captcha_tasks.engine import Engine, admit
from captcha_tasks.engine.breaker import COOLDOWN, FAILURES_TO_OPEN, Breaker
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.errors import (
    CaptchaUnsolvable,
    InsufficientFunds,
    InvalidApiKey,
    ProviderUnavailable,
)
from captcha_tasks.provider import Answer, Polled, RecaptchaV2
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import wait_until

from .conftest import SITEKEY, FakeProvider, Outcomes

MAIN_KEY = "M41nKey" + "x" * 25
BACKUP_KEY = "CAP-" + "ab" * 16


def two(redis_url: str, **extra: str) -> Settings:
    return Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_TIME_SCALE": "0.05",
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "2",
            "CAPTCHA_TASKS_PROVIDERS": "main,backup",
            "CAPTCHA_TASKS_MAIN_PROTOCOL": "captchaai",
            "CAPTCHA_TASKS_MAIN_API_KEY": MAIN_KEY,
            "CAPTCHA_TASKS_MAIN_THREADS": "2",
            "CAPTCHA_TASKS_BACKUP_PROTOCOL": "capsolver",
            "CAPTCHA_TASKS_BACKUP_API_KEY": BACKUP_KEY,
            "CAPTCHA_TASKS_BACKUP_THREADS": "3",
            **extra,
        }
    )


@pytest.fixture
def settings(redis_url: str) -> Settings:
    return two(redis_url)


@pytest.fixture
def client(settings: Settings) -> redis.Redis:
    return state_redis(settings)


def queues(client: redis.Redis, settings: Settings) -> dict[str, SolveQueue]:
    return {
        c.name: SolveQueue(client, settings, claim_s=30, provider=c.name)
        for c in settings.providers()
    }


def admit_n(
    client: redis.Redis, settings: Settings, n: int, route: tuple[str, ...] = ("main", "backup")
) -> list[str]:
    now = 1000.0
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for i, task_id in enumerate(ids):
        captcha = RecaptchaV2(SITEKEY, f"https://example.com/{i}")
        assert admit(client, settings, task_id, captcha, now=now + i * 0.001, route=route)
    return ids


# -- acquire.lua: routing ------------------------------------------------------------------


def test_a_job_goes_to_the_first_provider_of_its_route_with_a_free_thread(
    client: redis.Redis, settings: Settings
) -> None:
    q = queues(client, settings)
    ids = admit_n(client, settings, 6)
    # backup looks first but main (preferred) has 2 free threads: the 2 oldest are main's.
    backup = [c.job.task_id for c in q["backup"].acquire(1001.0, 10)]
    assert backup == ids[2:5]
    main = [c.job.task_id for c in q["main"].acquire(1001.0, 10)]
    assert main == ids[:2]
    assert [c.job.provider for c in q["main"].acquire(1001.0, 10)] == []  # full
    keys = Keys(settings.key_prefix)
    assert client.hget(keys.job(ids[0]), "provider") == "main"
    assert client.hget(keys.job(ids[2]), "provider") == "backup"
    assert client.zcard(keys.provider_budget("main")) == 2
    assert client.zcard(keys.provider_budget("backup")) == 3
    # Each engine's claims are in its own poll schedule.
    assert set(client.zrange(keys.due_of("backup"), 0, -1)) == set(ids[2:5])
    assert client.zscore(keys.waiting, ids[5]) is not None  # no thread left anywhere


def test_a_route_narrowed_to_one_provider_waits_for_it(
    client: redis.Redis, settings: Settings
) -> None:
    q = queues(client, settings)
    pinned = admit_n(client, settings, 3, route=("main",))
    assert q["backup"].acquire(1001.0, 10) == []  # never backup's, even with threads free
    assert [c.job.task_id for c in q["main"].acquire(1001.0, 10)] == pinned[:2]


def test_a_job_admitted_before_routes_existed_takes_every_provider_in_order(
    client: redis.Redis, settings: Settings
) -> None:
    q = queues(client, settings)
    (old,) = admit_n(client, settings, 1, route=())
    assert client.hget(Keys(settings.key_prefix).job(old), "route") == ""
    assert q["backup"].acquire(1001.0, 10) == []
    assert [c.job.task_id for c in q["main"].acquire(1001.0, 10)] == [old]


def test_an_open_breaker_sends_jobs_to_the_next_provider_then_one_probe_tries_it(
    client: redis.Redis, settings: Settings
) -> None:
    q = queues(client, settings)
    keys = Keys(settings.key_prefix)
    ids = admit_n(client, settings, 5)
    client.hset(keys.breaker("main"), mapping={"state": "open", "until": 1100.0})
    assert q["main"].acquire(1001.0, 10) == []
    assert [c.job.task_id for c in q["backup"].acquire(1001.0, 10)] == ids[:3]
    # Past its cool-down: exactly one job, the probe, may take it.
    probe = [c.job.task_id for c in q["main"].acquire(1101.0, 10)]
    assert probe == [ids[3]]
    assert client.hget(keys.breaker("main"), "state") == "half_open"
    assert client.hget(keys.breaker("main"), "probe") == ids[3]
    assert q["main"].acquire(1102.0, 10) == []  # the probe is out
    # The probe's submit was accepted: closed, main takes work again.
    breaker = Breaker(client, settings, "main", clock=lambda: 1103.0)
    breaker.ok()
    assert client.hget(keys.breaker("main"), "state") == "closed"
    assert [c.job.task_id for c in q["main"].acquire(1104.0, 10)] == [ids[4]]


def test_a_job_past_its_queue_deadline_is_taken_without_a_thread(
    client: redis.Redis, settings: Settings
) -> None:
    q = queues(client, settings)
    keys = Keys(settings.key_prefix)
    (late,) = admit_n(client, settings, 1, route=("nowhere",))  # no configured provider
    later = 1000.0 + settings.queue_timeout + 1
    taken = q["backup"].acquire(later, 10)
    assert [c.job.task_id for c in taken] == [late]
    assert client.zcard(keys.provider_budget("backup")) == 0


# -- the breaker ---------------------------------------------------------------------------


def test_the_breaker_opens_after_failures_in_a_row_and_doubles_its_cooldown(
    client: redis.Redis, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    now = [1000.0]
    breaker = Breaker(client, settings, "main", clock=lambda: now[0])
    key = Keys(settings.key_prefix).breaker("main")
    for _ in range(FAILURES_TO_OPEN - 2):
        assert not breaker.failed("ERROR_SERVER_ERROR")
    breaker.ok()  # a success ends the run
    for _ in range(FAILURES_TO_OPEN - 1):
        assert not breaker.failed("ERROR_SERVER_ERROR")
    assert client.hget(key, "state") in (None, "closed")
    assert breaker.failed("NETWORK")
    cooldown = settings.scaled(COOLDOWN)
    assert client.hgetall(key)["state"] == "open"
    assert (
        client.hget(key, "reason")
        == f"{FAILURES_TO_OPEN} transient failures in a row, the last NETWORK"
    )
    assert float(client.hget(key, "until") or 0) == pytest.approx(1000.0 + cooldown)
    assert "provider main: breaker open for" in caplog.text
    assert client.ttl(key) > 0
    # The probe fails: open again, twice as long.
    client.hset(key, "state", "half_open")
    assert breaker.failed("probe failed")
    assert float(client.hget(key, "cooldown") or 0) == pytest.approx(2 * cooldown)
    assert not breaker.trip("already open")


def test_answers_far_slower_than_learned_open_the_breaker(
    client: redis.Redis, settings: Settings
) -> None:
    breaker = Breaker(client, settings, "main", clock=lambda: 1000.0)
    key = Keys(settings.key_prefix).breaker("main")
    breaker.answered(50.0, None)  # nothing learned yet: nothing to compare
    for _ in range(FAILURES_TO_OPEN - 1):
        breaker.answered(4.0, 1.0)
    breaker.answered(1.2, 1.0)  # one in normal time ends the run
    for _ in range(FAILURES_TO_OPEN - 1):
        breaker.answered(4.0, 1.0)
    assert client.hget(key, "state") in (None, "closed")
    breaker.answered(4.0, 1.0)
    assert client.hget(key, "state") == "open"
    assert "slower than learned" in (client.hget(key, "reason") or "")


def test_a_trip_opens_at_once_and_counts_no_transient_failure(
    client: redis.Redis, settings: Settings
) -> None:
    breaker = Breaker(client, settings, "main", clock=lambda: 1000.0)
    assert breaker.trip("zero balance")
    state = client.hgetall(Keys(settings.key_prefix).breaker("main"))
    assert (state["state"], state["reason"], state.get("failures", "0")) == (
        "open",
        "zero balance",
        "0",
    )


def test_with_one_provider_the_breaker_is_off(redis_url: str) -> None:
    settings = Settings.from_env({"CAPTCHA_TASKS_REDIS_URL": redis_url})
    client = state_redis(settings)
    breaker = Breaker(client, settings, "default", clock=lambda: 1.0)
    assert not breaker.trip("zero balance")
    assert client.exists(Keys(settings.key_prefix).breaker("default")) == 0


# -- two engines: failover ---------------------------------------------------------------


@pytest.fixture
def engines(client: redis.Redis, settings: Settings) -> Iterator[dict[str, object]]:
    made: list[Engine] = []

    def start(providers: dict[str, FakeProvider], outcomes: Outcomes) -> list[Engine]:
        for config in settings.providers():
            made.append(
                Engine(
                    settings,
                    client,
                    providers[config.name],
                    outcomes,
                    live_workers=lambda: ["w"],
                    name=f"unit/{config.name}",
                    provider_name=config.name,
                ).start()
            )
        return made

    yield {"start": start}
    for engine in made:
        engine.stop(timeout=10)


def run_jobs(client: redis.Redis, settings: Settings, n: int, outcomes: Outcomes) -> list[str]:
    ids = [str(uuid.uuid4()) for _ in range(n)]
    for i, task_id in enumerate(ids):
        assert admit(
            client,
            settings,
            task_id,
            RecaptchaV2(SITEKEY, f"https://example.com/{i}"),
            route=("main", "backup"),
        )
    wait_until(lambda: outcomes.ended() == n, timeout=30, what=f"{n} jobs ended")
    return ids


def submits_per_payload(*providers: FakeProvider) -> dict[str, int]:
    seen: dict[str, int] = {}
    for provider in providers:
        for _, captcha in provider.submitted:
            seen[captcha.pageurl] = seen.get(captcha.pageurl, 0) + 1  # type: ignore[attr-defined]
    return seen


def test_zero_balance_fails_over_to_the_next_provider_without_a_second_accepted_submit(
    client: redis.Redis, settings: Settings, engines: dict[str, object]
) -> None:
    main = FakeProvider(submit_error=InsufficientFunds("ERROR_ZERO_BALANCE"))
    backup, outcomes = FakeProvider(), Outcomes()
    engines["start"]({"main": main, "backup": backup}, outcomes)  # type: ignore[operator]
    run_jobs(client, settings, 12, outcomes)
    assert outcomes.errors == {}
    assert {r["provider"] for r in outcomes.results.values()} == {"backup"}
    assert {r["protocol"] for r in outcomes.results.values()} == {"capsolver"}
    assert main.submitted == []  # main never accepted one
    assert set(submits_per_payload(backup).values()) == {1}  # each solved once, at backup
    assert main.count("submit") <= settings.providers()[0].threads  # refused, then skipped
    state = client.hgetall(Keys(settings.key_prefix).breaker("main"))
    assert state["state"] == "open" and state["reason"] == "zero balance"


def test_a_key_refused_by_every_worker_moves_the_work_to_the_next_provider(
    client: redis.Redis, settings: Settings, engines: dict[str, object]
) -> None:
    # One live worker ("w"), its key for main refused: no engine anywhere can submit to
    # main, so nothing routed there may fail with the refusal while backup is on its
    # route: neither the job that met it, nor those the paused engine takes, nor a probe.
    refused = InvalidApiKey("ERROR_KEY_DOES_NOT_EXIST: refused", "ERROR_KEY_DOES_NOT_EXIST")
    main = FakeProvider(submit_error=refused, key_refused=True)
    backup, outcomes = FakeProvider(), Outcomes()
    started = engines["start"]({"main": main, "backup": backup}, outcomes)  # type: ignore[operator]
    run_jobs(client, settings, 12, outcomes)
    assert started[0].refusal.paused
    # The breaker's cool-down ends at once: the next job is main's half-open probe.
    client.hset(Keys(settings.key_prefix).breaker("main"), "until", 0)
    for i in range(4):
        probe = RecaptchaV2(SITEKEY, f"https://example.com/probe{i}")
        assert admit(client, settings, str(uuid.uuid4()), probe, route=("main", "backup"))
    wait_until(lambda: outcomes.ended() == 16, timeout=30, what="16 jobs ended")
    assert outcomes.errors == {}
    assert {r["provider"] for r in outcomes.results.values()} == {"backup"}
    assert main.submitted == []
    assert set(submits_per_payload(backup).values()) == {1}


def test_repeated_transient_failures_open_the_breaker_and_move_the_work(
    client: redis.Redis, settings: Settings, engines: dict[str, object]
) -> None:
    main = FakeProvider(submit_error=ProviderUnavailable("HTTP 502"))
    backup, outcomes = FakeProvider(), Outcomes()
    engines["start"]({"main": main, "backup": backup}, outcomes)  # type: ignore[operator]
    run_jobs(client, settings, 10, outcomes)
    assert outcomes.errors == {}
    assert {r["provider"] for r in outcomes.results.values()} == {"backup"}
    # Opened at the FAILURES_TO_OPEN-th failure in a row; a few calls already in flight.
    assert FAILURES_TO_OPEN <= main.count("submit") <= FAILURES_TO_OPEN + 2
    assert client.hget(Keys(settings.key_prefix).breaker("main"), "state") == "open"


def test_an_unsolvable_captcha_is_tried_once_more_at_the_next_provider(
    client: redis.Redis, settings: Settings, engines: dict[str, object]
) -> None:
    def unsolvable(captcha_id: str, poll: int) -> Polled:
        return CaptchaUnsolvable("ERROR_CAPTCHA_UNSOLVABLE")

    main, backup, outcomes = FakeProvider(unsolvable), FakeProvider(), Outcomes()
    engines["start"]({"main": main, "backup": backup}, outcomes)  # type: ignore[operator]
    run_jobs(client, settings, 2, outcomes)
    assert outcomes.errors == {}
    results = list(outcomes.results.values())
    assert [(r["provider"], r["submits"]) for r in results] == [("backup", 2)] * 2
    assert len(main.submitted) == 2 and len(backup.submitted) == 2
    # An unsolvable captcha is not a sick provider: main's breaker stays closed.
    assert client.hget(Keys(settings.key_prefix).breaker("main"), "state") in (None, "closed")


def test_both_healthy_both_budgets_are_used(
    client: redis.Redis, settings: Settings, engines: dict[str, object]
) -> None:
    def slow(captcha_id: str, poll: int) -> Polled:
        return Answer(captcha_id, f"t-{captcha_id}") if poll >= 4 else None

    main, backup, outcomes = FakeProvider(slow), FakeProvider(slow), Outcomes()
    engines["start"]({"main": main, "backup": backup}, outcomes)  # type: ignore[operator]
    run_jobs(client, settings, 20, outcomes)
    by = [r["provider"] for r in outcomes.results.values()]
    assert outcomes.errors == {} and len(by) == 20
    assert by.count("main") >= 4 and by.count("backup") >= 4, by
    assert set(submits_per_payload(main, backup).values()) == {1}
