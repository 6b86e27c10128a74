"""The 0.2 task names kept for one release: called from Python they warn once per
process, saying what to call instead, and send (or run) the family's task with the
translated arguments. (A queued old-name message solved by a real worker:
tests/integration/test_more_types.py.)"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks import solve_recaptcha_v2, solve_turnstile
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.settings import get_settings
from captcha_tasks.worker import deprecated
from captcha_tasks.worker.deprecated import solve_recaptcha_v2_enterprise, solve_turnstile_challenge
from captcha_tasks.worker.task_bases import SolverTask

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
PAGE = "https://example.com/login"
CHALLENGE = {"action": "managed", "cdata": "c0ffee", "pagedata": "3gAFo2"}


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any, Any]]]:
    """What reaches Celery's send (nothing reaches a broker), from a caller with no key;
    and a process that has warned about nothing yet."""
    for name in ("CAPTCHA_TASKS_API_KEY", "CAPTCHAAI_API_KEY", "CAPTCHA_TASKS_PROVIDERS"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()
    monkeypatch.setattr(deprecated, "_warned", set())
    out: list[tuple[str, Any, Any]] = []
    monkeypatch.setattr(
        SolverTask,
        "apply_async",
        lambda self, a=None, k=None, *r, **o: out.append((self.name, tuple(a or ()), k or {})),
    )
    yield out
    get_settings.cache_clear()


def _calls(action: Any) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        action()
    return [w for w in caught if issubclass(w.category, FutureWarning)]


def test_the_enterprise_alias_warns_once_and_sends_solve_recaptcha_v2(sent: list[Any]) -> None:
    first = _calls(lambda: solve_recaptcha_v2_enterprise.delay(V2_KEY, PAGE, s="page-s"))
    assert [str(w.message) for w in first] == [
        "captcha_tasks.solve_recaptcha_v2_enterprise is deprecated and will be removed in "
        "the next release; call solve_recaptcha_v2(sitekey, pageurl, enterprise=True, "
        "data_s=s, ...) instead"
    ]
    assert first[0].filename == __file__  # pointed at the caller's line
    again = _calls(
        lambda: solve_recaptcha_v2_enterprise.apply_async((V2_KEY, PAGE), {"invisible": True})
    )
    assert again == []  # once per process
    assert sent == [
        (solve_recaptcha_v2.name, (V2_KEY, PAGE), {"data_s": "page-s", "enterprise": True}),
        (
            solve_recaptcha_v2.name,
            (V2_KEY, PAGE),
            {"invisible": True, "data_s": None, "enterprise": True},
        ),
    ]


def test_the_challenge_alias_warns_once_and_sends_solve_turnstile(sent: list[Any]) -> None:
    first = _calls(lambda: solve_turnstile_challenge.si(TURNSTILE_KEY, PAGE, **CHALLENGE).delay())
    assert len(first) == 1 and "call solve_turnstile(sitekey, pageurl, action=" in str(
        first[0].message
    )
    assert _calls(lambda: solve_turnstile_challenge.delay(TURNSTILE_KEY, PAGE, **CHALLENGE)) == []
    assert sent == [(solve_turnstile.name, (TURNSTILE_KEY, PAGE), CHALLENGE)] * 2


def test_a_direct_call_warns_and_runs_the_familys_task(
    sent: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    ran: list[Any] = []
    monkeypatch.setattr(solve_turnstile, "run", lambda *a, **k: ran.append((a, k)) or "token")
    warned = _calls(lambda: ran.append(solve_turnstile_challenge(TURNSTILE_KEY, PAGE, **CHALLENGE)))
    assert len(warned) == 1
    assert ran == [((TURNSTILE_KEY, PAGE), CHALLENGE), "token"]


def test_the_old_signature_is_still_checked_in_the_caller(sent: list[Any]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        with pytest.raises(InvalidTaskInput, match=r"cdta \(did you mean 'cdata'\?\)"):
            solve_turnstile_challenge.delay(TURNSTILE_KEY, PAGE, action="a", cdta="c", pagedata="p")
        with pytest.raises(InvalidTaskInput, match=r"RecaptchaV2\.sitekey"):
            solve_recaptcha_v2_enterprise.delay("", PAGE)
    assert sent == []
