"""The reliability settings the product relies on, as the worker will see them."""

from __future__ import annotations

from captcha_tasks import app


def test_reliability_settings() -> None:
    conf = app.conf
    assert conf.task_serializer == conf.result_serializer == "json"
    assert list(conf.accept_content) == ["json"]
    assert conf.task_acks_late is True
    assert conf.task_reject_on_worker_lost is True
    assert conf.worker_prefetch_multiplier == 1
    assert conf.broker_connection_retry_on_startup is True
    assert conf.result_expires == 86_400
    assert conf.result_extended is False  # would store real arguments


def test_visibility_timeout_exceeds_the_longest_countdown() -> None:
    from captcha_tasks import celeryconfig

    vt = app.conf.broker_transport_options["visibility_timeout"]
    assert vt == app.conf.result_backend_transport_options["visibility_timeout"]
    assert vt >= 4 * celeryconfig.MAX_COUNTDOWN_SECONDS


def test_tasks_carry_explicit_names() -> None:
    app.loader.import_default_modules()  # every task module, as a worker registers them
    ours = sorted(name for name in app.tasks if name.startswith("captcha_tasks."))
    assert {"captcha_tasks.ping", "captcha_tasks.get_balance"} <= set(ours)
    for name in ours:
        assert app.tasks[name].name == name
