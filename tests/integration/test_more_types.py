"""Six captcha types end to end: FunCaptcha, GeeTest v4, AWS WAF, image to
coordinates, reCAPTCHA v2 Enterprise with ``data_s`` and Turnstile in challenge mode, through a
real ``celery worker`` with ``.delay()``, for every provider that offers them (the four JSON
dialects and classic 2Captcha, as the sandbox speaks them), and refused at once, with nothing
sent, by a provider that does not."""

from __future__ import annotations

import asyncio
import base64
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import requests

from captcha_tasks import (
    aio,
    solve_aws_waf,
    solve_coordinates,
    solve_funcaptcha,
    solve_geetest_v4,
    solve_recaptcha_v2,
    solve_turnstile,
)
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.worker import deprecated
from captcha_tasks_sandbox import dev_api_key
from captcha_tasks_sandbox.answers import coordinates_answer
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
ARKOSE_KEY = "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC"
GEETEST_ID = "e392e1d7fd421dc63325744d5a2b9c73"
AWS_KEY = "AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTbNg96AHMDLodoefdvyOnsHMRtEKQAAAAfjB8Bgkq"
AWS_IV = "CgAHbCe2GgAAAAAj"
AWS_CONTEXT = "9BUgmlm48F92WUoqv97a49ZuEJJ50TCk9MVr3C7WMtQ0X6flVbufM4n8mjFLmbLVAPgaQ1Jyde"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAQ3RFWHRDb21tZW50AHBhZGRpbmcgcGFk"
    "ZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZyBwYWRkaW5nIHBhZGRpbmcgcGFkZGluZ+a6jLUAAAAN"
    "SURBVHicY/j//z8DAAj8Av7ueu+cAAAAAElFTkSuQmCC"
)
PAGE = "https://example.com/login"
UA = "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"

#: Each new kind: how to enqueue it.
SOLVES: dict[str, Callable[[], Any]] = {
    "funcaptcha": lambda: solve_funcaptcha.delay(
        ARKOSE_KEY, PAGE, surl="https://client-api.arkoselabs.com", data_blob="b1ob+/=="
    ),
    "geetest_v4": lambda: solve_geetest_v4.delay(GEETEST_ID, PAGE),
    "aws_waf": lambda: solve_aws_waf.delay(AWS_KEY, AWS_IV, AWS_CONTEXT, PAGE),
    "coordinates": lambda: solve_coordinates.delay(
        base64.b64encode(PNG).decode(), textinstructions="click every cat"
    ),
    "recaptcha_v2_enterprise": lambda: solve_recaptcha_v2.delay(
        V2_KEY, PAGE, enterprise=True, data_s="Q9qI-payload_s"
    ),
    "turnstile_challenge": lambda: solve_turnstile.delay(
        TURNSTILE_KEY, PAGE, action="managed", cdata="7d2a1f", pagedata="3gAFo2l2", user_agent=UA
    ),
}
#: What each provider (as a sandbox dialect) does not offer (docs/PROVIDERS.md §3).
NOT_OFFERED = {
    "2captcha": set(),
    "2captcha-v2": set(),
    "anticaptcha": set(),
    "capsolver": {"funcaptcha", "coordinates", "turnstile_challenge"},
    "capmonster": {"coordinates"},
}
GEETEST_V4_FIELDS = {"captcha_id", "lot_number", "pass_token", "gen_time", "captcha_output"}


def _env(sandbox: Any, provider: str) -> dict[str, str]:
    env = {"CAPTCHA_TASKS_PROVIDER": provider, "CAPTCHA_TASKS_API_KEY": dev_api_key(provider)}
    return worker_env(sandbox.url, **env)


def _sandbox(sandbox_factory: Any, provider: str) -> Any:
    if provider == "2captcha":
        return sandbox_factory()
    return sandbox_factory(protocol="json", dialect=provider)


def _verify(sandbox: Any, token: str) -> bool:
    reply = requests.post(f"{sandbox.url}/siteverify", data={"response": token}, timeout=5)
    return bool(reply.json()["success"])


@pytest.mark.parametrize("provider", sorted(NOT_OFFERED))
def test_every_new_type_a_provider_offers_solves_in_the_shape_it_documents(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, provider: str
) -> None:
    sandbox = _sandbox(sandbox_factory, provider)
    worker_factory(_env(sandbox, provider))
    offered = [kind for kind in SOLVES if kind not in NOT_OFFERED[provider]]
    pending = {kind: SOLVES[kind]() for kind in offered}
    got = {kind: result.get(timeout=90) for kind, result in pending.items()}
    for kind, result in got.items():
        assert result["source"] == "api", kind
        assert result["submits"] == 1, kind
        assert result["protocol"] == provider, kind
    stats = sandbox.stats()
    assert (stats["submitted"], stats["duplicates"]) == (len(offered), 0)

    if "funcaptcha" in got:
        token = got["funcaptcha"]["solution"]
        assert got["funcaptcha"]["type"] == "funcaptcha"
        assert isinstance(token, str) and f"pk={ARKOSE_KEY}" in token
    v4 = got["geetest_v4"]["solution"]
    assert set(v4) == GEETEST_V4_FIELDS and v4["captcha_id"] == GEETEST_ID
    assert all(isinstance(value, str) and value for value in v4.values())
    aws = got["aws_waf"]["solution"]
    # The cookie itself where the provider gives it, else the voucher pair to redeem.
    if provider in ("anticaptcha", "capsolver", "capmonster"):
        assert set(aws) == {"aws_waf_token"} and aws["aws_waf_token"]
    else:
        assert set(aws) == {"captcha_voucher", "existing_token"}
    if "coordinates" in got:
        assert got["coordinates"]["type"] == "coordinates"
        assert got["coordinates"]["solution"] == coordinates_answer(PNG)
    enterprise = got["recaptcha_v2_enterprise"]
    assert enterprise["type"] == "recaptcha_v2"
    assert _verify(sandbox, enterprise["solution"])
    if "turnstile_challenge" in got:
        challenge = got["turnstile_challenge"]
        assert challenge["type"] == "turnstile"
        assert _verify(sandbox, challenge["solution"])
        # Challenge mode: the token is bound to a browser identity the caller must use.
        assert challenge["user_agent"]


@pytest.mark.parametrize(
    ("provider", "kind"),
    [(provider, kind) for provider, kinds in sorted(NOT_OFFERED.items()) for kind in sorted(kinds)],
)
def test_a_new_type_the_provider_does_not_offer_fails_at_once_naming_it(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, provider: str, kind: str
) -> None:
    sandbox = _sandbox(sandbox_factory, provider)
    worker_factory(_env(sandbox, provider))
    with pytest.raises(InvalidTaskInput, match=provider) as info:
        SOLVES[kind]().get(timeout=30)
    assert info.value.code == "TYPE_NOT_OFFERED"
    assert sandbox.stats()["submitted"] == 0
    # Refused at admission: nothing was queued for the engine either.
    assert celery_app.backend.client.keys("ct:job:*") == []


def test_bad_arguments_to_the_new_tasks_fail_at_once_with_the_field_named(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory()
    worker_factory(_env(sandbox, "2captcha"))
    bad = {
        "FunCaptcha.publickey": (solve_funcaptcha, ("not-a-key", PAGE), {}),
        "GeeTestV4.captcha_id": (solve_geetest_v4, ("xyz", PAGE), {}),
        "AwsWaf.iv": (solve_aws_waf, (AWS_KEY, "!", AWS_CONTEXT, PAGE), {}),
        "Coordinates.body": (solve_coordinates, (base64.b64encode(b"GIF89a").decode(),), {}),
        "Turnstile.pagedata": (
            solve_turnstile,
            (TURNSTILE_KEY, PAGE),
            {"action": "managed", "cdata": "x", "pagedata": ""},
        ),
    }
    for field, (task, args, kwargs) in bad.items():
        with pytest.raises(InvalidTaskInput, match=field):
            task.delay(*args, **kwargs)  # in the caller
        with pytest.raises(InvalidTaskInput, match=field):  # by name: in the worker
            celery_app.send_task(task.name, args=args, kwargs=kwargs).get(timeout=30)
    assert sandbox.stats()["submitted"] == 0


def test_messages_queued_under_the_old_names_are_solved_and_aio_warns_once(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, monkeypatch: Any
) -> None:
    """A 0.2 caller's messages (the removed names, with their arguments) are solved by a
    worker of this release; ``aio``'s old names warn once and send the family's task."""
    sandbox = sandbox_factory()
    worker_factory(_env(sandbox, "2captcha"))
    old = {
        "captcha_tasks.solve_recaptcha_v2_enterprise": ((V2_KEY, PAGE), {"s": "Q9qI-payload_s"}),
        "captcha_tasks.solve_turnstile_challenge": (
            (TURNSTILE_KEY, PAGE),
            {"action": "managed", "cdata": "7d2a1f", "pagedata": "3gAFo2l2", "user_agent": UA},
        ),
    }
    sent = {name: celery_app.send_task(name, args=a, kwargs=k) for name, (a, k) in old.items()}
    for name, result in sent.items():
        solved = result.get(timeout=90)
        assert solved["source"] == "api" and _verify(sandbox, solved["solution"]), name
    assert sandbox.stats()["submitted"] == 2

    monkeypatch.setattr(deprecated, "_warned", set())

    async def twice() -> list[Any]:
        args, kwargs = old["captcha_tasks.solve_turnstile_challenge"]
        return [await aio.solve_turnstile_challenge(*args, timeout=90, **kwargs) for _ in range(2)]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tokens = asyncio.run(twice())
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert len(messages) == 1 and "call solve_turnstile(" in messages[0]
    assert caught[0].filename == __file__
    assert all(_verify(sandbox, t["solution"]) for t in tokens)
    assert sandbox.stats()["submitted"] == 4
