"""Two providers at once: two sandboxes speaking different protocols, as
``main`` (classic in.php/res.php, 2Captcha's dialect) and ``backup`` (the JSON task API,
CapSolver's), solved through real ``celery worker`` processes.

One run, three phases:

1. both healthy: 200 solves use both thread budgets (the most in flight of each,
   sampled from Redis, is its ``_THREADS``) and the throughput is close to their sum;
2. ``main`` answers ERROR_ZERO_BALANCE mid-run: nothing lost, nothing submitted twice,
   the rest solved by ``backup``, ``main``'s breaker open;
3. ``main``'s balance is back: its breaker half-opens, the probe is accepted, it closes
   and ``main`` solves again.

Duplicate submits are found by the sandboxes themselves: every task's page has its own
host, which both wire formats record per captcha (``GET /admin/captchas``). Both keys
are scanned for in Redis, the results and the workers' logs.
"""

from __future__ import annotations

import json
import secrets
import string
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import requests

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import SandboxServer
from tests.support.secret_scan import leaks, redis_dump, scan_needles
from tests.support.workers import WorkerProcess, outcomes, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
MAIN_THREADS, BACKUP_THREADS = 4, 6
THREADS = {"main": MAIN_THREADS, "backup": BACKUP_THREADS}
PROTOCOLS = {"main": "2captcha", "backup": "capsolver"}
#: The keys only these sandboxes accept (the dev keys are not given to the workers).
MAIN_KEY = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
BACKUP_KEY = "CAP-" + secrets.token_hex(16)
SINGLE = (
    "CAPTCHA_TASKS_PROVIDER",
    "CAPTCHA_TASKS_API_KEY",
    "CAPTCHAAI_API_KEY",
    "CAPTCHA_TASKS_SOLVER_URL",
    "CAPTCHA_TASKS_THREADS",
)
RESULT_TIMEOUT = 90.0


@dataclass
class Pair:
    """The two sandboxes, the workers and every task sent, in order."""

    main: SandboxServer
    backup: SandboxServer
    workers: list[WorkerProcess]
    raw: redis.Redis
    keys: Keys
    sent: list[Any] = field(default_factory=list)

    def sandbox(self, name: str) -> SandboxServer:
        return self.main if name == "main" else self.backup

    def send(self, n: int) -> list[Any]:
        start = len(self.sent)
        for i in range(start, start + n):
            # Its own host per task: the sandboxes record it per captcha, so a job sent
            # to both providers is found whatever wire format each one speaks.
            self.sent.append(solve_recaptcha_v2.delay(V2_KEY, f"https://j{i}.example.com/login"))
        return self.sent[start:]

    def stats(self, name: str) -> dict[str, Any]:
        reply = requests.get(f"{self.sandbox(name).url}/stats", timeout=10)
        stats: dict[str, Any] = reply.json()
        return stats

    def captchas(self) -> list[dict[str, Any]]:
        out = []
        for name in THREADS:
            url = self.sandbox(name).url
            out += requests.get(f"{url}/admin/captchas", timeout=10).json()["captchas"]
        return out

    def breaker(self, name: str) -> dict[str, str]:
        fields: dict[bytes, bytes] = self.raw.hgetall(self.keys.breaker(name))
        return {k.decode(): v.decode() for k, v in fields.items()}

    def configure(self, name: str, **changes: Any) -> None:
        url = f"{self.sandbox(name).url}/admin/config"
        requests.post(url, json=changes, timeout=10).raise_for_status()

    def logs(self) -> str:
        return "\n".join(w.log() for w in self.workers)


def _env(main: SandboxServer, backup: SandboxServer) -> dict[str, str]:
    env = worker_env(main.url, CAPTCHA_TASKS_PROVIDERS="main,backup")
    for name in SINGLE:
        env.pop(name, None)  # refused beside CAPTCHA_TASKS_PROVIDERS
    for name, server, key in (("main", main, MAIN_KEY), ("backup", backup, BACKUP_KEY)):
        upper = name.upper()
        env[f"CAPTCHA_TASKS_{upper}_PROTOCOL"] = PROTOCOLS[name]
        env[f"CAPTCHA_TASKS_{upper}_URL"] = server.url
        env[f"CAPTCHA_TASKS_{upper}_API_KEY"] = key
        env[f"CAPTCHA_TASKS_{upper}_THREADS"] = str(THREADS[name])
    return env


@pytest.fixture
def pair(celery_app: Any, sandbox_factory: Any, worker_factory: Any) -> Pair:
    # Plans far above the budgets: what limits the flight is the cluster's budget.
    main = sandbox_factory(dialect="2captcha", threads=50, api_keys=(MAIN_KEY,))
    backup = sandbox_factory(
        protocol="json", dialect="capsolver", threads=50, api_keys=(BACKUP_KEY,)
    )
    env = _env(main, backup)
    workers = [worker_factory(env, name=f"multi{i}@127.0.0.1") for i in (1, 2)]
    raw = celery_app.backend.client
    return Pair(main, backup, workers, raw, Keys(get_settings().key_prefix))


class InFlight:
    """Samples each provider's threads in use (budget leases not yet expired) from Redis."""

    def __init__(self, pair: Pair) -> None:
        self.pair = pair
        self.most: Counter[str] = Counter()
        self.most_together = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="in-flight", daemon=True)

    def __enter__(self) -> InFlight:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        keys = self.pair.keys
        while not self._stop.is_set():
            now = time.time()
            pipe = self.pair.raw.pipeline(transaction=False)
            for name in THREADS:
                pipe.zcount(keys.provider_budget(name), f"({now}", "+inf")
            counts = dict(zip(THREADS, pipe.execute(), strict=True))
            for name, n in counts.items():
                self.most[name] = max(self.most[name], int(n))
            self.most_together = max(self.most_together, sum(counts.values()))
            time.sleep(0.005)


def _wait(results: list[Any], timeout: float = RESULT_TIMEOUT) -> list[dict[str, Any] | str]:
    """Each task's result dict, or its error's type name; ``"LOST"`` without a final state."""
    return outcomes(results, timeout)


def _solved_by(outcomes: list[dict[str, Any] | str], *, once: bool = False) -> Counter[str]:
    """How many tasks each provider name solved; fails on anything but a solve (and,
    ``once``, on a solve that needed more than one submit)."""
    failed = Counter(o for o in outcomes if isinstance(o, str))
    assert not failed, f"not solved: {dict(failed)}"
    by: Counter[str] = Counter()
    for o in outcomes:
        assert isinstance(o, dict)
        name = o.get("provider")
        assert name in THREADS, o
        assert o["protocol"] == PROTOCOLS[name], o
        assert not once or o["submits"] == 1, o
        by[name] += 1
    return by


def _no_job_submitted_twice(pair: Pair) -> None:
    """Each task's page host at most once over both sandboxes, none unsolvable."""
    hosts = Counter(c["hostname"] for c in pair.captchas())
    twice = {h: n for h, n in hosts.items() if n > 1}
    assert not twice, f"{len(twice)} job(s) submitted more than once: {twice}"
    for name in THREADS:
        assert pair.stats(name)["duplicates"] == 0, name


def _healthy_phase(pair: Pair) -> None:
    started = time.monotonic()
    with InFlight(pair) as flight:
        outcomes = _wait(pair.send(200))
    elapsed = time.monotonic() - started
    by = _solved_by(outcomes, once=True)
    print(
        f"\nhealthy: {dict(by)} in {elapsed:.1f} s; most in flight {dict(flight.most)}, "
        f"together {flight.most_together}"
    )
    assert flight.most == Counter(THREADS), dict(flight.most)
    assert flight.most_together == sum(THREADS.values())
    for name in THREADS:
        stats = pair.stats(name)
        assert stats["submitted"] == by[name], (name, stats["submitted"], by[name])
        assert stats["max_in_flight"] <= THREADS[name]
    # Close to the sum: each slot is held about as long as a captcha takes to be
    # solved and read, so both budgets working together solve at ~sum(threads)/hold.
    captchas = pair.captchas()
    hold = sum(c["answered_at"] - c["submitted_at"] for c in captchas) / len(captchas)
    ideal = sum(THREADS.values()) / hold
    print(
        f"throughput {200 / elapsed:.1f}/s; both budgets at {hold:.2f} s a captcha: "
        f"{ideal:.1f}/s; the larger alone: {max(THREADS.values()) / hold:.1f}/s"
    )
    assert 200 / elapsed >= 0.6 * ideal
    assert 200 / elapsed > 1.2 * max(THREADS.values()) / hold
    _no_job_submitted_twice(pair)


def _zero_balance_phase(pair: Pair) -> int:
    """``main`` goes to zero balance mid-run; returns its submits before that."""
    before = int(pair.stats("main")["submitted"])
    results = pair.send(120)
    wait_until(
        lambda: pair.stats("main")["submitted"] >= before + 2 * MAIN_THREADS,
        timeout=30,
        what="main taking its share",
    )
    pair.configure("main", balance=0.0)
    at_switch = int(pair.stats("main")["submitted"])
    by = _solved_by(_wait(results))
    stats = pair.stats("main")
    print(
        f"zero balance: {dict(by)}; main: {stats['zero_balance']} zero-balance answers, "
        f"breaker {pair.breaker('main')}"
    )
    # The captchas main solved in this phase are those it had accepted before its
    # balance went to zero; every other one went to backup.
    assert by["main"] == at_switch - before
    assert by["backup"] == 120 - by["main"]
    breaker = pair.breaker("main")
    assert breaker.get("state") in ("open", "half_open"), breaker
    assert "zero balance" in breaker.get("reason", ""), breaker
    assert "provider main: breaker open for" in pair.logs()
    # The breaker stops the asking: one refused submit per thread at most, plus the
    # half-open probes (one per cool-down, 3 s doubling at this time scale).
    assert stats["zero_balance"] <= MAIN_THREADS * len(pair.workers) + 6
    _no_job_submitted_twice(pair)
    return at_switch


def _recovery_phase(pair: Pair, at_switch: int) -> None:
    pair.configure("main", balance=100.0)
    results: list[Any] = []

    def main_back() -> bool:
        results.extend(pair.send(1))  # a trickle (below backup's pace): a probe needs a job
        return pair.breaker("main").get("state", "closed") == "closed" and (
            pair.stats("main")["submitted"] >= at_switch + 3
        )

    # The cool-down doubles while probes meet zero balance: up to 600 s x 0.05 = 30 s.
    wait_until(main_back, timeout=60, interval=0.3, what="main's breaker closed again")
    by = _solved_by(_wait(results))
    print(f"recovered: {dict(by)}; breaker {pair.breaker('main')}")
    assert by["main"] >= 3
    assert "provider main: breaker closed" in pair.logs()
    _no_job_submitted_twice(pair)


def _secrets_nowhere(pair: Pair) -> None:
    needles = scan_needles([MAIN_KEY, BACKUP_KEY])
    metas = [r.result if r.successful() else repr(r.result) for r in pair.sent]
    sources = {
        "redis": redis_dump(pair.raw, exclude=set())[0],
        "results": json.dumps(metas, default=str),
        "worker logs": pair.logs(),
    }
    assert not leaks(sources, needles)


@pytest.mark.long
def test_two_providers_share_the_load_fail_over_and_recover(pair: Pair) -> None:
    _healthy_phase(pair)
    at_switch = _zero_balance_phase(pair)
    _recovery_phase(pair, at_switch)
    total = len(pair.sent)
    submitted = sum(int(pair.stats(n)["submitted"]) for n in THREADS)
    assert submitted == total, f"{submitted} captchas accepted for {total} tasks"
    _secrets_nowhere(pair)
