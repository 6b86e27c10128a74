"""CAPTCHA_TASKS_PROVIDERS naming one provider: solved like the unnamed ``default``, but
under its own name (spend, status, metrics) and its own budget key."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import redis

from captcha_tasks.engine import Engine, admit
from captcha_tasks.engine.spend import SpendLedger, set_spend_observer
from captcha_tasks.monitor.providers import provider_states
from captcha_tasks.monitor.status import thread_budget
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.settings import Settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import wait_until

from .conftest import SITEKEY, FakeProvider, Outcomes

KEY = "M41nKey" + "x" * 25
BACKUP_KEY = "CAP-" + "ab" * 16


def named(redis_url: str, **extra: str) -> Settings:
    return Settings.from_env(
        {
            "CAPTCHA_TASKS_REDIS_URL": redis_url,
            "CAPTCHA_TASKS_TIME_SCALE": "0.05",
            "CAPTCHA_TASKS_HTTP_TIMEOUT": "2",
            "CAPTCHA_TASKS_PROVIDERS": "main",
            "CAPTCHA_TASKS_MAIN_PROTOCOL": "captchaai",
            "CAPTCHA_TASKS_MAIN_API_KEY": KEY,
            "CAPTCHA_TASKS_MAIN_THREADS": "2",
            **extra,
        }
    )


class _Recorder:
    def __init__(self) -> None:
        self.providers: list[str] = []

    def spent(self, provider: str, captcha_type: str, cost: Any, source: Any) -> None:
        self.providers.append(provider)


def test_one_named_provider_solves_under_its_name_and_its_own_budget(redis_url: str) -> None:
    settings = named(redis_url, CAPTCHA_TASKS_MAIN_PRICES="recaptcha_v2=2")
    client: redis.Redis = state_redis(settings)
    keys = Keys(settings.key_prefix)
    outcomes, recorder = Outcomes(), _Recorder()
    previous = set_spend_observer(recorder)
    held = {"main": 0, "default": 0}
    done = threading.Event()

    def sample() -> None:  # the most leases each budget key held at once
        while not done.is_set():
            held["main"] = max(held["main"], int(client.zcard(keys.provider_budget("main"))))
            held["default"] = max(held["default"], int(client.zcard(keys.budget)))

    sampler = threading.Thread(target=sample, daemon=True)
    engine = Engine(
        settings, client, FakeProvider(), outcomes, live_workers=lambda: ["w"], name="unit"
    ).start()
    sampler.start()
    try:
        for i in range(6):
            assert admit(
                client,
                settings,
                str(uuid.uuid4()),
                RecaptchaV2(SITEKEY, f"https://example.com/named/{i}"),
            )
        wait_until(lambda: outcomes.ended() == 6, timeout=20, what="6 solves")
    finally:
        done.set()
        engine.stop(timeout=10)
        set_spend_observer(previous)
        sampler.join(5)
    assert len(outcomes.results) == 6, outcomes.errors
    assert held["default"] == 0 and 1 <= held["main"] <= 2  # main's budget: 2 threads
    assert recorder.providers == ["main"] * 6
    ledger = SpendLedger(client, keys)
    assert str(ledger.total_last_hour("main", engine.clock())) == "0.012"
    assert ledger.last_hour("default", engine.clock()) == {}
    (state,) = provider_states(client, settings, engine.clock())
    assert (state["name"], state["protocol"], state["threads"]["limit"]) == ("main", "captchaai", 2)
    assert state["solves_last_hour"] == 6
    # A lease in main's budget is what status counts, not one in today's key.
    client.zadd(keys.provider_budget("main"), {"held": engine.clock() + 60})
    client.zadd(keys.budget, {"other": engine.clock() + 60})
    assert thread_budget(client, keys, settings, engine.clock())["in_use"] == 1
    assert provider_states(client, settings, engine.clock())[0]["threads_in_use"] == 1
