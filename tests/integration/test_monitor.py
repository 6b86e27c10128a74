"""`captcha-tasks watch` and `captcha-tasks status` as subprocesses, against real workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import requests

from captcha_tasks import solve_image, solve_recaptcha_v2, solve_turnstile
from captcha_tasks.engine.pool import TokenPool
from captcha_tasks.errors import CaptchaUnsolvable, InvalidTaskInput
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.session.proxies import ProxyPool
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks_dev.procs import stop_process, wait_until
from captcha_tasks_sandbox import DEV_API_KEY
from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
PROXY_SECRET = "s3cr3t-proxy-pw"
LINE_KEYS = {
    "task_id",
    "name",
    "type",
    "state",
    "code",
    "runtime",
    "timestamp",
    "source",
    "provider_name",
}


class Cli:
    """``captcha-tasks ...`` running in the background; stderr read as it comes."""

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        script = Path(sys.executable).with_name("captcha-tasks")
        argv = (
            [str(script)] if script.exists() else [sys.executable, "-m", "captcha_tasks.cli.main"]
        )
        self.proc = subprocess.Popen(
            argv + args,
            cwd=ROOT,
            env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.stderr: list[str] = []
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_for_stderr(self, fragment: str, timeout: float = 30) -> None:
        def seen() -> bool:
            if self.proc.poll() is not None and not self._reader.is_alive():
                raise AssertionError(f"exited with {self.proc.returncode}: {''.join(self.stderr)}")
            return any(fragment in line for line in self.stderr)

        wait_until(seen, timeout=timeout, interval=0.05, what=f"{fragment!r} on stderr")

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        assert self.proc.stdout is not None
        try:
            out = self.proc.stdout.read()
            code = self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                stop_process(self.proc, timeout=10, group=True)
        self._reader.join(timeout=5)
        self.proc.stdout.close()
        if self.proc.stderr is not None:
            self.proc.stderr.close()
        return code, out, "".join(self.stderr)


def run_cli(args: list[str], env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    cli = Cli(args, env)
    return cli.finish(timeout)


def test_watch_prints_one_json_line_per_finished_task(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker = worker_factory(worker_env(sandbox.url))
    watch = Cli(["watch", "--json", "--limit", "4", "--timeout", "90"], {})
    watch.wait_for_stderr("watching task events")
    admin = f"{sandbox.url}/admin/config"

    # 1. Unsolvable twice: the solve engine ends the task with the provider's code.
    requests.post(admin, json={"unsolvable_rate": 1.0}, timeout=5).raise_for_status()
    unsolvable = solve_recaptcha_v2.delay(SITEKEY, "https://example.com/unsolvable")
    with pytest.raises(CaptchaUnsolvable):
        unsolvable.get(timeout=60)
    requests.post(admin, json={"unsolvable_rate": 0.0}, timeout=5).raise_for_status()
    # 2. Invalid input sent past the caller's checks: the worker fails it at once.
    invalid = celery_app.send_task(solve_image.name, args=("",))
    with pytest.raises(InvalidTaskInput):
        invalid.get(timeout=30)
    # 3. A pooled token: the worker's own task-succeeded event carries it in `result`.
    settings = get_settings()
    pool = TokenPool(state_redis(settings), settings)
    pooled_page = "https://example.com/pooled"
    pool.fill(RecaptchaV2(SITEKEY, pooled_page), target=1)
    wait_until(lambda: pool.status()[0]["size"] >= 1, timeout=60, what="a pooled token")
    from_pool = solve_recaptcha_v2.delay(SITEKEY, pooled_page).get(timeout=30)
    assert from_pool["source"] == "pool"
    # 4. A plain solve through the provider.
    solved = solve_turnstile.delay(TURNSTILE_KEY, "https://example.com/t")
    from_api = solved.get(timeout=60)

    code, out, err = watch.finish()
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 4, out
    assert all(set(line) == LINE_KEYS for line in lines)
    by_state: dict[str, list[dict[str, Any]]] = {}
    for line in lines:
        by_state.setdefault(line["state"], []).append(line)
    by_id = {line["task_id"]: line for line in lines}

    first = by_id[unsolvable.id]
    assert first["name"] == "captcha_tasks.solve_recaptcha_v2"
    assert (first["type"], first["code"], first["source"]) == (
        "recaptcha_v2",
        "ERROR_CAPTCHA_UNSOLVABLE",
        None,
    )
    second = by_id[invalid.id]
    assert (second["type"], second["state"], second["code"]) == (
        "image",
        "FAILURE",
        "INVALID_INPUT",
    )
    pooled = [line for line in by_state["SUCCESS"] if line["source"] == "pool"]
    assert len(pooled) == 1 and pooled[0]["type"] == "recaptcha_v2" and pooled[0]["code"] is None
    api = by_id[solved.id]
    assert (api["type"], api["state"], api["source"]) == ("turnstile", "SUCCESS", "api")
    assert api["runtime"] > 0 and abs(api["timestamp"] - time.time()) < 120

    for secret in (from_pool["solution"], from_api["solution"], DEV_API_KEY):
        assert secret not in out and secret not in err
    assert "4 finished (2 solved, 2 failed)" in err
    assert worker.proc.poll() is None


def test_watch_stops_at_its_timeout_and_says_the_limit_was_not_reached(
    celery_app: Any,
) -> None:
    code, out, err = run_cli(["watch", "--json", "--limit", "1", "--timeout", "1.5"], {})
    assert code == 1, err
    assert out == ""
    assert "0 finished" in err


def test_status_while_solves_are_in_flight(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(threads=10, latency={"recaptcha_v2": 100.0})  # 5 s at 0.05
    settings = get_settings()
    client = state_redis(settings)
    proxies = ProxyPool(client, settings)
    proxy_id = proxies.add(f"http://alice:{PROXY_SECRET}@10.0.0.5:3128")
    # The worker leases the pool's only proxy as it starts.
    worker = worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_THREADS="2"))
    wait_until(lambda: proxies.holder(proxy_id) == worker.name, timeout=30, what="the lease")
    lock = SessionLock(client, settings, "shop.example.com", owner="status-test")
    assert lock.acquire()
    pool = TokenPool(client, settings)
    pool.fill(RecaptchaV2(SITEKEY, "https://example.com/pool"), target=0)  # registered, empty
    results = [solve_recaptcha_v2.delay(SITEKEY, f"https://example.com/{i}") for i in range(3)]
    wait_until(lambda: sandbox.stats()["in_flight"] >= 2, timeout=30, what="two in flight")

    env = {
        "CAPTCHAAI_API_KEY": DEV_API_KEY,
        "CAPTCHA_TASKS_SOLVER_URL": sandbox.url,
        "CAPTCHA_TASKS_THREADS": "2",
    }
    code, out, err = run_cli(["status", "--json"], env)
    assert code == 0, err
    report = json.loads(out)
    budget = report["budget"]
    assert budget["limit"] == 2
    assert 1 <= budget["in_use"] <= budget["limit"]
    assert budget["waiting"] >= 1 and budget["in_flight"] >= 1
    assert set(report["broker"]["queues"]) == {"celery"}
    [pooled] = report["token_pools"]
    assert pooled["size"] == 0 and pooled["type"] == "recaptcha_v2"
    [proxy] = report["proxies"]
    assert proxy["proxy"] == "alice:***@10.0.0.5:3128" and proxy["holder"] == worker.name
    [held] = report["session_locks"]
    assert held["host"] == "shop.example.com" and held["holder"] == "status-test"
    assert 0 < held["ttl_s"] <= settings.lock_ttl
    assert report["workers"]["names"] == [worker.name]
    assert Decimal(report["balance"]["balance"]) == Decimal("100")
    assert report["balance"]["url"] == sandbox.url

    code, text, err = run_cli(["status"], env)
    assert code == 0, err
    expected = (
        "thread budget",
        "/ 2 in use",
        "token pools",
        "alice:***@10.0.0.5:3128",
        "shop.example.com",
        "status-test",
        worker.name,
        "balance         100",
    )
    for fragment in expected:
        assert fragment in text, text
    lock_token = lock.token
    assert lock_token
    for output in (out, text):
        assert PROXY_SECRET not in output and DEV_API_KEY not in output
        assert lock_token not in output
    for result in results:
        result.get(timeout=60)
    lock.release()


def _provider_row(text: str, name: str) -> str:
    rows = text.split("\nproviders\n", 1)[1].splitlines()
    [row] = [line for line in rows if line.split()[:1] == [name]]
    return row


def test_status_shows_the_same_balance_in_its_header_and_its_providers_table(
    celery_app: Any, sandbox: Any
) -> None:
    # No worker watches a balance floor, so Redis holds no balance: the one status asks
    # the provider for is the one both places show.
    env = {"CAPTCHAAI_API_KEY": DEV_API_KEY, "CAPTCHA_TASKS_SOLVER_URL": sandbox.url}
    code, out, err = run_cli(["status", "--json", "--workers-timeout", "0"], env)
    assert code == 0, err
    report = json.loads(out)
    [provider] = report["providers"]
    assert provider["balance"] == report["balance"]["balance"]
    assert Decimal(provider["balance"]) == Decimal("100")
    assert provider["balance_source"] == "asked now" and provider["balance_stale"] is False

    code, text, err = run_cli(["status", "--workers-timeout", "0"], env)
    assert code == 0, err
    shown = f"{report['balance']['balance']} USD"
    assert f"balance         {shown} (captchaai at {sandbox.url})" in text, text
    assert shown in _provider_row(text, "default") and "unknown" not in text, text


def test_status_shows_a_workers_last_check_when_the_provider_does_not_answer(
    celery_app: Any,
) -> None:
    settings = get_settings()
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    client.hset(
        keys.balance("default"),
        mapping={"usd": "42.5", "checked_at": repr(time.time()), "stale": "0", "low": "0"},
    )
    env = {"CAPTCHAAI_API_KEY": DEV_API_KEY, "CAPTCHA_TASKS_SOLVER_URL": "http://127.0.0.1:9"}
    code, out, err = run_cli(["status", "--json", "--workers-timeout", "0"], env)
    assert code == 0, err
    report = json.loads(out)
    [provider] = report["providers"]
    assert "error" in report["balance"]
    assert (provider["balance"], provider["balance_source"]) == ("42.5", "last check")
    code, text, err = run_cli(["status", "--workers-timeout", "0"], env)
    assert code == 0, err
    assert "42.5 USD" in _provider_row(text, "default"), text


def test_status_without_a_key_says_why_there_is_no_balance(celery_app: Any) -> None:
    code, out, err = run_cli(["status", "--json", "--workers-timeout", "0"], {})
    assert code == 0, err
    report = json.loads(out)
    assert report["balance"]["error"] == "CAPTCHA_TASKS_API_KEY is not set"
    assert report["workers"] is None
    limit = get_settings().provider_config().threads
    zeros = {"in_use": 0, "expired_leases": 0, "in_flight": 0, "due_now": 0}
    rows = [{"name": "default", "limit": limit, **zeros}]
    assert report["budget"] == {**zeros, "limit": limit, "waiting": 0, "providers": rows}
    assert report["proxies"] == [] and report["session_locks"] == []
    code, text, err = run_cli(["status", "--workers-timeout", "0"], {})
    assert code == 0, err
    assert "unavailable: CAPTCHA_TASKS_API_KEY is not set" in text


def test_status_with_a_wrong_key_reports_the_providers_code(celery_app: Any, sandbox: Any) -> None:
    wrong = "abcdef0123456789abcdef0123456789"
    env = {"CAPTCHAAI_API_KEY": wrong, "CAPTCHA_TASKS_SOLVER_URL": sandbox.url}
    code, out, err = run_cli(["status", "--json", "--workers-timeout", "0"], env)
    assert code == 0, err
    assert json.loads(out)["balance"]["error"].startswith("ERROR_")
    assert wrong not in out


def test_status_of_two_providers_with_one_breaker_open(celery_app: Any, sandbox: Any) -> None:
    settings = get_settings()
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    now = time.time()
    opened = {"state": "open", "until": now + 300, "reason": "zero balance", "opened_at": now}
    client.hset(keys.breaker("main"), mapping=opened)
    client.zadd(keys.provider_budget("backup"), {"a": now + 60, "gone": now - 1})
    backup_key = "CAP-" + "ab" * 16
    env = {
        # Refused beside CAPTCHA_TASKS_PROVIDERS: blank them in case the suite set them.
        "CAPTCHA_TASKS_THREADS": "",
        "CAPTCHA_TASKS_API_KEY": "",
        "CAPTCHAAI_API_KEY": "",
        "CAPTCHA_TASKS_PROVIDERS": "main,backup",
        "CAPTCHA_TASKS_MAIN_PROTOCOL": "captchaai",
        "CAPTCHA_TASKS_MAIN_API_KEY": DEV_API_KEY,
        "CAPTCHA_TASKS_MAIN_URL": sandbox.url,
        "CAPTCHA_TASKS_MAIN_THREADS": "4",
        "CAPTCHA_TASKS_BACKUP_PROTOCOL": "capsolver",
        "CAPTCHA_TASKS_BACKUP_API_KEY": backup_key,
        "CAPTCHA_TASKS_BACKUP_URL": "http://127.0.0.1:9",
        "CAPTCHA_TASKS_BACKUP_THREADS": "3",
    }
    try:
        code, out, err = run_cli(["status", "--json", "--workers-timeout", "0"], env)
        assert code == 0, err
        report = json.loads(out)
        main, backup = report["providers"]
        assert main["breaker"]["state"] == "open" and main["breaker"]["reason"] == "zero balance"
        assert backup["breaker"]["state"] == "closed"
        assert backup["threads"] == {"limit": 3, "learned_limit": None, "in_use": 1}
        assert (report["budget"]["limit"], report["budget"]["in_use"]) == (7, 1)
        assert [row["name"] for row in report["budget"]["providers"]] == ["main", "backup"]
        main_balance, backup_balance = report["balances"]
        assert Decimal(main_balance["balance"]) == Decimal("100")  # asked of main's sandbox
        assert backup_balance["name"] == "backup" and "error" in backup_balance
        code, text, err = run_cli(["status", "--workers-timeout", "0"], env)
        assert code == 0, err
        assert "thread budget   1 / 7 in use" in text
        assert "zero balance" in text and "open until" in text and "main: 100" in text
        for output in (out, text):
            assert DEV_API_KEY not in output and backup_key not in output
    finally:
        client.delete(keys.breaker("main"), keys.provider_budget("backup"))
