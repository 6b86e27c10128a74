"""Spend and balance by provider: the Prometheus counters and gauges, and ``status``."""

from __future__ import annotations

import dataclasses
import decimal
import json
import time
import types
import uuid

import pytest
from prometheus_client import CollectorRegistry

from captcha_tasks.engine import Job, admit
from captcha_tasks.engine.queue import SolveQueue
from captcha_tasks.engine.spend import Spend
from captcha_tasks.monitor.metrics import PrometheusObserver, StateCollector
from captcha_tasks.monitor.status import collect, render
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from tests.support.provider_settings import with_provider

D = decimal.Decimal
SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
API_KEY = "k3y" + "Z" * 29


@pytest.fixture
def settings(redis_url: str) -> Settings:
    base = Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_THREADS": "7",
            "CAPTCHA_TASKS_BALANCE_FLOOR": "5",
        }
    )
    return with_provider(base, api_key=API_KEY)


def test_the_observer_counts_spend_by_source_and_solves_by_provider() -> None:
    registry = CollectorRegistry()
    observer = PrometheusObserver(registry)
    observer.spent("default", "image", D("0.0007"), "configured")
    observer.spent("default", "image", D("0.0007"), "configured")
    observer.spent("default", "image", D("0.001"), "provider")
    observer.spent("default", "turnstile", None, None)

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(f"captcha_tasks_{name}", labels)

    image = {"provider": "default", "type": "image"}
    assert value("spend_usd_total", **image, source="configured") == pytest.approx(0.0014)
    assert value("spend_usd_total", **image, source="provider") == pytest.approx(0.001)
    assert value("spend_usd_total", provider="default", type="turnstile", source="provider") is None
    assert value("provider_solves_total", **image) == 3
    assert value("provider_solves_total", provider="default", type="turnstile") == 1


def _spend(
    settings: Settings, costs: list[str | None], at: float, captcha_type: str = "recaptcha_v2"
) -> None:
    client = state_redis(settings)
    queue = SolveQueue(client, settings, claim_s=10)
    for n, cost in enumerate(costs):
        task_id = str(uuid.uuid4())
        assert admit(client, settings, task_id, RecaptchaV2(SITEKEY, f"https://e.com/{n}"))
        job = Job.from_fields(task_id, client.hgetall(Keys(settings.key_prefix).job(task_id)))
        spend = Spend("default", captcha_type, at, None if cost is None else D(cost))
        assert queue.finish(job, "done", {"result": "{}"}, at, spend=spend)


def _balance(settings: Settings, usd: str, stale: str = "0") -> None:
    key = Keys(settings.key_prefix).balance("default")
    state_redis(settings).hset(key, mapping={"usd": usd, "checked_at": "1", "stale": stale})


def test_the_collector_reads_balance_floor_and_last_hours_spend(settings: Settings) -> None:
    now = time.time()
    _spend(settings, ["0.00299", "0.00299", "0.0011"], now - 30)
    _spend(settings, ["9"], now - 2 * 3600)  # outside the hour
    _balance(settings, "4.5")
    registry = CollectorRegistry()
    registry.register(StateCollector(state_redis(settings), settings))
    labels = {"provider": "default"}
    assert registry.get_sample_value("captcha_tasks_provider_balance_usd", labels) == 4.5
    assert registry.get_sample_value("captcha_tasks_provider_balance_low", labels) == 1
    assert registry.get_sample_value(
        "captcha_tasks_provider_spend_last_hour_usd", labels
    ) == pytest.approx(0.00708)
    _balance(settings, "5")
    registry = CollectorRegistry()
    registry.register(StateCollector(state_redis(settings), settings))
    assert registry.get_sample_value("captcha_tasks_provider_balance_low", labels) == 0


def test_before_any_check_there_is_no_balance_gauge(settings: Settings) -> None:
    registry = CollectorRegistry()
    registry.register(StateCollector(state_redis(settings), settings))
    labels = {"provider": "default"}
    assert registry.get_sample_value("captcha_tasks_provider_balance_usd", labels) is None
    assert registry.get_sample_value("captcha_tasks_provider_balance_low", labels) == 0
    assert registry.get_sample_value("captcha_tasks_provider_spend_last_hour_usd", labels) == 0


_APP = types.SimpleNamespace(conf=types.SimpleNamespace(task_default_queue="celery"))


def _status(settings: Settings) -> dict[str, object]:
    # No worker ping; the provider balance call fails fast (nothing listens there).
    offline = with_provider(
        dataclasses.replace(settings, http_timeout=0.5), url="http://127.0.0.1:9"
    )
    return collect(offline, _APP, workers_timeout=0, balance_timeout=0.5)


def test_status_shows_each_provider_with_budget_balance_and_spend(settings: Settings) -> None:
    now = time.time()
    _spend(settings, ["0.00299", "0.0011"], now - 5)
    _balance(settings, "4.5", stale="1")
    state_redis(settings).zadd(Keys(settings.key_prefix).budget, {"a": now + 60, "b": now + 60})
    report = _status(settings)
    (provider,) = report["providers"]  # type: ignore[misc]
    assert provider == {
        "name": "default",
        "protocol": "captchaai",
        "threads_in_use": 2,
        "threads": {"limit": 7, "learned_limit": None, "in_use": 2},
        "breaker": {"state": "closed", "until": None, "reason": None, "opened_at": None},
        "balance": "4.5",
        "balance_checked_at": 1.0,
        "balance_stale": True,
        "balance_floor": "5",
        "below_floor": True,
        "balance_source": "last check",  # the provider did not answer status's own ask
        "spend_last_hour": "0.00409",
        "spend_last_hour_by_type": {"recaptcha_v2": "0.00409"},
        "solves_last_hour": 2,
        "unpriced_solves_last_hour": 0,
    }
    page = render(report)
    lines = page.splitlines()
    at = lines.index("providers")
    assert lines[at + 1].split() == [
        "provider",
        "protocol",
        "threads",
        "breaker",
        "balance",
        "spend",
        "last",
        "hour",
    ]
    row = lines[at + 2]
    assert row.split()[:6] == ["default", "captchaai", "2", "/", "7", "closed"]
    assert "4.5 USD (stale) below floor 5" in row and "0.00409 USD (2 solves)" in row
    assert lines[2].startswith("thread budget   2 / 7 in use")  # the old lines stay
    json.dumps(report)  # --json prints it
    assert API_KEY not in page and API_KEY not in json.dumps(report)


def test_solves_with_no_price_show_as_unknown_spend_not_zero(settings: Settings) -> None:
    # No price configured for the type and none reported by the provider: no cost.
    _spend(settings, [None, None], time.time() - 5)
    report = _status(settings)
    (provider,) = report["providers"]  # type: ignore[misc]
    assert provider["solves_last_hour"] == 2 and provider["unpriced_solves_last_hour"] == 2
    page = render(report)
    row = page.splitlines()[page.splitlines().index("providers") + 2]
    assert "unknown (2 solves, no price)" in row and "0 USD" not in row


def test_spend_is_a_lower_bound_where_some_types_have_no_price(settings: Settings) -> None:
    now = time.time()
    _spend(settings, ["0.002"], now - 5)
    _spend(settings, [None, None], now - 5, captcha_type="image")
    # A price of 0 configured is a price: those solves cost nothing, knowingly.
    free = with_provider(settings, prices=(("turnstile", D(0)),))
    _spend(free, [None], now - 5, captcha_type="turnstile")
    page = render(_status(free))
    row = page.splitlines()[page.splitlines().index("providers") + 2]
    assert "at least 0.002 USD (4 solves, 2 with no price)" in row, row


def test_status_before_any_check_or_solve(settings: Settings) -> None:
    page = render(_status(settings))
    lines = page.splitlines()
    row = lines[lines.index("providers") + 2]
    assert "unknown" in row and "0 USD (0 solves)" in row and "below floor" not in row
