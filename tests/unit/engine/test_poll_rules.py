"""The providers' read rules: their table, PollGrid's arithmetic, and the engine obeying
them against a fake provider (min interval, read cap, retention, "too fast" answers)."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import redis

from captcha_tasks.engine import Engine
from captcha_tasks.engine.timing import PollGrid
from captcha_tasks.errors import ConfigurationError, RateLimited, SolveTimeout
from captcha_tasks.provider import Answer, Captcha, JsonTaskClient, Polled, Proxy, SolverClient
from captcha_tasks.provider.poll_rules import (
    CLASSIC_RULES,
    POLL_RULES,
    PollRules,
    poll_rules_for,
)
from captcha_tasks.settings import Settings
from captcha_tasks_dev.procs import wait_until

from .conftest import FakeProvider, Outcomes

SCALE = 0.05
CAPMONSTER = POLL_RULES["capmonster"]

# ------------------------------------------------------------------------ the table


def test_each_provider_states_its_documented_rules() -> None:
    capmonster, capsolver = POLL_RULES["capmonster"], POLL_RULES["capsolver"]
    assert (capmonster.min_interval, capmonster.max_reads, capmonster.retention) == (2, 120, 300)
    assert capmonster.too_fast_code == "ERROR_TOO_MUCH_REQUESTS"
    assert (capsolver.min_interval, capsolver.max_reads, capsolver.retention) == (3, 120, 300)
    assert capsolver.retained_from == "submit" and capsolver.too_fast_code is None
    anticaptcha = POLL_RULES["anticaptcha"]
    assert (anticaptcha.retention, anticaptcha.retained_from) == (60, "ready")
    assert POLL_RULES["2captcha-v2"].min_interval == 5
    for classic in ("captchaai", "2captcha"):
        rules = POLL_RULES[classic]
        assert (rules.min_interval, rules.max_reads, rules.retention) == (0, None, None)
        assert rules.calls_per_captcha == 20
    assert all(rules.source for rules in POLL_RULES.values())
    assert poll_rules_for("someone-else") is CLASSIC_RULES


def test_the_clients_carry_their_rules() -> None:
    assert SolverClient.poll_rules is CLASSIC_RULES
    for dialect in ("2captcha-v2", "anticaptcha", "capsolver", "capmonster"):
        key = "CAP-" + "0" * 32 if dialect == "capsolver" else "0" * 32
        client = JsonTaskClient("http://127.0.0.1:9", key, provider=dialect)  # type: ignore[arg-type]
        assert client.poll_rules == POLL_RULES[dialect]


def test_rules_refuse_nonsense() -> None:
    with pytest.raises(ValueError):
        PollRules("x", min_interval=-1)
    with pytest.raises(ValueError):
        PollRules("x", max_reads=0)


# ------------------------------------------------------------------ grid arithmetic


@pytest.mark.parametrize("batch", [True, False])
def test_classic_rules_keep_the_old_schedule_exactly(batch: bool) -> None:
    grid = PollGrid(0.05, batch=batch, rules=CLASSIC_RULES, scale=SCALE)
    for polls in (0, 5, 18, 19, 20, 40):
        at = 1000.013 + polls
        if batch:
            old = grid.on_tick(at + 0.05 / 2)
        else:
            old = at + (0.05 * 3 * 2 if polls + 1 >= 20 else 0.05 * 3)
        assert grid.next_poll(polls, at) == pytest.approx(old)
    assert grid.first_poll(1000.013, 0.75) == grid.on_tick(1000.013 + 0.75)
    assert grid.read_limit(10**6) is None and grid.retention_end(1000.0) is None


@pytest.mark.parametrize("interval", [0.0001, 0.01, 0.05, 1.0])
@pytest.mark.parametrize("batch", [True, False])
def test_reads_of_one_captcha_never_come_closer_than_the_scaled_minimum(
    interval: float, batch: bool
) -> None:
    for name, rules in POLL_RULES.items():
        grid = PollGrid(interval, batch=batch, rules=rules, scale=SCALE)
        least = rules.min_interval * SCALE
        at = 500.0
        for polls in range(200):
            after = grid.next_poll(polls, at)
            assert after - at >= least, (name, polls)
            assert grid.back_off(polls, at) - at >= 2 * least, (name, polls)
            at = after + 0.0001  # the next read, a little after it was due


def test_a_result_dropped_soon_after_it_is_ready_is_read_often_enough() -> None:
    # Anti-Captcha keeps a solved result 60 s: a slow configured interval is shortened.
    grid = PollGrid(30 * SCALE, batch=False, rules=POLL_RULES["anticaptcha"], scale=SCALE)
    assert grid.next_poll(3, 100.0) - 100.0 <= 30 * SCALE
    assert grid.first_poll(100.0, 90 * SCALE) - 100.0 <= 30 * SCALE
    assert grid.retention_end(100.0) is None  # counted from the solve, not the submit


def test_the_read_cap_and_the_retention() -> None:
    grid = PollGrid(0.05, batch=False, rules=CAPMONSTER, scale=SCALE)
    assert grid.read_limit(119) is None
    limit = grid.read_limit(120)
    assert limit is not None and "capmonster" in limit and "120" in limit
    assert grid.retention_end(100.0) == pytest.approx(100.0 + 300 * SCALE)
    # A first poll chosen later than the retention is brought forward into it.
    assert grid.first_poll(100.0, 400 * SCALE) < 100.0 + 300 * SCALE


def test_the_configured_interval_is_scaled(settings: Settings) -> None:
    fast = dataclasses.replace(settings, poll_interval=0.01)
    provider = FakeProvider(batch_reads=False, poll_rules=CAPMONSTER)
    grid = PollGrid.for_provider(fast, provider)
    assert grid.interval == pytest.approx(0.01 * SCALE)
    assert not grid.batch and grid.rules is CAPMONSTER
    assert grid.min_gap >= 2 * SCALE
    assert Settings.from_env({"CAPTCHA_TASKS_POLL_INTERVAL": "2.5"}).poll_interval == 2.5
    assert Settings.from_env({}).poll_interval == 1.0
    with pytest.raises(ConfigurationError, match="CAPTCHA_TASKS_POLL_INTERVAL"):
        Settings.from_env({"CAPTCHA_TASKS_POLL_INTERVAL": "0"})


# ------------------------------------------------------------- the engine obeys them


class TimedProvider(FakeProvider):
    """Records when each captcha was read."""

    def __init__(self, outcome: Callable[[str, int], Polled], rules: PollRules) -> None:
        super().__init__(outcome, batch_reads=False, poll_rules=rules)
        self.reads: dict[str, list[float]] = {}
        self.submitted_at = 0.0
        self._times = threading.Lock()

    def submit(self, captcha: Captcha, *, proxy: Proxy | None = None) -> str:
        captcha_id = super().submit(captcha, proxy=proxy)
        with self._times:
            self.reads[captcha_id] = []
            self.submitted_at = time.time()
        return captcha_id

    def get(self, captcha_id: str) -> Answer | None:
        with self._times:
            self.reads.setdefault(captcha_id, []).append(time.time())
        return super().get(captcha_id)


def never_ready(captcha_id: str, poll: int) -> Polled:
    return None


@pytest.fixture
def run_engine(client: redis.Redis, settings: Settings) -> Iterator[Callable[..., Outcomes]]:
    engines: list[Engine] = []

    def run(provider: FakeProvider, **changes: object) -> Outcomes:
        outcomes = Outcomes()
        # An aggressive configured interval: only the provider's rules space the reads.
        tuned = dataclasses.replace(settings, poll_interval=0.001, **changes)
        engine = Engine(tuned, client, provider, outcomes, live_workers=lambda: ["w"], name="rules")
        engines.append(engine.start())
        return outcomes

    yield run
    for engine in engines:
        engine.stop(timeout=10)


def test_a_never_ready_captcha_stops_at_the_read_cap_without_reading_past_it(
    run_engine: Callable[..., Outcomes], admit_jobs: Callable[..., list[str]]
) -> None:
    rules = dataclasses.replace(CAPMONSTER, provider="tiny", max_reads=5)
    provider = TimedProvider(never_ready, rules)
    outcomes = run_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the failure")
    error = outcomes.errors[task_id]
    assert isinstance(error, SolveTimeout)
    assert "5 reads" in str(error) and "tiny answers 5 reads of one task" in str(error)
    time.sleep(0.3)  # nothing reads it afterwards either
    (reads,) = provider.reads.values()
    assert len(reads) == 5
    gaps = [b - a for a, b in itertools.pairwise(reads)]
    assert min(gaps) >= 2 * SCALE, gaps


def test_a_task_is_given_up_before_the_provider_drops_it(
    run_engine: Callable[..., Outcomes], admit_jobs: Callable[..., list[str]]
) -> None:
    # Kept 30 s (1.5 s at this scale) after creation, far less than the 9 s deadline.
    rules = dataclasses.replace(CAPMONSTER, provider="brief", retention=30.0)
    provider = TimedProvider(never_ready, rules)
    outcomes = run_engine(provider)
    started = time.time()
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the failure")
    error = outcomes.errors[task_id]
    assert isinstance(error, SolveTimeout) and "brief drops the task" in str(error), error
    (reads,) = provider.reads.values()
    assert len(reads) >= 3 and max(reads) <= provider.submitted_at + 30 * SCALE  # none once dropped
    assert time.time() - started < 5  # long before the 9 s deadline


def test_too_fast_answers_are_not_ready_and_back_off(
    run_engine: Callable[..., Outcomes], admit_jobs: Callable[..., list[str]]
) -> None:
    def refused_twice(captcha_id: str, poll: int) -> Polled:
        if poll <= 2:
            return RateLimited("ERROR_TOO_MUCH_REQUESTS: wait", "ERROR_TOO_MUCH_REQUESTS")
        return Answer(captcha_id, "token")

    provider = TimedProvider(refused_twice, CAPMONSTER)
    outcomes = run_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the solve")
    assert outcomes.results[task_id]["solution"] == "token", outcomes.errors
    assert outcomes.results[task_id]["polls"] == 3  # refused reads count toward the cap
    (reads,) = provider.reads.values()
    assert len(reads) == 3
    gaps = [b - a for a, b in itertools.pairwise(reads)]
    # Backed off past the least interval, but not the account throttle's 10 s wait.
    assert all(2 * 2 * SCALE <= gap < 10 * SCALE for gap in gaps), gaps


def test_throttling_at_a_provider_without_that_rule_is_still_a_retry(
    run_engine: Callable[..., Outcomes], admit_jobs: Callable[..., list[str]]
) -> None:
    def throttled_once(captcha_id: str, poll: int) -> Polled:
        if poll == 1:
            return RateLimited("ERROR_TOO_MUCH_REQUESTS: slow down", "ERROR_TOO_MUCH_REQUESTS")
        return Answer(captcha_id, "token")

    provider = TimedProvider(throttled_once, POLL_RULES["capsolver"])
    outcomes = run_engine(provider)
    (task_id,) = admit_jobs(1)
    wait_until(lambda: outcomes.ended() == 1, timeout=20, what="the solve")
    assert outcomes.results[task_id]["solution"] == "token", outcomes.errors
    (reads,) = provider.reads.values()
    # The account-wide throttle's own wait (10 s scaled), not the per-task back-off.
    assert reads[1] - reads[0] >= 10 * SCALE
