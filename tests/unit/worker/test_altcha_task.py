"""``solve_altcha`` as a task: refused at ``.delay()`` (nothing sent) for a bad call, and
run in-process (the body, as the worker runs it) to a payload the reference verifier
accepts, with no provider and no Redis touched."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks import solve_altcha
from captcha_tasks.errors import InvalidTaskInput, TargetNotAllowed
from captcha_tasks.settings import get_settings
from captcha_tasks.worker import altcha_tasks
from captcha_tasks.worker.task_bases import SolverTask
from tests.support.altcha_reference import create_challenge, verify_solution

KEY = "site key"
TOO_HARD = create_challenge(KEY, 1, max_number=10**8)
PAGE = "https://example.com/contact"


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """What ``.delay()`` hands on to send once the caller's check passed (nothing reaches
    a broker); Redis and the provider clients must not be touched."""
    for name in ("CAPTCHA_TASKS_ALLOWED_DOMAINS", "CAPTCHA_TASKS_ALTCHA_MAX_NUMBER"):
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
    assert len(sent) == 3


@pytest.mark.parametrize(
    ("args", "kwargs", "code"),
    [
        ((PAGE,), {}, "BAD_ALTCHA_CHALLENGE"),  # neither
        ((PAGE,), {"challenge_json": {}, "challenge_url": "/c"}, "BAD_ALTCHA_CHALLENGE"),  # both
        ((PAGE,), {"challenge_json": "{oops"}, "BAD_ALTCHA_CHALLENGE"),
        ((PAGE,), {"challenge_json": TOO_HARD}, "ALTCHA_TOO_HARD"),
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
