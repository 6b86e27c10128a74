"""The caller's checks (``CheckedTask.check_call``): which tasks run them, that a valid
call passes without a key and without Redis, and which sends skip them."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
from celery import signature

from captcha_tasks import app
from captcha_tasks.caller.checks import unchecked_sends
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.settings import get_settings
from captcha_tasks.worker import altcha_tasks, deprecated, page_tasks, solve_tasks
from captcha_tasks.worker.task_bases import CheckedTask, SolverTask

V2_KEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
TURNSTILE_KEY = "0x4AAAAAAABkMYinukE8nzY"
HCAPTCHA_KEY = "a5f74b19-9e45-40e0-b45d-47ff91b7a6c2"
PAGE = "https://example.com/login"
PNG_B64 = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256))).decode()
AWS = ("AQIDAHjcYu/GjX+QlghicBgQ/7bFaQZ+m5FKCMDnO+vTp9Ei=", "CgAHbCe2GgAAAAAj", "c" * 64)

#: A valid call of every task whose caller runs its checks.
VALID: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {
    "captcha_tasks.solve_recaptcha_v2": ((V2_KEY, PAGE), {"invisible": True, "proxy_id": "p1"}),
    "captcha_tasks.solve_recaptcha_v3": ((V2_KEY, PAGE), {"min_score": 0.7}),
    "captcha_tasks.solve_turnstile": ((TURNSTILE_KEY, PAGE), {"action": "login"}),
    "captcha_tasks.solve_hcaptcha": ((HCAPTCHA_KEY, PAGE), {"provider": "main"}),
    "captcha_tasks.solve_image": ((PNG_B64,), {"numeric": 1}),
    "captcha_tasks.solve_geetest": (
        ("f1ab2cdefa3456789012345678901234", "12345678abc90123d45678ef90123a456b", PAGE),
        {},
    ),
    "captcha_tasks.solve_funcaptcha": (("5f1b8c3a-2d4e-4f60-9a7b-0c1d2e3f4a5b", PAGE), {}),
    "captcha_tasks.solve_geetest_v4": (("e392e1d7fd421dc63325744d5a2b9c73", PAGE), {}),
    "captcha_tasks.solve_aws_waf": ((*AWS, PAGE), {"exclude": ["main"]}),
    "captcha_tasks.solve_coordinates": ((PNG_B64,), {"textinstructions": "click the cats"}),
    "captcha_tasks.solve_grid": ((PNG_B64, "/m/01bjv"), {"rows": 4, "cols": 4}),
    "captcha_tasks.solve_mtcaptcha": (
        ("MTPublic-KzqLY1cKH", PAGE),
        {"action": "login", "invisible": True},
    ),
    "captcha_tasks.solve_friendly_captcha": (
        ("FCMDESUD3M34857N", PAGE),
        {
            "module_script_url": "https://cdn.jsdelivr.net/npm/@friendlycaptcha/sdk@0.1.8/site.min.js"
        },
    ),
    "captcha_tasks.solve_prosopo": (("5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm", PAGE), {}),
    "captcha_tasks.solve_datadome": (
        (
            "https://geo.captcha-delivery.com/captcha/?initialCid=AHrl&cid=6QAE&t=fe&s=40070",
            PAGE,
            "Mozilla/5.0 (Windows NT 10.0; Win64; x64) Chrome/124.0.0.0",
        ),
        {"proxy_id": "p1", "datadome_cookie": "datadome=x"},
    ),
    "captcha_tasks.solve_cloudflare_challenge": (
        (PAGE,),
        {"proxy_id": "p1", "user_agent": "Mozilla/5.0 (X11) Chrome/131.0", "html": "<html>"},
    ),
    "captcha_tasks.solve_yidun": (("07e2387ab53a4d6f930b8d9a9be71bdf", PAGE), {"hct": 17}),
    "captcha_tasks.solve_binance": (("login", PAGE, "cb0bfefa598b4d3a8e3f6a40b5a7e9c1"), {}),
    "captcha_tasks.solve_tencent": (("189123456", PAGE), {"user_agent": "Mozilla/5.0"}),
    "captcha_tasks.solve_recaptcha_v2_enterprise": ((V2_KEY, PAGE), {"s": "page-s"}),  # alias
    "captcha_tasks.solve_turnstile_challenge": (
        (TURNSTILE_KEY, PAGE),
        {"action": "managed", "cdata": "c0ffee", "pagedata": "3gAFo2"},
    ),
    "captcha_tasks.fetch_page": ((PAGE,), {"form": {"q": "1"}, "isolated": True}),
    "captcha_tasks.solve_altcha": ((PAGE,), {"challenge_url": "/altcha/challenge"}),
}


@pytest.fixture
def caller(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A caller with no key and no allowlist, whose Redis must not be touched."""
    for name in ("CAPTCHA_TASKS_API_KEY", "CAPTCHAAI_API_KEY", "CAPTCHA_TASKS_ALLOWED_DOMAINS"):
        monkeypatch.delenv(name, raising=False)
    get_settings.cache_clear()

    def no_redis(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the caller's check touched Redis")

    for module in (solve_tasks, page_tasks, altcha_tasks):
        monkeypatch.setattr(module, "state_redis", no_redis)
    yield
    get_settings.cache_clear()


def test_every_solve_task_and_fetch_page_is_checked_in_the_caller() -> None:
    assert deprecated.ALIASES  # registered (the worker imports every module of app.include)
    checked = {name for name, task in app.tasks.items() if getattr(task, "check_in_caller", False)}
    assert checked == set(VALID)
    assert not app.tasks["captcha_tasks.submit_challenge"].check_in_caller


@pytest.mark.parametrize("name", sorted(VALID))
def test_a_valid_call_passes_without_a_key_or_redis(caller: None, name: str) -> None:
    args, kwargs = VALID[name]
    kwargs = dict(kwargs)
    app.tasks[name].check_call(args, kwargs)
    assert kwargs == VALID[name][1]  # the caller's own dict is left as it was


def test_an_unknown_option_names_the_closest_known_one() -> None:
    task = app.tasks["captcha_tasks.solve_recaptcha_v2"]
    with pytest.raises(InvalidTaskInput) as caught:
        task.check_fits((V2_KEY, PAGE), {"invisble": True, "zzz": 1, "exlude": []})
    message = str(caught.value)
    assert "exlude (did you mean 'exclude'?)" in message
    assert "invisble (did you mean 'invisible'?)" in message
    assert ", zzz;" in message  # nothing close: no guess
    task.check_fits((V2_KEY, PAGE), {"invisible": True})  # it fits: nothing raised
    with pytest.raises(InvalidTaskInput, match="missing 1 required positional argument: 'pageurl'"):
        task.check_fits((V2_KEY,), {})  # no keyword to blame: Python's own words


def test_sends_of_a_worker_skip_the_callers_check(caller: None, monkeypatch: Any) -> None:
    """A chain step sent when its parent ended (parent_id given) and sends inside
    unchecked_sends() go to the worker, which refuses them under their own ids."""
    task = app.tasks["captcha_tasks.solve_recaptcha_v2"]
    sent: list[tuple[Any, Any]] = []
    # What CheckedTask.apply_async hands on to send (nothing reaches the broker here).
    monkeypatch.setattr(
        SolverTask, "apply_async", lambda self, a, k, *r, **o: sent.append((tuple(a), k or {}))
    )
    with pytest.raises(InvalidTaskInput):
        task.apply_async(("", PAGE))
    task.apply_async(("", PAGE), parent_id="parent")
    with unchecked_sends():
        task.apply_async(("", PAGE))
        signature(task.name, args=("", PAGE), app=app).delay()
        task.si("", PAGE)  # not checked when built either
    assert sent == [(("", PAGE), {})] * 3


def test_the_callers_check_reads_the_arguments_and_never_runs_the_body() -> None:
    checked: list[dict[str, Any]] = []

    class Checked(CheckedTask):
        abstract = True
        check_in_caller = True

        def check_arguments(self, values: dict[str, Any]) -> None:
            checked.append(values)
            if not values["value"]:
                raise InvalidTaskInput("value must not be empty")

    @app.task(name="tests.checked_in_the_caller", base=Checked, bind=True, shared=False)
    def body(self: Any, value: str, *, twice: bool = False) -> str:
        raise AssertionError("the caller's check ran the body")

    try:
        body.check_call(("x",), {})
        with pytest.raises(InvalidTaskInput, match="must not be empty"):
            body.check_call(("",), {"twice": True})
        assert checked == [{"value": "x", "twice": False}, {"value": "", "twice": True}]
    finally:
        app.tasks.pop("tests.checked_in_the_caller", None)


PROSOPO = (("5EZVvsHMrKCFKp5NYNoTyDjTjetoVo1Z4UNNbTwJf1GfN6Xm", PAGE), {})


def test_a_kind_no_provider_of_the_callers_settings_offers_is_refused_at_the_call(
    caller: None, settings_env: Any
) -> None:
    """CapSolver never offered Prosopo, nor Friendly Captcha through a proxy: a caller
    whose settings name CapSolver alone is told at ``.delay()``, naming who offers it."""
    settings_env(CAPTCHA_TASKS_PROVIDER="capsolver")
    prosopo = app.tasks["captcha_tasks.solve_prosopo"]
    with pytest.raises(InvalidTaskInput) as refused:
        prosopo.check_call(*PROSOPO)
    assert refused.value.code == "TYPE_NOT_OFFERED"
    message = str(refused.value)
    assert "provider capsolver" in message and "nothing was sent" in message
    assert "offered by: 2captcha, 2captcha-v2, anticaptcha, capmonster" in message

    friendly = app.tasks["captcha_tasks.solve_friendly_captcha"]
    args, kwargs = VALID["captcha_tasks.solve_friendly_captcha"]
    friendly.check_call(args, dict(kwargs))  # proxyless: CapSolver offers it
    with pytest.raises(InvalidTaskInput) as proxied:
        friendly.check_call(args, {**kwargs, "proxy_id": "p1"})
    assert proxied.value.code == "TYPE_NOT_OFFERED"


def test_with_several_providers_the_call_passes_when_any_candidate_offers_the_kind(
    caller: None, settings_env: Any
) -> None:
    settings_env(
        CAPTCHA_TASKS_PROVIDERS="fast,cheap",
        CAPTCHA_TASKS_FAST_PROTOCOL="capsolver",
        CAPTCHA_TASKS_FAST_API_KEY="CAP-" + "0" * 32,
        CAPTCHA_TASKS_CHEAP_PROTOCOL="anticaptcha",
        CAPTCHA_TASKS_CHEAP_API_KEY="0" * 32,
    )
    prosopo = app.tasks["captcha_tasks.solve_prosopo"]
    prosopo.check_call(*PROSOPO)  # cheap offers it
    with pytest.raises(InvalidTaskInput) as pinned:
        prosopo.check_call(PROSOPO[0], {"provider": "fast"})
    assert pinned.value.code == "TYPE_NOT_OFFERED"


def test_a_caller_that_describes_no_provider_leaves_the_catalogue_to_the_worker(
    caller: None,
) -> None:
    """The bare default (CaptchaAI, no key) never offered Prosopo; the workers may use
    any provider, so the call passes and admission decides."""
    assert get_settings().providers()[0].protocol == "captchaai"
    app.tasks["captcha_tasks.solve_prosopo"].check_call(*PROSOPO)


@pytest.mark.parametrize(
    "name", sorted(n for n in VALID if getattr(app.tasks[n], "kind", None) is not None)
)
def test_a_kinds_task_checks_its_declared_fields_without_running_its_body(
    caller: None, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    def body(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the caller's check ran the task's body")

    monkeypatch.setattr(solve_tasks.SolveTask, "admit", body)
    task = app.tasks[name]
    args, kwargs = VALID[name]
    task.check_call(args, kwargs)  # valid: passes, no body
    with pytest.raises(InvalidTaskInput) as caught:
        task.check_call(("", *args[1:]), kwargs)  # its first field emptied
    assert task.kind.__name__ in str(caught.value) or "image_b64" in str(caught.value)


def test_a_kind_that_requires_a_proxy_is_refused_without_one_at_the_call(caller: None) -> None:
    name = "captcha_tasks.solve_datadome"
    args, kwargs = VALID[name]
    with pytest.raises(InvalidTaskInput) as caught:
        app.tasks[name].check_call(args, {k: v for k, v in kwargs.items() if k != "proxy_id"})
    assert caught.value.code == "PROXY_REQUIRED"
    assert "DataDome needs proxy_id" in str(caught.value)


def test_cloudflare_challenge_is_refused_without_a_proxy_at_the_call(caller: None) -> None:
    name = "captcha_tasks.solve_cloudflare_challenge"
    with pytest.raises(InvalidTaskInput) as caught:
        app.tasks[name].check_call((PAGE,), {"user_agent": "Mozilla/5.0"})
    assert caught.value.code == "PROXY_REQUIRED"
    assert "cf_clearance cookie is bound to the IP" in str(caught.value)
