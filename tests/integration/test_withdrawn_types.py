"""Types a provider withdrew (provider/offers.py ``WITHDRAWN``): refused at the call and
at admission with ``TYPE_NOT_OFFERED`` citing the source, nothing sent; and a stale
catalogue that sends one anyway meets the provider's own answer (the sandbox's) as a
permanent, typed error after one request."""

from __future__ import annotations

from typing import Any

import pytest

from captcha_tasks import solve_funcaptcha, solve_hcaptcha
from captcha_tasks.errors import BadRequest, InvalidTaskInput, PermanentSolverError
from captcha_tasks.provider import offers
from captcha_tasks.provider.captchas import HCaptcha
from captcha_tasks.provider.factory import make_provider
from captcha_tasks.settings import Settings, get_settings
from captcha_tasks_sandbox import dev_api_key
from tests.support.workers import provider_sandbox, worker_env

PAGE = "https://example.com/login"
HCAPTCHA_KEY = "5ab0c1d2-e3f4-4a5b-8c6d-7e8f9a0b1c2d"
ARKOSE_KEY = "69A21A01-CC7B-B9C6-0F9A-E7FA06677FFC"
CALLS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "hcaptcha": (solve_hcaptcha, (HCAPTCHA_KEY, PAGE)),
    "funcaptcha": (solve_funcaptcha, (ARKOSE_KEY, PAGE)),
}


def _env(sandbox: Any, provider: str) -> dict[str, str]:
    return {
        "CAPTCHA_TASKS_PROVIDER": provider,
        "CAPTCHA_TASKS_SOLVER_URL": sandbox.url,
        "CAPTCHA_TASKS_API_KEY": dev_api_key(provider),
    }


def test_every_withdrawn_cell_cites_a_source_and_is_out_of_the_matrix() -> None:
    assert set(offers.WITHDRAWN["anticaptcha"]) == {"hcaptcha"}
    for provider in ("2captcha", "2captcha-v2", "capmonster", "capsolver"):
        assert "hcaptcha" in offers.WITHDRAWN[provider]  # type: ignore[index]
    cells = offers.catalogue()
    for provider, kinds in offers.WITHDRAWN.items():
        for kind, source in kinds.items():
            assert cells[provider][kind] == offers.Cell("withdrawn", source)
            assert "#" in source or "docs." in source  # a thread or a provider's page
    assert cells["captchaai"]["hcaptcha"].state == "offered"


@pytest.mark.parametrize("provider", sorted(offers.WITHDRAWN))
def test_a_withdrawn_type_is_refused_at_the_call_and_at_admission_nothing_sent(
    celery_app: Any,
    sandbox_factory: Any,
    worker_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    provider: str,
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    env = _env(sandbox, provider)
    worker_factory(worker_env(sandbox.url, **env))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    try:
        for kind, source in sorted(offers.WITHDRAWN[provider].items()):  # type: ignore[index]
            task, args = CALLS[kind]
            with pytest.raises(InvalidTaskInput) as at_call:
                task.delay(*args)  # the caller's settings name this provider only
            with pytest.raises(InvalidTaskInput) as at_admission:
                celery_app.send_task(task.name, args=args).get(timeout=30)
            for info in (at_call, at_admission):
                assert info.value.code == "TYPE_NOT_OFFERED"
                message = str(info.value)
                assert f"provider {provider} withdrew" in message and source in message
                assert "nothing was sent" in message
            if kind == "hcaptcha":
                assert "offered by: captchaai" in str(at_admission.value)
    finally:
        get_settings.cache_clear()
    stats = sandbox.stats()
    assert (stats["submitted"], stats["param_errors"]) == (0, 0)
    assert celery_app.backend.client.keys("ct:job:*") == []


@pytest.mark.parametrize(
    ("provider", "code"),
    [
        ("anticaptcha", "ERROR_TASK_TYPE_DEPRECATED"),
        ("capmonster", "ERROR_TASK_NOT_SUPPORTED"),
        ("2captcha-v2", "ERROR_TASK_NOT_SUPPORTED"),
        ("2captcha", "ERROR_METHOD_CALL"),
    ],
)
def test_a_stale_catalogue_meets_the_providers_answer_as_a_permanent_error(
    sandbox_factory: Any, monkeypatch: pytest.MonkeyPatch, provider: str, code: str
) -> None:
    sandbox = provider_sandbox(sandbox_factory, provider)
    settings = Settings.from_env(_env(sandbox, provider))
    # A catalogue from before the withdrawal: the engine's own client submits it.
    monkeypatch.setattr(offers, "WITHDRAWN", {})
    client = make_provider(settings)
    with pytest.raises(BadRequest) as info:
        client.submit(HCaptcha(HCAPTCHA_KEY, PAGE))
    assert isinstance(info.value, PermanentSolverError) and info.value.code == code
    stats = sandbox.stats()
    # One request, refused: nothing solved, nothing billed, nothing sent again.
    assert (stats["submitted"], stats["param_errors"]) == (0, 1)
