"""Two providers (``main``, ``backup``) as ``status`` and ``/metrics`` show them, read
from Redis state written here as the engine writes it (MULTI.md's keys and fields)."""

from __future__ import annotations

import json
import time
import types
from typing import Any

import pytest
import redis
from prometheus_client import CollectorRegistry

from captcha_tasks.monitor.metrics import StateCollector
from captcha_tasks.monitor.providers import provider_states
from captcha_tasks.monitor.status import collect, render
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis

MAIN_KEY = "M41nKey" + "x" * 25
BACKUP_KEY = "CAP-" + "ab" * 16
_APP = types.SimpleNamespace(conf=types.SimpleNamespace(task_default_queue="celery"))


@pytest.fixture
def settings(redis_url: str) -> Settings:
    # Nothing listens on port 9: the live balance calls fail at once.
    return Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "0.5",
            "CAPTCHA_TASKS_PROVIDERS": "main,backup",
            "CAPTCHA_TASKS_MAIN_PROTOCOL": "captchaai",
            "CAPTCHA_TASKS_MAIN_API_KEY": MAIN_KEY,
            "CAPTCHA_TASKS_MAIN_URL": "http://127.0.0.1:9",
            "CAPTCHA_TASKS_MAIN_THREADS": "3",
            "CAPTCHA_TASKS_BACKUP_PROTOCOL": "capsolver",
            "CAPTCHA_TASKS_BACKUP_API_KEY": BACKUP_KEY,
            "CAPTCHA_TASKS_BACKUP_URL": "http://127.0.0.1:9",
            "CAPTCHA_TASKS_BACKUP_THREADS": "2",
            "CAPTCHA_TASKS_BACKUP_BALANCE_FLOOR": "10",
        }
    )


def _cluster(settings: Settings, now: float, main_breaker: dict[str, Any]) -> redis.Redis:
    """main: 2 live leases and a dead holder's, a learned limit of 2, a breaker; backup:
    1 live lease, no breaker hash (closed), a balance below its floor."""
    client: redis.Redis = state_redis(settings)
    keys = Keys(settings.key_prefix)
    client.zadd(keys.provider_budget("main"), {"a": now + 60, "b": now + 5, "dead": now - 1})
    client.zadd(keys.provider_budget("backup"), {"c": now + 60})
    client.set(keys.provider_limit_of("main"), "2", px=60_000)
    if main_breaker:
        client.hset(keys.breaker("main"), mapping=main_breaker)
    client.zadd(keys.due_of("main"), {"a": now - 1, "b": now + 3})  # one due now
    client.zadd(keys.due_of("backup"), {"c": now + 3})
    client.zadd(keys.waiting, {"w": now})
    client.hset(keys.balance("backup"), mapping={"usd": "4", "checked_at": "1", "stale": "0"})
    client.hset(keys.balance("main"), mapping={"usd": "4", "checked_at": "1", "stale": "0"})
    return client


def _open(now: float) -> dict[str, Any]:
    return {
        "state": "open",
        "until": now + 42,
        "reason": "zero balance",
        "opened_at": now - 18,
        "failures": 0,
        "cooldown": 60,
    }


def _scrape(settings: Settings, client: redis.Redis, now: float) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(StateCollector(client, settings, clock=lambda: now))
    return registry


def test_each_provider_has_its_threads_breaker_and_floor(settings: Settings) -> None:
    now = time.time()
    client = _cluster(settings, now, _open(now))
    main, backup = provider_states(client, settings, now)
    assert main["name"] == "main" and backup["name"] == "backup"
    assert main["threads"] == {"limit": 3, "learned_limit": 2, "in_use": 2}  # not the dead one
    assert backup["threads"] == {"limit": 2, "learned_limit": None, "in_use": 1}
    assert main["breaker"] == {
        "state": "open",
        "until": pytest.approx(now + 42),
        "reason": "zero balance",
        "opened_at": pytest.approx(now - 18),
    }
    assert backup["breaker"] == {
        "state": "closed",
        "until": None,
        "reason": None,
        "opened_at": None,
    }
    # Each provider's own floor: backup's is 10, main has none.
    assert backup["below_floor"] is True and backup["balance_floor"] == "10"
    assert main["below_floor"] is False and main["balance_floor"] is None


def test_metrics_label_threads_and_breakers_by_provider_name(settings: Settings) -> None:
    now = time.time()
    client = _cluster(settings, now, _open(now))
    registry = _scrape(settings, client, now)

    def value(name: str, provider: str) -> float | None:
        return registry.get_sample_value(f"captcha_tasks_{name}", {"provider": provider})

    assert (value("threads_in_use", "main"), value("threads_in_use", "backup")) == (2, 1)
    assert (value("threads_limit", "main"), value("threads_limit", "backup")) == (3, 2)
    assert (value("breaker_open", "main"), value("breaker_open", "backup")) == (1, 0)
    for name in ("threads_in_use", "threads_limit", "breaker_open"):
        family = [m for m in registry.collect() if m.name == f"captcha_tasks_{name}"]
        labels = [sample.labels for m in family for sample in m.samples]
        assert labels == [{"provider": "main"}, {"provider": "backup"}]  # names only


@pytest.mark.parametrize(("state", "shown"), [("half_open", 1), ("closed", 0)])
def test_a_half_open_breaker_counts_as_open(settings: Settings, state: str, shown: int) -> None:
    now = time.time()
    client = _cluster(settings, now, {**_open(now - 100), "state": state})
    registry = _scrape(settings, client, now)
    labels = {"provider": "main"}
    assert registry.get_sample_value("captcha_tasks_breaker_open", labels) == shown


def test_a_breaker_hash_the_engine_did_not_write_reads_as_unknown_not_a_crash(
    settings: Settings,
) -> None:
    now = time.time()
    client = _cluster(settings, now, {"until": "soon", "opened_at": ""})
    main = provider_states(client, settings, now)[0]
    assert main["breaker"] == {"state": "closed", "until": None, "reason": None, "opened_at": None}
    client.set(Keys(settings.key_prefix).provider_limit_of("main"), "many")
    assert provider_states(client, settings, now)[0]["threads"]["learned_limit"] is None


def test_status_sums_the_budget_and_shows_a_row_and_breaker_per_provider(
    settings: Settings,
) -> None:
    now = time.time()
    _cluster(settings, now, _open(now))
    report = collect(settings, _APP, workers_timeout=0, balance_timeout=0.5)
    budget = report["budget"]
    assert budget["providers"] == [
        {
            "name": "main",
            "limit": 3,
            "in_use": 2,
            "expired_leases": 1,
            "in_flight": 2,
            "due_now": 1,
        },
        {
            "name": "backup",
            "limit": 2,
            "in_use": 1,
            "expired_leases": 0,
            "in_flight": 1,
            "due_now": 0,
        },
    ]
    assert {k: v for k, v in budget.items() if k != "providers"} == {
        "in_use": 3,
        "limit": 5,
        "expired_leases": 1,
        "waiting": 1,
        "in_flight": 3,
        "due_now": 1,
    }
    # A live balance per provider; ``balance`` stays the first one's.
    assert [(b["name"], b["provider"]) for b in report["balances"]] == [
        ("main", "captchaai"),
        ("backup", "capsolver"),
    ]
    assert all("error" in b for b in report["balances"])
    assert report["balance"] == report["balances"][0]

    page = render(report)
    lines = page.splitlines()
    assert lines[2].startswith("thread budget   3 / 5 in use   waiting 1")
    at = lines.index("providers")
    main_row, backup_row = lines[at + 2], lines[at + 3]
    assert main_row.split()[:7] == ["main", "captchaai", "2", "/", "3", "(provider", "took"]
    assert "open until " in main_row and "(42s left): zero balance" in main_row
    assert backup_row.split()[:6] == ["backup", "capsolver", "1", "/", "2", "closed"]
    assert "4 USD below floor 10" in backup_row
    balance_at = next(n for n, line in enumerate(lines) if line.startswith("balance "))
    assert lines[balance_at].split()[1] == "main:"
    assert lines[balance_at + 1].split()[0] == "backup:"
    text = json.dumps(report) + page
    assert MAIN_KEY not in text and BACKUP_KEY not in text


def test_a_closed_breaker_shows_closed_whatever_its_hash_still_holds(settings: Settings) -> None:
    now = time.time()
    _cluster(settings, now, {**_open(now - 600), "state": "closed"})
    page = render(collect(settings, _APP, workers_timeout=0, balance_timeout=0.5))
    lines = page.splitlines()
    main_row = lines[lines.index("providers") + 2]
    assert "closed" in main_row and "zero balance" not in main_row and "until" not in main_row
