"""The acceptance store against the session's real redis-server, with a fake clock:
verdicts counted once per solve, per provider, type and listed host, over a window of
per-minute buckets, with the spend of the solves judged."""

from __future__ import annotations

import dataclasses
import json
import uuid
from decimal import Decimal

import pytest
import redis

from captcha_tasks.engine.acceptance import AcceptanceBook, AcceptanceRates, Tally
from captcha_tasks.errors import UnknownSolve
from captcha_tasks.monitor.status import _acceptance_lines, acceptance_rows
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys
from tests.support.clock import ManualClock

NOW = 1_800_000_000.0


def _solved(
    client: redis.Redis,
    keys: Keys,
    *,
    provider: str = "main",
    cost: str | None = "0.001",
    url: str = "https://shop.example.com/login",
    state: str = "done",
) -> str:
    """A finished solve's job, as the engine leaves it: its id."""
    task_id = str(uuid.uuid4())
    result = {"provider": provider, "type": "recaptcha_v2", "cost": cost, "captcha_id": "7"}
    captcha = {"type": "recaptcha_v2", "fields": {"sitekey": "k" * 40, "pageurl": url}}
    client.hset(
        keys.job(task_id),
        mapping={"state": state, "result": json.dumps(result), "captcha": json.dumps(captcha)},
    )
    client.expire(keys.job(task_id), 600)
    return task_id


@pytest.fixture
def listed(settings: Settings) -> Settings:
    return dataclasses.replace(
        settings, acceptance_hosts=("shop.example.com",), acceptance_window=300.0
    )


def test_verdicts_count_per_provider_type_and_listed_host_once_each(
    client: redis.Redis, listed: Settings, keys: Keys
) -> None:
    clock = ManualClock(NOW)
    book = AcceptanceBook(client, listed, clock=clock)
    main = [_solved(client, keys) for _ in range(4)]
    backup = _solved(client, keys, provider="backup", cost="0.002", url="https://other.test/")
    for task_id, accepted in zip(main, (True, False, False, True), strict=True):
        assert book.record(task_id, accepted=accepted).counted
    assert book.record(backup, accepted=True).counted
    # A second verdict on a solve is not counted: the first one stands.
    again = book.record(main[1], accepted=True)
    assert (again.counted, again.verdict) == (False, "rejected")

    every_host = book.window("recaptcha_v2")
    assert every_host["main"] == Tally(2, 2, Decimal("0.004"))
    assert every_host["backup"] == Tally(1, 0, Decimal("0.002"))
    assert every_host["main"].rate == 0.5
    assert every_host["main"].cost_per_accepted == Decimal("0.002")
    # The listed host has its own figures; another host reads the per-type ones.
    assert book.window("recaptcha_v2", "shop.example.com") == {
        "main": Tally(2, 2, Decimal("0.004"))
    }
    assert book.window("recaptcha_v2", "other.test") == every_host
    assert book.totals() == {
        ("main", "recaptcha_v2", "shop.example.com"): (2, 2),
        ("backup", "recaptcha_v2", "other"): (1, 0),
    }


def test_the_window_forgets_old_minutes(client: redis.Redis, listed: Settings, keys: Keys) -> None:
    clock = ManualClock(NOW)
    book = AcceptanceBook(client, listed, clock=clock)
    book.record(_solved(client, keys), accepted=False)
    clock.now += 120
    book.record(_solved(client, keys), accepted=True)
    assert book.window("recaptcha_v2")["main"] == Tally(1, 1, Decimal("0.002"))
    clock.now += 240  # the first verdict is now older than the 300 s window
    assert book.window("recaptcha_v2")["main"] == Tally(1, 0, Decimal("0.001"))
    clock.now += 300
    assert book.window("recaptcha_v2") == {}
    # Every bucket has a TTL: the window and a margin.
    for key in client.scan_iter(f"{keys.prefix}acceptance:*"):
        assert client.ttl(key) > 0


def test_a_provider_is_told_once(client: redis.Redis, listed: Settings, keys: Keys) -> None:
    book = AcceptanceBook(client, listed)
    task_id = _solved(client, keys)
    book.record(task_id, accepted=False)
    assert book.claim_report(task_id, "bad") is None
    assert book.claim_report(task_id, "good") == "bad"
    book.release_report(task_id)  # telling it failed: the next one tells it
    assert book.claim_report(task_id, "good") is None
    assert client.ttl(keys.feedback(task_id)) > 0


def test_unknown_unsolved_and_failed_solves_are_refused(
    client: redis.Redis, listed: Settings, keys: Keys
) -> None:
    book = AcceptanceBook(client, listed)
    for task_id in ("", "x" * 65, str(uuid.uuid4()), _solved(client, keys, state="failed")):
        with pytest.raises(UnknownSolve):
            book.record(task_id, accepted=True)
    assert book.window("recaptcha_v2") == {}


def test_results_and_status_show_the_rate_and_the_cost_per_accepted_token(
    client: redis.Redis, listed: Settings, keys: Keys
) -> None:
    clock = ManualClock(NOW)
    book = AcceptanceBook(client, listed, clock=clock)
    rates = AcceptanceRates(book, every=10.0)
    assert rates.rate("main", "recaptcha_v2", clock.now) is None
    for accepted in (True, True, True, False):
        book.record(_solved(client, keys, url="https://x.test/"), accepted=accepted)
    # Read at most every 10 s: the figure of the last read until then.
    assert rates.rate("main", "recaptcha_v2", clock.now + 5) is None
    assert rates.rate("main", "recaptcha_v2", clock.now + 10) == 0.75
    rows = acceptance_rows(client, listed, clock.now)
    assert rows == [
        {
            "provider": "main",
            "type": "recaptcha_v2",
            "host": None,
            "accepted": 3,
            "rejected": 1,
            "rate": 0.75,
            "spend": "0.004",
            "cost_per_accepted": "0.001333",
        }
    ]
    text = "\n".join(_acceptance_lines(rows, 300.0))
    assert "acceptance, last 5 min" in text
    assert "main" in text and "75.0%" in text and "0.001333" in text


def test_the_window_minute_by_minute_with_each_minutes_age(
    client: redis.Redis, listed: Settings, keys: Keys
) -> None:
    clock = ManualClock(NOW)
    clock.now = 60 * (NOW // 60) + 45  # 15 s after the middle of its minute
    book = AcceptanceBook(client, listed, clock=clock)
    book.record(_solved(client, keys), accepted=False)
    book.record(_solved(client, keys, url="https://other.test/"), accepted=True)
    clock.now += 120
    book.record(_solved(client, keys), accepted=True)
    minutes = book.minutes("recaptcha_v2")
    # The 300 s window: five minutes, oldest first, each aged from its middle.
    assert [age for age, _ in minutes] == [255.0, 195.0, 135.0, 75.0, 15.0]
    assert [tallies for _, tallies in minutes if tallies] == [
        {"main": Tally(1, 1, Decimal("0.002"))},
        {"main": Tally(1, 0, Decimal("0.001"))},
    ]
    # A listed host's own minutes; another host's are every host's.
    host = [t for _, t in book.minutes("recaptcha_v2", "shop.example.com") if t]
    assert host == [
        {"main": Tally(0, 1, Decimal("0.001"))},
        {"main": Tally(1, 0, Decimal("0.001"))},
    ]
    assert book.minutes("recaptcha_v2", "other.test") == minutes
    assert all(not t for _, t in book.minutes("turnstile"))
