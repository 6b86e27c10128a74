"""Several providers (issue 15, first part): the configuration is read today, the engine
that runs them side by side is not built yet. A real worker must say so and stop, not
solve with the first provider and silently ignore the others."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.devtools.sandbox import DEV_API_KEY, dev_api_key
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
SINGLE = ("CAPTCHA_TASKS_PROVIDER", "CAPTCHA_TASKS_API_KEY", "CAPTCHAAI_API_KEY",
          "CAPTCHA_TASKS_SOLVER_URL")  # fmt: skip


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


def test_a_worker_with_two_providers_refuses_to_start_and_says_why(
    sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory()
    worker = worker_factory(_named(sandbox, main="2captcha", backup="captchaai"), wait=False)
    assert worker.proc.wait(timeout=60) != 0
    log = worker.log()
    assert "CAPTCHA_TASKS_PROVIDERS names 2 providers" in log, log
    assert DEV_API_KEY not in log
    assert sandbox.stats()["submitted"] == 0


def test_one_named_provider_solves_as_the_default_one_did(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory()
    worker_factory(_named(sandbox, main="2captcha"))
    result = solve_recaptcha_v2.delay(V2_KEY, "https://example.com/login").get(timeout=60)
    assert result["provider"] == "2captcha" and result["submits"] == 1
    state = celery_app.backend.client
    # Its solves are counted under its name, not the default provider's.
    assert state.keys("ct:spend:main:*") and not state.keys("ct:spend:default:*")
