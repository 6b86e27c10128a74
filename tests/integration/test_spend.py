"""Spend and balance through a real worker and the sandbox: each result's cost and its
source, the spend in Redis, the balance floor in status and in the metrics, no key."""

from __future__ import annotations

import decimal
import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from captcha_tasks import solve_recaptcha_v2, solve_turnstile
from captcha_tasks.engine.balance import read_balance
from captcha_tasks.engine.spend import SpendLedger
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import free_port, wait_until
from captcha_tasks_sandbox import DEV_API_KEY, dev_api_key
from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

D = decimal.Decimal
V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
PRICES = "recaptcha_v2=2.99,turnstile=1.45,image=0.7"


def _solve(n_v2: int, n_turnstile: int) -> list[dict[str, Any]]:
    pending = [solve_recaptcha_v2.delay(V2_KEY, f"https://example.com/v2/{i}") for i in range(n_v2)]
    pending += [
        solve_turnstile.delay(TURNSTILE_KEY, f"https://example.com/t/{i}")
        for i in range(n_turnstile)
    ]
    return [result.get(timeout=60) for result in pending]


def _spent_last_hour() -> D:
    settings = get_settings()
    return SpendLedger(state_redis(settings), Keys(settings.key_prefix)).total_last_hour(
        "default", time.time()
    )


def _scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    response = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    response.raise_for_status()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(response.text)
        for sample in family.samples
    }


def _status(env: dict[str, str], *args: str) -> str:
    script = os.path.join(os.path.dirname(sys.executable), "captcha-tasks")
    done = subprocess.run(
        [script, "status", "--workers-timeout", "0", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_configured_prices_spend_and_a_balance_below_the_floor(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(balance=3.0)  # classic: sends no cost
    port = free_port()
    extra = {"CAPTCHA_TASKS_PRICES": PRICES, "CAPTCHA_TASKS_BALANCE_FLOOR": "5"}
    worker = worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_METRICS_PORT=str(port), **extra))
    results = _solve(3, 2)
    by_type = {(r["type"], r["cost"], r["cost_source"], r["protocol"]) for r in results}
    assert by_type == {
        ("recaptcha_v2", "0.00299", "configured", "captchaai"),
        ("turnstile", "0.00145", "configured", "captchaai"),
    }
    total = sum(D(r["cost"]) for r in results)
    assert total == D("0.01187")
    assert _spent_last_hour() == total

    settings = get_settings()
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    wait_until(
        lambda: read_balance(client, keys, "default") is not None,
        timeout=30,
        what="the balance check",
    )
    samples = _scrape(port)

    def value(name: str, **labels: str) -> float | None:
        return samples.get((f"captcha_tasks_{name}", frozenset(labels.items())))

    v2 = {"provider": "default", "type": "recaptcha_v2"}
    assert value("spend_usd_total", **v2, source="configured") == pytest.approx(0.00897)
    assert value("provider_solves_total", **v2) == 3
    assert value("provider_solves_total", provider="default", type="turnstile") == 2
    assert value("provider_balance_usd", provider="default") == 3.0
    assert value("provider_balance_low", provider="default") == 1
    assert value("provider_spend_last_hour_usd", provider="default") == pytest.approx(0.01187)
    assert value("solves_total", type="recaptcha_v2", source="api", outcome="solved") == 3

    env = {"CAPTCHAAI_API_KEY": DEV_API_KEY, "CAPTCHA_TASKS_SOLVER_URL": sandbox.url, **extra}
    report = json.loads(_status(env, "--json"))
    (provider,) = report["providers"]
    assert provider["name"] == "default" and provider["protocol"] == "captchaai"
    assert D(provider["balance"]) == 3 and provider["below_floor"] is True
    assert D(provider["spend_last_hour"]) == total and provider["solves_last_hour"] == 5
    text = _status(env)
    assert "below floor 5" in text and "0.01187 USD (5 solves)" in text, text

    warnings = [line for line in worker.log().splitlines() if "below the floor" in line]
    assert len(warnings) == 1, warnings
    assert "balance of provider default is 3" in warnings[0]
    # The key is in no key, no value of ours, no log line, no status output.
    for key in client.scan_iter(match=f"{keys.prefix}*"):
        assert DEV_API_KEY not in key
    for key in [*client.scan_iter(match=f"{keys.prefix}spend:*"), keys.balance("default")]:
        assert DEV_API_KEY not in json.dumps(client.hgetall(key))
    for output in (worker.log(), text, json.dumps(report)):
        assert DEV_API_KEY not in output


def test_the_providers_own_cost_wins_over_the_configured_price(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(protocol="json", dialect="2captcha-v2")  # sends its cost
    env = {
        "CAPTCHA_TASKS_PROVIDER": "2captcha-v2",
        "CAPTCHA_TASKS_API_KEY": dev_api_key("2captcha-v2"),
        "CAPTCHA_TASKS_PRICES": PRICES,
    }
    worker_factory(worker_env(sandbox.url, **env))
    results = _solve(2, 2)
    assert {r["cost_source"] for r in results} == {"provider"}
    assert {r["protocol"] for r in results} == {"2captcha-v2"}
    assert all(D(r["cost"]) > 0 for r in results)
    assert _spent_last_hour() == sum(D(r["cost"]) for r in results)
