"""Several providers through a real worker: one engine per provider, a task's
``provider=`` / ``exclude=``, results naming the provider; one named provider solves as
``default`` did. (Budgets, failover and the breaker under load: test_multi_provider.)"""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks import get_balance, report_solution, solve_recaptcha_v2
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks_sandbox import DEV_API_KEY, dev_api_key
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
SINGLE = (
    "CAPTCHA_TASKS_PROVIDER",
    "CAPTCHA_TASKS_API_KEY",
    "CAPTCHAAI_API_KEY",
    "CAPTCHA_TASKS_SOLVER_URL",
)


def _named(sandbox: Any, **providers: str) -> dict[str, str]:
    env = worker_env(sandbox.url, CAPTCHA_TASKS_PROVIDERS=",".join(providers))
    for name in SINGLE:
        env.pop(name, None)  # refused beside CAPTCHA_TASKS_PROVIDERS
    for name, protocol in providers.items():
        upper = name.upper()
        env[f"CAPTCHA_TASKS_{upper}_PROTOCOL"] = protocol
        env[f"CAPTCHA_TASKS_{upper}_URL"] = sandbox.url
        env[f"CAPTCHA_TASKS_{upper}_API_KEY"] = dev_api_key(protocol)
    return env


def _two(main: Any, backup: Any) -> dict[str, str]:
    env = _named(main, main="2captcha", backup="captchaai")
    env["CAPTCHA_TASKS_BACKUP_URL"] = backup.url
    return env


def test_a_task_pins_or_excludes_providers_and_reports_where_it_was_solved(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    main, backup = sandbox_factory(), sandbox_factory()
    worker = worker_factory(_two(main, backup))
    url = "https://example.com/login"
    preferred = solve_recaptcha_v2.delay(V2_KEY, url).get(timeout=60)
    sent = solve_recaptcha_v2.delay(V2_KEY, url, provider="backup")
    pinned = sent.get(timeout=60)
    excluded = solve_recaptcha_v2.delay(V2_KEY, url, exclude=["main"]).get(timeout=60)
    assert (preferred["provider"], preferred["protocol"]) == ("main", "2captcha")
    assert (pinned["provider"], pinned["protocol"]) == ("backup", "captchaai")
    assert excluded["provider"] == "backup"
    assert (main.stats()["submitted"], backup.stats()["submitted"]) == (1, 2)
    # A name that is not configured is refused before anything is queued.
    with pytest.raises(InvalidTaskInput) as info:
        solve_recaptcha_v2.delay(V2_KEY, url, provider="nope").get(timeout=30)
    assert info.value.code == "UNKNOWN_PROVIDER"
    with pytest.raises(InvalidTaskInput):
        solve_recaptcha_v2.delay(V2_KEY, url, exclude="main").get(timeout=30)
    # Balance per provider; a report goes to the provider that solved the captcha.
    balance = get_balance.delay(provider="backup").get(timeout=30)
    assert (balance["provider"], balance["protocol"]) == ("backup", "captchaai")
    report_solution.delay(sent.id, False).get(timeout=30)
    assert (main.stats()["reports_bad"], backup.stats()["reports_bad"]) == (0, 1)
    log = worker.log()
    assert "solve engine started for provider main" in log
    assert "solve engine started for provider backup" in log
    assert DEV_API_KEY not in log


def test_one_named_provider_solves_as_the_default_one_did(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory()
    worker_factory(_named(sandbox, main="2captcha"))
    result = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/login").get(timeout=60)
    assert result["protocol"] == "2captcha" and result["submits"] == 1
    state = celery_app.backend.client
    # Its solves are counted under its name, not the default provider's.
    assert state.keys("ct:spend:main:*") and not state.keys("ct:spend:default:*")
