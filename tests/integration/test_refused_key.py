"""A provider that refuses a worker's key, through real ``celery worker`` processes.

Two providers, ``main`` (classic in.php/res.php, 2Captcha's dialect) and ``backup``
(the JSON task API, CapSolver's), and ``main``'s key refused: every request is solved
by ``backup``, none fails with ``InvalidApiKey`` and none is submitted twice, whether
the workers meet the refusal at start (started with a wrong key for ``main``) or later
(``main``'s sandbox starts refusing the key after the workers started and solved
through it). A worker says so in one line naming the key's variable; one left with no
provider exits non-zero (see also test_worker_startup).
"""

from __future__ import annotations

import os
import secrets
import string
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest
import requests

from captcha_tasks import get_balance, solve_recaptcha_v2
from captcha_tasks.errors import InvalidApiKey
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import SandboxServer
from tests.support.workers import WorkerProcess, outcomes, worker_env

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
PROTOCOLS = {"main": "2captcha", "backup": "capsolver"}
MAIN_KEY = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
#: Well formed (32 letters and digits), but not a key ``main``'s sandbox knows.
WRONG_MAIN_KEY = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(32))
BACKUP_KEY = "CAP-" + secrets.token_hex(16)
SINGLE = (
    "CAPTCHA_TASKS_PROVIDER",
    "CAPTCHA_TASKS_API_KEY",
    "CAPTCHAAI_API_KEY",
    "CAPTCHA_TASKS_SOLVER_URL",
    "CAPTCHA_TASKS_THREADS",
)
REQUESTS = 100
RESULT_TIMEOUT = 120.0
MAIN_VARIABLE = "CAPTCHA_TASKS_MAIN_API_KEY"


def _env(main: SandboxServer, backup: SandboxServer, main_key: str) -> dict[str, str]:
    env = worker_env(main.url, CAPTCHA_TASKS_PROVIDERS="main,backup")
    for name in SINGLE:
        env.pop(name, None)  # refused beside CAPTCHA_TASKS_PROVIDERS
    for name, server, key in (("main", main, main_key), ("backup", backup, BACKUP_KEY)):
        upper = name.upper()
        env[f"CAPTCHA_TASKS_{upper}_PROTOCOL"] = PROTOCOLS[name]
        env[f"CAPTCHA_TASKS_{upper}_URL"] = server.url
        env[f"CAPTCHA_TASKS_{upper}_API_KEY"] = key
        env[f"CAPTCHA_TASKS_{upper}_THREADS"] = "8"
    return env


@pytest.fixture
def sandboxes(sandbox_factory: Any) -> tuple[SandboxServer, SandboxServer]:
    main = sandbox_factory(dialect="2captcha", threads=50, api_keys=(MAIN_KEY,))
    backup = sandbox_factory(
        protocol="json", dialect="capsolver", threads=50, api_keys=(BACKUP_KEY,)
    )
    return main, backup


def _send(n: int, tag: str, **options: Any) -> list[Any]:
    # Its own host per request: the sandboxes record it per captcha, so a request sent
    # to both providers (or twice to one) is found whatever wire format each speaks.
    return [
        solve_recaptcha_v2.delay(V2_KEY, f"https://{tag}{i}.example.com/login", **options)
        for i in range(n)
    ]


def _outcomes(results: list[Any]) -> list[dict[str, Any] | str]:
    """Each request's result, or its error's type and code; ``LOST`` without an end."""
    return outcomes(results, RESULT_TIMEOUT, codes=True)


def _by_provider(outcomes: list[dict[str, Any] | str]) -> Counter[str]:
    failed = Counter(o for o in outcomes if isinstance(o, str))
    assert not failed, f"not solved: {dict(failed)}"
    return Counter(o["provider"] for o in outcomes if isinstance(o, dict))


def _no_request_submitted_twice(main: SandboxServer, backup: SandboxServer) -> None:
    hosts: Counter[str] = Counter()
    for server in (main, backup):
        captchas = requests.get(f"{server.url}/admin/captchas", timeout=10).json()["captchas"]
        hosts.update(c["hostname"] for c in captchas)
    twice = {h: n for h, n in hosts.items() if n > 1}
    assert not twice, f"{len(twice)} request(s) submitted more than once: {twice}"


def _stats(server: SandboxServer) -> dict[str, Any]:
    stats: dict[str, Any] = requests.get(f"{server.url}/stats", timeout=10).json()
    return stats


def _lines_naming(worker: WorkerProcess, text: str) -> list[str]:
    return [line for line in worker.log().splitlines() if text in line]


def _check(env: dict[str, str], worker: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "captcha_tasks.cli.main", "check", "--worker", worker]
    return subprocess.run(
        argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )


def test_a_key_refused_at_start_sends_every_request_to_the_next_provider(
    celery_app: Any, sandboxes: tuple[SandboxServer, SandboxServer], worker_factory: Any
) -> None:
    main, backup = sandboxes
    env = _env(main, backup, WRONG_MAIN_KEY)
    workers = [worker_factory(env, name=f"refused{i}@127.0.0.1") for i in (1, 2)]
    outcomes = _outcomes(_send(REQUESTS, "start"))
    assert _by_provider(outcomes) == {"backup": REQUESTS}
    _no_request_submitted_twice(main, backup)
    assert _stats(main)["submitted"] == 0
    for worker in workers:
        # One line at start, naming the variable and the provider's code; no traceback.
        said = _lines_naming(worker, MAIN_VARIABLE)
        assert len(said) == 1, said
        assert "ERROR_KEY_DOES_NOT_EXIST" in said[0]
        assert "Traceback" not in worker.log()
        assert WRONG_MAIN_KEY not in worker.log()
        assert worker.proc.poll() is None  # backup is left: the worker runs on
        # The probe fails while the key is refused, and says which variable to check.
        checked = _check(env, worker.name)
        assert checked.returncode == 1, checked
        assert (
            f"provider main refuses its key (ERROR_KEY_DOES_NOT_EXIST); check {MAIN_VARIABLE}"
            in (checked.stderr)
        )
        assert WRONG_MAIN_KEY not in checked.stdout + checked.stderr


def test_a_key_refused_mid_run_sends_every_request_to_the_next_provider(
    celery_app: Any, sandboxes: tuple[SandboxServer, SandboxServer], worker_factory: Any
) -> None:
    main, backup = sandboxes
    env = _env(main, backup, MAIN_KEY)
    workers = [worker_factory(env, name=f"revoked{i}@127.0.0.1") for i in (1, 2)]
    # main takes the key at start, and solves.
    warm = _outcomes(_send(4, "warm", provider="main"))
    assert _by_provider(warm) == {"main": 4}
    requests.post(f"{main.url}/admin/config", json={"refuse_keys": True}, timeout=10)
    outcomes = _outcomes(_send(REQUESTS, "mid"))
    assert _by_provider(outcomes) == {"backup": REQUESTS}
    _no_request_submitted_twice(main, backup)
    assert _stats(main)["submitted"] == 4  # the warm-up's only
    # A balance asked of main now: the refusal, logged in one line, no traceback.
    with pytest.raises(InvalidApiKey):
        get_balance.delay(provider="main").get(timeout=30)
    raw = celery_app.backend.client
    breaker = raw.hgetall(Keys(get_settings().key_prefix).breaker("main"))
    assert breaker.get(b"state") in (b"open", b"half_open")
    for worker in workers:
        assert "Traceback" not in worker.log()
    # The worker logs the failure after it stored it (which .get() returned): wait for it.
    wait_until(
        lambda: any("raised expected: InvalidApiKey" in w.log() for w in workers),
        timeout=10,
        what="a worker's line for get_balance's refused key",
    )
    # Once main takes the key again, its engines resume (a balance call per pause).
    requests.post(f"{main.url}/admin/config", json={"refuse_keys": False}, timeout=10)
    wait_until(
        lambda: all(
            "accepts this worker's key again" in w.log()
            or "refused this worker's key" not in w.log()
            for w in workers
        ),
        timeout=60,
        what="main's engines to resume",
    )
    for worker in workers:
        checked = _check(env, worker.name)
        assert checked.returncode == 0, checked


def test_a_key_refused_on_one_worker_leaves_the_provider_to_the_others(
    celery_app: Any, sandboxes: tuple[SandboxServer, SandboxServer], worker_factory: Any
) -> None:
    # A bad release on one host: main's key is refused there only. main stays in use
    # (its breaker closed) through the other worker's engine; nothing fails.
    main, backup = sandboxes
    broken = worker_factory(_env(main, backup, WRONG_MAIN_KEY), name="broken@127.0.0.1")
    worker_factory(_env(main, backup, MAIN_KEY), name="sound@127.0.0.1")
    by = _by_provider(_outcomes(_send(REQUESTS, "one")))
    assert sum(by.values()) == REQUESTS and by["main"] > 0, by
    _no_request_submitted_twice(main, backup)
    raw = celery_app.backend.client
    breaker = raw.hgetall(Keys(get_settings().key_prefix).breaker("main"))
    assert breaker.get(b"state") in (None, b"closed"), breaker
    assert len(_lines_naming(broken, MAIN_VARIABLE)) == 1
