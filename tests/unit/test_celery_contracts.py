"""Contract tests of the seam (``captcha_tasks/worker/celery_internals/``): every
assumption it makes about Celery's, kombu's and redis-py's internals holds on the
versions installed here, and each fails with a message that names what broke.

These are small and fast on purpose: ``make compat`` runs them on every supported
line. The behaviour tests (``test_transport``, ``test_admit_inline``,
``test_result_states``, ``test_result_get``...) show what each touch point buys; the
fallbacks are shown with a real worker in ``tests/integration/test_celery_fallbacks.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks.worker.celery_internals import contracts, versions
from captcha_tasks.worker.celery_internals.contracts import ASSUMPTIONS, Broken

LOGGER = "captcha_tasks.worker.celery_internals"


@pytest.fixture(autouse=True)
def fresh_answers() -> Iterator[None]:
    contracts.forget()
    yield
    contracts.forget()


@pytest.mark.parametrize("name", sorted(ASSUMPTIONS))
def test_the_assumption_holds_on_the_installed_versions(name: str) -> None:
    try:
        contracts.check(name)
    except Broken as exc:  # the message names what broke, and where
        pytest.fail(f"{name}: {exc} (on {contracts._versions()})", pytrace=False)


@pytest.mark.parametrize("name", sorted(ASSUMPTIONS))
def test_each_assumption_says_what_it_relies_on_its_fallback_and_its_upstream(
    name: str,
) -> None:
    assumption = ASSUMPTIONS[name]
    assert assumption.relies_on and assumption.fallback and assumption.upstream


@pytest.mark.parametrize(
    ("name", "module", "owner", "attr", "message"),
    [
        (
            "kombu-redis-publish",
            "kombu.transport.redis",
            "Channel",
            "_put",
            "kombu's Redis channel no longer has `_put`",
        ),
        (
            "kombu-redis-publish",
            "kombu.transport.redis",
            "Channel",
            "_q_for_pri",
            "kombu's Redis channel no longer has `_q_for_pri`",
        ),
        (
            "celery-strategy",
            "celery.worker.state",
            None,
            "task_ready",
            "celery.worker.state no longer has `task_ready`",
        ),
        (
            "celery-redis-backend",
            "celery.backends.redis",
            "RedisBackend",
            "_set_with_state",
            "Celery's Redis backend no longer has `_set_with_state`",
        ),
        (
            "celery-result-cache",
            "celery.result",
            "AsyncResult",
            "_maybe_set_cache",
            "Celery's AsyncResult no longer has `_maybe_set_cache`",
        ),
        (
            "celery-log-success",
            "celery.app.trace",
            None,
            "LOG_SUCCESS",
            "celery.app.trace no longer has `LOG_SUCCESS`",
        ),
    ],
)
def test_a_broken_assumption_fails_naming_what_is_missing(
    monkeypatch: pytest.MonkeyPatch,
    name: str,
    module: str,
    owner: str | None,
    attr: str,
    message: str,
) -> None:
    import importlib

    target: Any = importlib.import_module(module)
    if owner is not None:
        target = getattr(target, owner)
    # Removed from every class that defines it (a base's would answer for it).
    for holder in getattr(target, "__mro__", (target,)):
        if attr in vars(holder):
            monkeypatch.delattr(holder, attr)
    with pytest.raises(Broken) as broken:
        contracts.check(name)
    assert message in str(broken.value)


def test_a_broken_assumption_is_logged_once_with_its_fallback(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import celery.worker.state

    monkeypatch.delattr(celery.worker.state, "task_ready")
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        answers = [contracts.holds("celery-strategy") for _ in range(3)]
    assert answers == [False, False, False]
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1
    assert "celery.worker.state no longer has `task_ready`" in lines[0]
    assert "solves are admitted in the pool" in lines[0]
    assert "celery " in lines[0] and "kombu " in lines[0]  # the versions it ran on
    assert "celery/celery#8337" in lines[0]


def test_what_the_seam_picks_when_its_assumptions_do_not_hold(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from captcha_tasks.worker.celery_internals.broker import transport_for
    from captcha_tasks.worker.celery_internals.result_backend import backends

    assert transport_for("redis://h/0").endswith(":Transport")
    assert backends()["redis"].endswith(":ResultBackend")
    for name in ("kombu-redis-publish", "celery-redis-backend"):
        monkeypatch.setitem(contracts._answers, name, False)
    assert transport_for("redis://h/0") == "redis"
    assert transport_for("rediss://h/0") == "rediss"
    assert transport_for("sentinel://h:26379") == "sentinel"
    assert backends() == {}


def test_without_the_success_format_the_return_value_is_blanked_by_a_filter(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from celery.app import trace

    from captcha_tasks.worker.celery_internals.tracer import (
        TRACE_LOGGER,
        HiddenReturnValue,
        install_tracer_hooks,
    )

    logger = logging.getLogger(TRACE_LOGGER)
    monkeypatch.setattr(logger, "filters", list(logger.filters))
    original = trace.LOG_SUCCESS
    monkeypatch.setattr(trace, "LOG_SUCCESS", original)
    monkeypatch.setattr(trace, "ExceptionInfo", trace.ExceptionInfo)
    monkeypatch.setitem(contracts._answers, "celery-log-success", False)
    install_tracer_hooks(lambda name: False)
    assert original == trace.LOG_SUCCESS  # left alone
    assert any(isinstance(f, HiddenReturnValue) for f in logger.filters)
    with caplog.at_level(logging.INFO, logger=TRACE_LOGGER):
        logger.info(
            original,
            {"id": "1", "name": "t", "return_value": "03AFcWeA-token", "runtime": 0.1},
        )
    assert "03AFcWeA-token" not in caplog.text
    assert "(not logged)" in caplog.text


def test_a_version_outside_the_tested_range_is_logged_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ranges = versions.tested_ranges()
    assert set(ranges) == {"celery", "kombu", "redis"}  # read from the installed metadata
    assert versions.tested_pythons() == ["3.10", "3.11", "3.12", "3.13"]
    assert versions.outside_tested() == []  # this environment is a tested one
    here = versions.installed()
    monkeypatch.setattr(versions, "installed", lambda: dict(here, python="3.14.0"))
    assert versions.outside_tested() == ["Python 3.14.0 (tested: 3.10, 3.11, 3.12, 3.13)"]
    monkeypatch.setattr(versions, "installed", lambda: dict(here, celery="6.0.0"))
    monkeypatch.setattr(versions, "_warned", False)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        first = versions.warn_if_untested()
        second = versions.warn_if_untested()
    assert first == [f"celery 6.0.0 (tested: {ranges['celery']})"]
    assert second == []
    lines = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert len(lines) == 1 and "celery 6.0.0" in lines[0]
