"""``solve_altcha`` at a provider, when ``CAPTCHA_TASKS_ALTCHA_SOLVER`` says so: through a
real ``celery worker`` and the sandbox, on every provider that offers Altcha (2Captcha
over both protocols, Anti-Captcha, CapMonster Cloud's CustomTask), the payload passing
the reference verifier (tests/support/altcha_reference.py), one submit, the solve's
provider and cost set; ``auto`` keeping an easy challenge on the worker and sending a
hard one (given or fetched) to the provider; refused with ``TYPE_NOT_OFFERED``, nothing
sent, where the provider does not offer it. The worker-only default, with 0 requests to
any provider, is tests/integration/test_altcha.py's."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
import requests

from captcha_tasks import solve_altcha
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.settings import get_settings
from captcha_tasks_sandbox import dev_api_key
from tests.integration.test_altcha import NUMBER, challenge_site
from tests.support.altcha_reference import create_challenge, verify_solution
from tests.support.workers import provider_env, provider_sandbox

pytestmark = pytest.mark.integration

PAGE = "https://example.com/contact"
KEY = "the demo site's hmac key"  # test_altcha.challenge_site's
#: Who offers it (provider/offers.py SOURCES: each provider's docs and SDK).
OFFERED = ["2captcha", "2captcha-v2", "anticaptcha", "capmonster"]
#: ``auto``'s bound in these tests: the worker solves up to this ``maxnumber``.
BOUND = 1_000


@pytest.fixture
def mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """Sets ``CAPTCHA_TASKS_ALTCHA_SOLVER`` (and the bound) for the caller, and returns the
    variables for the worker: both sides read the same settings."""

    def set_mode(value: str) -> dict[str, str]:
        env = {"CAPTCHA_TASKS_ALTCHA_SOLVER": value, "CAPTCHA_TASKS_ALTCHA_MAX_NUMBER": str(BOUND)}
        for name, setting in env.items():
            monkeypatch.setenv(name, setting)
        get_settings.cache_clear()
        return env

    yield set_mode
    get_settings.cache_clear()


def _submitted(sandbox: Any) -> int:
    count: int = sandbox.stats()["submitted"]
    return count


@pytest.mark.parametrize("provider", OFFERED)
def test_provider_mode_solves_at_each_provider_that_offers_it(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, mode: Any, provider: str
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    # in.php's and CapMonster's answers carry no price: the configured one counts there.
    env = {**provider_env(sandbox, provider), "CAPTCHA_TASKS_PRICES": "altcha=0.8"}
    worker_factory({**env, **mode("provider")})
    challenge = create_challenge(KEY, 77, max_number=500)  # easy: a provider all the same
    result = solve_altcha.delay(PAGE, challenge_json=challenge).get(timeout=90)
    assert verify_solution(result["solution"], KEY)
    assert (result["type"], result["source"]) == ("altcha", "api")
    assert (result["provider"], result["protocol"]) == ("default", provider)
    assert result["submits"] == 1 and result["captcha_id"] != challenge["challenge"]
    source = "configured" if provider in ("2captcha", "capmonster") else "provider"
    assert (Decimal(result["cost"]) > 0, result["cost_source"]) == (True, source), result
    stats = sandbox.stats()
    assert (stats["submitted"], stats["param_errors"]) == (1, 0)
    assert stats["by_type"]["altcha"] == 1


def test_auto_keeps_an_easy_one_on_the_worker_and_sends_a_hard_one_to_the_provider(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, mode: Any
) -> None:
    sandbox = provider_sandbox(sandbox_factory, "anticaptcha")
    with challenge_site() as site:  # serves maxnumber 100,000: over the bound
        env = provider_env(sandbox, "anticaptcha")
        env["CAPTCHA_TASKS_ALLOWED_DOMAINS"] = f"127.0.0.1:{site.port}"
        worker_factory({**env, **mode("auto")})
        easy = create_challenge(KEY, 99, max_number=BOUND)
        on_worker = solve_altcha.delay(PAGE, challenge_json=easy).get(timeout=60)
        assert (on_worker["provider"], on_worker["cost"]) == (None, "0")
        assert _submitted(sandbox) == 0
        hard = create_challenge(KEY, 4_321, max_number=BOUND * 10)
        given = solve_altcha.delay(PAGE, challenge_json=hard).get(timeout=90)
        assert _submitted(sandbox) == 1
        fetched = solve_altcha.delay(f"{site.url}/", challenge_url="/altcha/challenge").get(
            timeout=90
        )
        assert _submitted(sandbox) == 2 and site.requests == 1  # fetched by the worker
    for result in (on_worker, given, fetched):
        assert verify_solution(result["solution"], KEY)
    assert (given["protocol"], given["submits"]) == ("anticaptcha", 1)
    assert (fetched["protocol"], fetched["submits"]) == ("anticaptcha", 1)
    assert Decimal(given["cost"]) > 0 and Decimal(fetched["cost"]) > 0
    assert (on_worker["submits"], on_worker["protocol"]) == (0, None)
    assert json.loads(base64.b64decode(fetched["solution"]))["number"] == NUMBER


@pytest.mark.parametrize("provider", ["captchaai", "capsolver"])
def test_provider_mode_refuses_it_where_not_offered(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, mode: Any, provider: str
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    worker_factory({**provider_env(sandbox, provider), **mode("provider")})
    with pytest.raises(InvalidTaskInput, match=f"provider {provider}") as info:
        solve_altcha.delay(PAGE, challenge_json=create_challenge(KEY, 5)).get(timeout=30)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert "does not solve Altcha" in str(info.value) and "nothing was sent" in str(info.value)
    assert _submitted(sandbox) == 0
    assert celery_app.backend.client.keys("ct:job:*") == []


@pytest.mark.parametrize(
    ("dialect", "answer"), [("captchaai", "ERROR_BAD_PARAMETERS"), ("2captcha", "OK|")]
)
def test_the_sandboxs_in_php_answers_altcha_as_each_dialect_does(
    sandbox_factory: Any, dialect: str, answer: str
) -> None:
    sandbox = sandbox_factory(dialect=dialect)
    params = {
        "key": dev_api_key(dialect),
        "method": "altcha",
        "pageurl": PAGE,
        "challenge_json": json.dumps(create_challenge(KEY, 5)),
    }
    reply = requests.post(f"{sandbox.url}/in.php", data=params, timeout=5).text
    assert reply.startswith(answer), reply  # CaptchaAI: a method it does not know
    assert _submitted(sandbox) == (1 if dialect == "2captcha" else 0)
