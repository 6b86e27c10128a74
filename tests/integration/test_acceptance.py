"""Acceptance feedback through a real worker and the sandbox's demo site refusing a share
of good tokens: fetch_page counts every verdict and retries a refused token, each refused
token is reported to its provider exactly once, report_solution and feedback() count."""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from typing import Any

import pytest
import requests

from captcha_tasks import aio, report_solution, solve_recaptcha_v2
from captcha_tasks.engine.acceptance import AcceptanceBook, Tally
from captcha_tasks.engine.pool import TokenPool
from captcha_tasks.engine.spend import SpendLedger
from captcha_tasks.errors import ChallengeRejected, UnknownSolve
from captcha_tasks.provider import RecaptchaV2
from captcha_tasks.session.locks import SessionLock
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.feedback import feedback
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.procs import wait_until
from captcha_tasks_sandbox import dev_api_key
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration


def _env(sandbox: Any, **extra: str) -> dict[str, str]:
    host = sandbox.demo_url.split("//")[1]
    return worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host, **extra)


def _book() -> AcceptanceBook:
    settings = get_settings()
    return AcceptanceBook(state_redis(settings), settings)


def test_refused_tokens_are_retried_counted_and_reported_once(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(demo_port=0, reject_rates={"*": 0.5}, seed=3, threads=8)
    worker_factory(_env(sandbox, CAPTCHA_TASKS_PRICES="recaptcha_v2=2.00"), concurrency=4)
    runs = 20
    sent = [fetch_page.delay(f"{sandbox.demo_url}/page/{i}", isolated=True) for i in range(runs)]
    served, lost = [], 0
    for result in sent:
        try:
            served.append(result.get(timeout=180))
        except ChallengeRejected:
            lost += 1
    tally = _book().window("recaptcha_v2")["default"]
    # Each refused token reported bad to its provider (a report_solution sent when the
    # rejection was counted): exactly once.
    wait_until(
        lambda: sandbox.stats()["reports_bad"] >= tally.rejected, timeout=60, what="the reports"
    )
    site, provider = sandbox.demo.stats(), sandbox.stats()
    attempts = sum(p["attempts"] for p in served)
    print(
        f"\n{runs} isolated pages, site refusing 50%: {len(served)} served, {lost} lost; "
        f"solves {provider['submitted']}, accepted {tally.accepted}, rejected "
        f"{tally.rejected}, reportbad {provider['reports_bad']}, spend {tally.spend}"
    )
    assert all(p["status"] == 200 for p in served)
    assert any(p["attempts"] > 1 for p in served)  # some pages needed a second token
    # Every solve was judged once: the accepted ones are the pages served.
    assert tally.accepted == len(served) == site["tokens_accepted"]
    assert tally.accepted + tally.rejected == provider["submitted"]
    assert attempts + 3 * lost == provider["submitted"]
    # Every solve, the retries' too, is in the spend ($2.00 per 1000).
    assert tally.spend == Decimal("0.002") * provider["submitted"]
    assert provider["reports_bad"] == tally.rejected
    assert provider["reports_refused"] == 0
    # A refused page spent its attempts (CAPTCHA_TASKS_PAGE_ATTEMPTS = 3): none more.
    assert all(p["attempts"] <= 3 for p in served)


def test_report_solution_and_feedback_count_once_and_report_once(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(demo_port=0)
    worker_factory(_env(sandbox))
    url = f"{sandbox.demo_url}/page/x"
    key = sandbox.config.demo_sitekey
    first = solve_recaptcha_v2.delay(key, url)
    second = solve_recaptcha_v2.delay(key, url)
    one, two = first.get(timeout=60), second.get(timeout=60)
    assert one["task_id"] == first.id and two["task_id"] == second.id
    # report_solution: counted rejected and told the provider; a second report is not.
    assert report_solution.delay(first.id, correct=False).get(timeout=30)["reported"] == "bad"
    again = report_solution.delay(first.id, correct=True).get(timeout=30)
    assert again == {**again, "reported": "bad", "already": True}
    # The public call: counted accepted; a later rejection of the same solve is ignored.
    assert feedback(second.id, accepted=True) == {
        "task_id": second.id,
        "counted": True,
        "verdict": "accepted",
    }
    assert feedback(second.id, accepted=False)["counted"] is False
    late = asyncio.run(aio.feedback(second.id, accepted=False))
    assert (late["counted"], late["verdict"]) == (False, "accepted")
    with pytest.raises(UnknownSolve):
        feedback("no-such-task", accepted=True)
    tally = _book().window("recaptcha_v2")["default"]
    assert (tally.accepted, tally.rejected) == (1, 1)
    assert sandbox.stats()["reports_bad"] == 1
    assert sandbox.stats()["reports_refused"] == 0
    # A later solve's result carries the provider's acceptance rate for its type (read
    # at most every 10 s, scaled: the engine's copy may be one read behind).
    wait_until(
        lambda: solve_recaptcha_v2.delay(key, url).get(timeout=60)["acceptance"] == 0.5,
        timeout=60,
        what="a result with the acceptance rate",
    )


def _two_providers(a: Any, b: Any) -> dict[str, str]:
    """``main`` (2captcha, at ``a``, $1.00 per 1000) first, ``backup`` (captchaai, at
    ``b``, $2.00 per 1000): order routing, the default."""
    env = _env(a, CAPTCHA_TASKS_PROVIDERS="main,backup")
    for name in ("CAPTCHA_TASKS_PROVIDER", "CAPTCHA_TASKS_API_KEY", "CAPTCHAAI_API_KEY"):
        env.pop(name, None)
    env.pop("CAPTCHA_TASKS_SOLVER_URL", None)
    for name, protocol, sandbox, price in (
        ("MAIN", "2captcha", a, "1.00"),
        ("BACKUP", "captchaai", b, "2.00"),
    ):
        env[f"CAPTCHA_TASKS_{name}_PROTOCOL"] = protocol
        env[f"CAPTCHA_TASKS_{name}_URL"] = sandbox.url
        env[f"CAPTCHA_TASKS_{name}_API_KEY"] = dev_api_key(protocol)
        env[f"CAPTCHA_TASKS_{name}_PRICES"] = f"recaptcha_v2={price}"
        # Threads for every page at once: main takes each first solve (no failover).
        env[f"CAPTCHA_TASKS_{name}_THREADS"] = "60"
    return env


def _judged_pair(sandbox_factory: Any, *, seed: int) -> tuple[Any, Any]:
    """A (2captcha, whose demo site refuses 70 % of its tokens and 5 % of CaptchaAI's)
    and B (captchaai): the site on A judges both providers' tokens, and shows another
    sitekey on every load (each form takes only a token for its own)."""
    a = sandbox_factory(
        demo_port=0,
        dialect="2captcha",
        threads=60,
        seed=seed,
        reject_rates={"2captcha": 0.7, "captchaai": 0.05},
        demo_rotate_sitekey=True,
    )
    b = sandbox_factory(dialect="captchaai", threads=60, seed=seed + 1)
    a.demo.trust(b.state)
    return a, b


def test_a_site_refusing_70_percent_of_one_providers_tokens_still_serves_the_pages(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    a, b = _judged_pair(sandbox_factory, seed=11)
    worker_factory(_two_providers(a, b), concurrency=4)
    runs = 50
    sent = [fetch_page.delay(f"{a.demo_url}/page/{i}", isolated=True) for i in range(runs)]
    served, lost = [], 0
    for result in sent:
        try:
            served.append(result.get(timeout=180))
        except ChallengeRejected:
            lost += 1
    figures = _book().window("recaptcha_v2")
    main, backup = figures["main"], figures.get("backup", Tally())
    wait_until(
        lambda: (
            a.stats()["reports_bad"] + b.stats()["reports_bad"] >= main.rejected + backup.rejected
        ),
        timeout=60,
        what="the reports",
    )
    solves = {"main": a.stats()["submitted"], "backup": b.stats()["submitted"]}
    settings = get_settings()
    ledger = SpendLedger(state_redis(settings), Keys(settings.key_prefix))
    spent = {name: ledger.last_hour(name, time.time()) for name in solves}
    first_try = sum(p["attempts"] == 1 for p in served)
    print(
        f"\n{runs} isolated pages, order routing, the site refusing 70% of main's tokens "
        f"and 5% of backup's: {len(served)} served ({first_try} at the first token), "
        f"{lost} lost; solves {solves}; main {main}, backup {backup}; reportbad "
        f"{a.stats()['reports_bad']} + {b.stats()['reports_bad']}; spend {spent}"
    )
    assert len(served) >= 0.9 * runs
    # Each attempt posted a form of its own load, as the visitor that loaded it.
    assert (a.demo.stats()["stale_forms"], a.demo.stats()["expired_forms"]) == (0, 0)
    # Order routing: every page's first token came from main.
    assert solves["main"] >= runs
    assert all(p["status"] == 200 for p in served)
    # Every solve, the retries' too, is in the spend, at its provider's price.
    for name, price in (("main", Decimal("0.001")), ("backup", Decimal("0.002"))):
        usd, count = spent[name].get("recaptcha_v2", (Decimal(0), 0))
        assert count == solves[name] and usd == price * solves[name]
    # Every token judged once, every refused one reported to its provider once.
    assert main.total == solves["main"] and backup.total == solves["backup"]
    assert (a.stats()["reports_bad"], b.stats()["reports_bad"]) == (main.rejected, backup.rejected)
    assert a.stats()["reports_refused"] == b.stats()["reports_refused"] == 0


def test_a_shared_page_keeps_its_session_lock_through_its_attempts_then_frees_it(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(demo_port=0, reject_rates={"*": 1.0})
    worker_factory(_env(sandbox), concurrency=2)
    host = sandbox.demo_url.split("//")[1]
    with pytest.raises(ChallengeRejected):
        fetch_page.delay(f"{sandbox.demo_url}/page/1").get(timeout=120)
    settings = get_settings()
    # Three tokens (CAPTCHA_TASKS_PAGE_ATTEMPTS), each refused and reported once; the
    # host's lock is free once the attempts are spent.
    wait_until(lambda: sandbox.stats()["reports_bad"] >= 3, timeout=60, what="the reports")
    assert sandbox.stats()["submitted"] == 3 and sandbox.stats()["reports_bad"] == 3
    assert SessionLock(state_redis(settings), settings, host).holder() is None
    # The site told at runtime to accept them again: the next page is served.
    answer = requests.post(f"{sandbox.url}/admin/config", json={"reject_rates": {}}, timeout=5)
    answer.raise_for_status()
    page = fetch_page.delay(f"{sandbox.demo_url}/page/2").get(timeout=120)
    assert (page["status"], page["attempts"], page["solved"]) == (200, 1, True)
    tally = _book().window("recaptcha_v2")["default"]
    assert (tally.accepted, tally.rejected) == (1, 3)


def test_a_refused_pooled_token_is_followed_by_a_solve(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    # Seed 1: the site's first draw refuses (0.13 < 0.5), its second accepts (0.85).
    sandbox = sandbox_factory(demo_port=0, reject_rates={"*": 0.5}, seed=1)
    worker_factory(_env(sandbox))
    page_url = f"{sandbox.demo_url}/page/pooled"
    settings = get_settings()
    pool = TokenPool(state_redis(settings), settings)
    pool.fill(RecaptchaV2(sandbox.config.demo_sitekey, page_url), target=1)
    wait_until(lambda: pool.status()[0]["size"] == 1, timeout=60, what="a pooled token")
    page = fetch_page.delay(page_url).get(timeout=120)
    assert (page["status"], page["source"], page["attempts"]) == (200, "api", 2)
    # The pooled token names no solve: only the solve that followed it is counted.
    tally = _book().window("recaptcha_v2")["default"]
    assert (tally.accepted, tally.rejected) == (1, 0)
    assert sandbox.demo.stats()["tokens_rejected"] == 1
