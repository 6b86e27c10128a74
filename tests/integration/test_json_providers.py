"""The JSON task API providers end to end: a real `celery worker` with
``CAPTCHA_TASKS_PROVIDER`` set to each dialect, against the sandbox speaking it."""

from __future__ import annotations

import base64
import decimal
import os
import signal
import time
from typing import Any

import pytest
import requests

from captcha_tasks import (
    get_balance,
    solve_geetest,
    solve_hcaptcha,
    solve_image,
    solve_recaptcha_v2,
    solve_recaptcha_v3,
    solve_turnstile,
)
from captcha_tasks.errors import (
    CaptchaUnsolvable,
    InsufficientFunds,
    InvalidApiKey,
    InvalidTaskInput,
    SubmitUncertain,
)
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import dev_api_key, image_answer
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

DIALECTS = ("2captcha-v2", "anticaptcha", "capsolver", "capmonster")
V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"
GT = "f1ab2cdefa3456789012345678901234"
CHALLENGE = "12345678abc90123d45678ef90123a456b"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAQ3RFWHRDb21tZW50AHBhZGRpbmcgcGFk"
    "ZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZ+a6jLUAAAAN"
    "SURBVHicY/j//z8DAAj8Av7ueu+cAAAAAElFTkSuQmCC"
)
PAGE = "https://example.com/login"


def _env(sandbox: Any, dialect: str, **extra: str) -> dict[str, str]:
    env = {"CAPTCHA_TASKS_PROVIDER": dialect, "CAPTCHA_TASKS_API_KEY": dev_api_key(dialect)}
    return worker_env(sandbox.url, **{**env, **extra})


def _verify(sandbox: Any, token: str) -> bool:
    reply = requests.post(f"{sandbox.url}/siteverify", data={"response": token}, timeout=5)
    return bool(reply.json()["success"])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_offered_type_solves_through_a_worker(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, dialect: str
) -> None:
    sandbox = sandbox_factory(protocol="json", dialect=dialect)
    worker_factory(_env(sandbox, dialect))
    results = {
        "recaptcha_v2": solve_recaptcha_v2.delay(V2_KEY, PAGE),
        "recaptcha_v3": solve_recaptcha_v3.delay(V2_KEY, PAGE, action="login", min_score=0.7),
        "turnstile": solve_turnstile.delay(TURNSTILE_KEY, PAGE),
        "image": solve_image.delay(base64.b64encode(PNG).decode(), numeric=0),
        "geetest": solve_geetest.delay(GT, CHALLENGE, PAGE),
    }
    # No hCaptcha: every JSON provider withdrew it (tests/integration/test_withdrawn_types.py).
    got = {kind: result.get(timeout=60) for kind, result in results.items()}
    for kind, result in got.items():
        assert result["type"] == kind
        assert result["source"] == "api"
        assert isinstance(result["captcha_id"], str) and result["captcha_id"]
        assert result["submits"] == 1
        assert result["protocol"] == dialect
    for kind in ("recaptcha_v2", "recaptcha_v3", "turnstile"):
        if kind in got:
            assert _verify(sandbox, got[kind]["solution"]), kind
    costs = {kind: result["cost"] for kind, result in got.items()}
    if dialect in ("2captcha-v2", "anticaptcha"):  # the providers that send their price
        assert all(decimal.Decimal(cost) > 0 for cost in costs.values()), costs
    else:
        assert set(costs.values()) == {None}
    assert got["image"]["solution"] == image_answer(PNG, {"numeric": "0"})
    # The same shape as the classic protocol's, whatever the provider.
    assert set(got["geetest"]["solution"]) == {
        "geetest_challenge",
        "geetest_validate",
        "geetest_seccode",
    }
    assert sandbox.stats()["duplicates"] == 0
    balance = get_balance.delay().get(timeout=30)
    assert balance["protocol"] == dialect


def test_a_type_the_provider_does_not_offer_fails_at_once_and_sends_nothing(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(protocol="json", dialect="capsolver")
    worker_factory(_env(sandbox, "capsolver"))
    with pytest.raises(InvalidTaskInput, match="capsolver"):
        solve_hcaptcha.delay(HCAPTCHA_KEY, PAGE).get(timeout=30)
    assert sandbox.stats()["submitted"] == 0


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_empty_balance_is_insufficient_funds(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, dialect: str
) -> None:
    sandbox = sandbox_factory(protocol="json", dialect=dialect, balance=0)
    worker_factory(_env(sandbox, dialect))
    with pytest.raises(InsufficientFunds):
        solve_recaptcha_v2.delay(V2_KEY, PAGE).get(timeout=60)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_key_the_provider_does_not_know_is_invalid_api_key(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, dialect: str
) -> None:
    sandbox = sandbox_factory(protocol="json", dialect=dialect)
    # Refused once the worker runs (a worker started with a refused key does not start:
    # test_worker_startup): each dialect's refusal is read as InvalidApiKey.
    worker_factory(_env(sandbox, dialect))
    requests.post(f"{sandbox.url}/admin/config", json={"refuse_keys": True}, timeout=10)
    with pytest.raises(InvalidApiKey):
        solve_recaptcha_v2.delay(V2_KEY, PAGE).get(timeout=60)
    assert sandbox.stats()["solved"] == 0


def test_a_worker_killed_mid_solve_resumes_without_a_second_create_task(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(
        protocol="json", dialect="capsolver", threads=20, latency={"recaptcha_v2": 60.0}
    )  # 3 s at 0.05
    env = _env(sandbox, "capsolver", CAPTCHA_TASKS_THREADS="20")
    victim = worker_factory(env, name="victim@127.0.0.1")
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/k/{i}") for i in range(20)]
    state = celery_app.backend.client

    def submitted() -> int:
        # Every createTask answered and its task id stored: a kill now is mid-solve. A
        # kill during a createTask call is SubmitUncertain by design (never resent).
        jobs = state.keys("ct:job:*")
        return sum(1 for key in jobs if state.hget(key, "captcha_id"))

    wait_until(lambda: submitted() == 20, timeout=30, what="20 tasks created and recorded")
    in_flight = sandbox.stats()["in_flight"]
    os.killpg(victim.proc.pid, signal.SIGKILL)  # the worker and its pool, mid-solve
    assert in_flight > 0  # solves were under way at the kill
    victim.proc.wait(timeout=10)
    worker_factory(env, name="survivor@127.0.0.1")
    solved = [r.get(timeout=120) for r in results]
    assert len({s["solution"] for s in solved}) == 20
    assert all(len(s["captcha_id"]) == 36 for s in solved)  # CapSolver's UUID task ids
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (20, 0)


def test_a_create_task_answered_too_late_is_submit_uncertain_and_sent_once(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    # createTask answers after the client's timeout: the task exists and is billed.
    sandbox = sandbox_factory(
        protocol="json",
        dialect="anticaptcha",
        slow_rate=1.0,
        slow_seconds=2.0,
        fault_paths=("in.php",),
    )
    worker_factory(_env(sandbox, "anticaptcha", CAPTCHA_TASKS_HTTP_TIMEOUT="0.5"))
    with pytest.raises(SubmitUncertain):
        solve_recaptcha_v2.delay(V2_KEY, PAGE).get(timeout=60)
    time.sleep(1.0)  # longer than a transient error's back-off
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (1, 0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_no_slot_answers_are_retried_and_never_reach_the_caller(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, dialect: str
) -> None:
    # The plan says 6 threads; the provider holds 2 at a time and refuses the rest.
    sandbox = sandbox_factory(protocol="json", dialect=dialect, threads=2)
    worker_factory(_env(sandbox, dialect, CAPTCHA_TASKS_THREADS="6"))
    results = [solve_recaptcha_v2.delay(V2_KEY, f"https://e.com/s/{i}") for i in range(8)]
    assert all(r.get(timeout=90)["solution"] for r in results)
    stats = sandbox.stats()
    assert stats["no_slot"] > 0 and stats["max_in_flight"] <= 2
    assert (stats["solved"], stats["duplicates"]) == (8, 0)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_unsolvable_captcha_is_resubmitted_once_then_fails_with_its_code(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, dialect: str
) -> None:
    sandbox = sandbox_factory(protocol="json", dialect=dialect, unsolvable_rate=1.0)
    worker_factory(_env(sandbox, dialect))
    with pytest.raises(CaptchaUnsolvable) as info:
        solve_recaptcha_v2.delay(V2_KEY, PAGE).get(timeout=60)
    assert info.value.code == "ERROR_CAPTCHA_UNSOLVABLE"
    stats = sandbox.stats()
    assert (stats["submitted"], stats["unsolvable"]) == (2, 2)  # one resubmit, no more
