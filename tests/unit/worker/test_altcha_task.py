"""``solve_altcha`` as a task: refused at ``.delay()`` (nothing sent) for a bad call, and
run in-process (the body, as the worker runs it) to a payload the reference verifier
accepts, with no provider and no Redis touched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import altcha
import pytest

from captcha_tasks import solve_altcha
from captcha_tasks.errors import InvalidTaskInput, TargetNotAllowed
from captcha_tasks.settings import get_settings
from captcha_tasks.worker import altcha_tasks
from captcha_tasks.worker.task_bases import SolverTask
from tests.support.altcha_reference import create_challenge, verify_solution

KEY = "site key"
TOO_HARD = create_challenge(KEY, 1, max_number=10**8)
V2 = altcha.create_challenge("PBKDF2/SHA-256", 100, hmac_secret=KEY).to_dict()
#: 1 GiB of Argon2id memory, and a PBKDF2 search of years: past the default bounds.
V2_TOO_BIG = altcha.create_challenge("ARGON2ID", 1, memory_cost=1 << 20).to_dict()
V2_TOO_SLOW = altcha.create_challenge("PBKDF2/SHA-512", 10**9).to_dict()
PAGE = "https://example.com/contact"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What ``.delay()`` hands on to send once the caller's check passed (nothing reaches
    a broker); Redis and the provider clients must not be touched."""
    for name in (
        "CAPTCHA_TASKS_ALLOWED_DOMAINS",
        "CAPTCHA_TASKS_ALTCHA_MAX_NUMBER",
        "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS",
        "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB",
        "CAPTCHA_TASKS_ALTCHA_SOLVER",
    ):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    calls: list[Any] = []
    monkeypatch.setattr(SolverTask, "apply_async", lambda self, a, k, *r, **o: calls.append(k))

    def untouched(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("solve_altcha touched Redis or a provider")

    monkeypatch.setattr(altcha_tasks, "state_redis", untouched)
    monkeypatch.setattr(SolverTask, "solver", property(untouched))
    yield calls
    get_settings.cache_clear()


def test_a_valid_call_is_sent(sent: list[Any]) -> None:
    challenge = create_challenge(KEY, 12)
    solve_altcha.delay(PAGE, challenge_json=challenge)
    solve_altcha.delay(PAGE, challenge_json=json.dumps(challenge), proxy_id="a1b2c3")
    solve_altcha.delay(PAGE, challenge_url="/altcha/challenge")
    solve_altcha.delay(PAGE, challenge_json=V2)
    assert len(sent) == 4


@pytest.mark.parametrize(
    ("args", "kwargs", "code"),
    [
        ((PAGE,), {}, "BAD_ALTCHA_CHALLENGE"),  # neither
        ((PAGE,), {"challenge_json": {}, "challenge_url": "/c"}, "BAD_ALTCHA_CHALLENGE"),  # both
        ((PAGE,), {"challenge_json": "{oops"}, "BAD_ALTCHA_CHALLENGE"),
        ((PAGE,), {"challenge_json": TOO_HARD}, "ALTCHA_TOO_HARD"),
        ((PAGE,), {"challenge_json": V2_TOO_BIG}, "ALTCHA_TOO_MUCH_MEMORY"),
        ((PAGE,), {"challenge_json": V2_TOO_SLOW}, "ALTCHA_TOO_HARD"),
        ((PAGE,), {"challenge_json": {"parameters": {}}}, "BAD_ALTCHA_CHALLENGE"),
        (("ftp://example.com/",), {"challenge_url": "/c"}, "INVALID_INPUT"),
        ((PAGE,), {"challenge_url": "ftp://example.com/c"}, "TARGET_NOT_ALLOWED"),
        ((PAGE,), {"challenge_url": 7}, "INVALID_INPUT"),
        ((PAGE,), {"challenge_url": "/c", "proxy_id": "x" * 65}, "INVALID_INPUT"),
    ],
)
def test_a_bad_call_raises_at_delay_and_nothing_is_sent(
    sent: list[Any], args: tuple[Any, ...], kwargs: dict[str, Any], code: str
) -> None:
    with pytest.raises(InvalidTaskInput) as caught:
        solve_altcha.delay(*args, **kwargs)
    assert caught.value.code == code
    assert sent == []


def test_the_bound_is_the_callers_setting(sent: list[Any], monkeypatch: Any) -> None:
    challenge = create_challenge(KEY, 1, max_number=5_000)
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_MAX_NUMBER", "4999")
    get_settings.cache_clear()
    with pytest.raises(InvalidTaskInput, match="ALTCHA_TOO_HARD"):
        solve_altcha.delay(PAGE, challenge_json=challenge)
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_MAX_NUMBER", "5000")
    get_settings.cache_clear()
    solve_altcha.delay(PAGE, challenge_json=challenge)
    assert len(sent) == 1


def test_a_challenge_url_off_the_callers_allowlist_raises_at_delay(
    sent: list[Any], monkeypatch: Any
) -> None:
    monkeypatch.setenv("CAPTCHA_TASKS_ALLOWED_DOMAINS", "example.com")
    get_settings.cache_clear()
    solve_altcha.delay(PAGE, challenge_url="/altcha")  # a path of the page: allowed
    with pytest.raises(TargetNotAllowed):
        solve_altcha.delay(PAGE, challenge_url="https://elsewhere.org/altcha")
    assert len(sent) == 1


def test_the_body_returns_the_payload_as_a_free_token_result(sent: list[Any]) -> None:
    challenge = create_challenge(KEY, 4_242, expires=4_102_444_800)
    result = solve_altcha(PAGE, challenge_json=challenge)  # the body, in this process
    assert verify_solution(result["solution"], KEY)
    assert result["type"] == "altcha" and result["source"] == "api"
    assert (result["provider"], result["protocol"], result["cost"]) == (None, None, "0")
    assert (result["submits"], result["polls"]) == (0, 0)
    assert result["captcha_id"] == challenge["challenge"]
    assert result["expires_at"] == 4_102_444_800.0
    assert result["solve_seconds"] >= 0


def test_the_time_and_memory_bounds_are_the_callers_settings(
    sent: list[Any], monkeypatch: Any
) -> None:
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB", "2048")
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_MAX_SECONDS", "3600")
    get_settings.cache_clear()
    solve_altcha.delay(PAGE, challenge_json=V2_TOO_BIG)  # some 256 derivations of ~1 s
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_MAX_SECONDS", "0.01")
    get_settings.cache_clear()
    with pytest.raises(InvalidTaskInput, match="ALTCHA_MAX_SECONDS"):
        solve_altcha.delay(PAGE, challenge_json=V2_TOO_BIG)
    assert len(sent) == 1


def test_provider_mode_refuses_v2_at_delay_and_auto_keeps_it(
    sent: list[Any], monkeypatch: Any
) -> None:
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_SOLVER", "provider")
    get_settings.cache_clear()
    with pytest.raises(InvalidTaskInput) as caught:
        solve_altcha.delay(PAGE, challenge_json=V2)
    assert caught.value.code == "ALTCHA_V2_NOT_OFFERED"
    monkeypatch.setenv("CAPTCHA_TASKS_ALTCHA_SOLVER", "auto")
    get_settings.cache_clear()
    solve_altcha.delay(PAGE, challenge_json=V2)  # the worker's: nothing of a provider checked
    with pytest.raises(InvalidTaskInput, match="ALTCHA_TOO_MUCH_MEMORY"):
        solve_altcha.delay(PAGE, challenge_json=V2_TOO_BIG)  # no provider to send it to
    assert len(sent) == 1


def test_the_body_solves_v2_to_a_payload_the_library_verifies(sent: list[Any]) -> None:
    made = altcha.create_challenge(
        "SCRYPT", 64, memory_cost=8, counter=3, expires_at=4_102_444_800, hmac_secret=KEY
    ).to_dict()
    result = solve_altcha(PAGE, challenge_json=made)
    assert altcha.verify_solution(result["solution"], KEY).verified
    assert result["captcha_id"] == made["parameters"]["nonce"]
    assert result["expires_at"] == 4_102_444_800.0
    assert (result["provider"], result["cost"]) == (None, "0")
