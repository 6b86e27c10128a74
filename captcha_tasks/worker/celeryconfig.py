"""The Celery configuration of captcha_tasks' app (``captcha_tasks.app``).

It lives inside the package, never under a global module name: Celery's tutorial has
every application write a top-level ``celeryconfig.py``, and a module of that name is
shared by every Celery app in the process. Imported lazily, the first time the app's
configuration is read.

Every value comes from :class:`captcha_tasks.settings.Settings` (the environment); the
reliability choices below are fixed on purpose. The documentation's Celery configuration
page (docs/reference/celery-config.md) says why each is set. An operator who needs to change
one writes a module that starts with ``from captcha_tasks.celeryconfig import *`` (the
repository's top-level ``celeryconfig.py`` is that file) and runs ``celery -A captcha_tasks
--config NAME worker``.
"""

from __future__ import annotations

import click

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings import Settings, get_settings
from captcha_tasks.worker.celery_internals.broker import (
    failover_strategy_for,
    sentinel_transport_options,
    transport_for,
)
from captcha_tasks.worker.celery_internals.result_backend import backends as _result_backends


def _read_settings() -> Settings:
    from captcha_tasks.provider.offers import check_configured

    try:
        settings = get_settings()
        check_configured(settings.providers())
        return settings
    except ConfigurationError as exc:
        from celery.bin.celery import celery as celery_command

        context = click.get_current_context(silent=True)
        if context is not None and context.find_root().command is celery_command:
            # `celery -A captcha_tasks worker` (or any celery command): one line that
            # names the variable, not a traceback through Celery's option parsing.
            raise click.ClickException(f"captcha_tasks: {exc.message}") from None
        raise  # a program of the caller's: the typed error, for it to handle


_settings = _read_settings()

#: Marks a module as a configuration of captcha_tasks' app: ``celery --config NAME``
#: (``CELERY_CONFIG_MODULE``) is honoured only for a module that has it, which a
#: ``from captcha_tasks.celeryconfig import *`` gives. Any other application's
#: ``celeryconfig`` is ignored, so it can never take over this app.
CAPTCHA_TASKS_CONFIG = True

#: Redis redelivers unacked messages older than the visibility timeout
#: (CAPTCHA_TASKS_VISIBILITY_TIMEOUT, default 3600 s), including a SIGKILLed worker's
#: reserved ones, so it must stay well above any countdown plus a task's run time.
VISIBILITY_TIMEOUT_SECONDS = _settings.visibility_timeout
#: Longest countdown any task of ours schedules (retry back-offs), in seconds: 300, or a
#: quarter of a shorter visibility timeout.
MAX_COUNTDOWN_SECONDS = min(300, VISIBILITY_TIMEOUT_SECONDS // 4)

broker_url = _settings.broker_url
# kombu's Redis transport, with task messages recorded as unacknowledged from the
# moment they are published (worker/celery_internals/broker.py): a worker SIGKILLed
# between taking a message off its queue and recording it cannot lose it. Its sentinel
# variant for sentinel:// URLs, which stays on the list's first URL. kombu's own
# transport where the assumptions that relies on do not hold (logged once).
broker_transport = transport_for(broker_url)
broker_failover_strategy = failover_strategy_for(broker_url)
result_backend = _settings.result_backend
# A final state stays final (worker/celery_internals/result_backend.py): a redelivered
# message's STARTED never replaces the result the solve engine stored.
override_backends = _result_backends()
broker_connection_retry_on_startup = True
# rediss:// URLs: certificates are verified (against CAPTCHA_TASKS_REDIS_CA_CERTS if set).
broker_use_ssl = _settings.redis_ssl_options(broker_url)
redis_backend_use_ssl = _settings.redis_ssl_options(result_backend)
#: Seconds between two sweeps that put unacknowledged messages older than the visibility
#: timeout back on their queues. kombu sweeps every 10 s but scans Redis only every 10th
#: time (about 100 s); a message of a dead worker would wait up to the visibility timeout
#: plus 100 s. Here every sweep scans (one ZRANGE under a mutex), a tenth of the
#: visibility timeout apart, between 1 and 10 s.
RESTORE_INTERVAL_SECONDS = max(1, min(10, VISIBILITY_TIMEOUT_SECONDS // 10))
broker_transport_options = {
    "visibility_timeout": VISIBILITY_TIMEOUT_SECONDS,
    "unacked_restore_interval": RESTORE_INTERVAL_SECONDS,
    "unacked_restore_throttle": 1,
    **sentinel_transport_options(_settings, broker_url),
}
#: How long the result backend keeps reconnecting to a Redis that does not answer. A
#: caller's ``.delay()`` gives up after about 3 s with ``RedisUnavailable``, where
#: Celery's default makes it wait 20 s; a worker (``captcha_tasks.app`` switches it when
#: a worker starts) rides out a Redis restart of up to ~20 s while it stores results.
CLIENT_BACKEND_RETRY = {
    "max_retries": 4,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
WORKER_BACKEND_RETRY = {
    "max_retries": 20,
    "interval_start": 0,
    "interval_step": 1,
    "interval_max": 1,
}
result_backend_transport_options = {
    "visibility_timeout": VISIBILITY_TIMEOUT_SECONDS,
    "retry_policy": CLIENT_BACKEND_RETRY,
    **sentinel_transport_options(_settings, result_backend),
}

# JSON only: no pickle on the wire or in the backend.
task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
result_accept_content = ["json"]

# At-least-once: a task is acknowledged when it ends, and requeued if its
# process dies. Our tasks are idempotent (solves resume a stored captcha id).
task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
# Celery's formats with the trace id of a solve's lines (`` trace=<32 hex>``, nothing
# outside a span: captcha_tasks.tracing.install_log_trace_ids).
worker_log_format = "[%(asctime)s: %(levelname)s/%(processName)s]%(trace)s %(message)s"
worker_task_log_format = (
    "[%(asctime)s: %(levelname)s/%(processName)s]%(trace)s %(task_name)s[%(task_id)s]: %(message)s"
)
worker_cancel_long_running_tasks_on_connection_loss = True

result_expires = _settings.result_expires
result_extended = False  # would store real task arguments in the backend
task_track_started = True
task_send_sent_event = True
worker_send_task_events = True

timezone = "UTC"
enable_utc = True
broker_channel_error_retry = True

# Graceful shutdown (Celery 5.5+ soft shutdown). Deploy with REMAP_SIGTERM=SIGQUIT so
# SIGTERM gives running tasks this long to finish, then cancels them (late acks:
# requeued) and puts reserved and countdown messages back on the queue at once
# instead of after the visibility timeout. "On idle" makes the requeue happen when
# nothing runs too; the price is that every stop takes this long.
worker_soft_shutdown_timeout = 10.0
worker_enable_soft_shutdown_on_idle = True
# Every worker also consumes its own queue (<node name>.dq2): rollout health checks
# run there, on one worker alone, while it consumes nothing else.
worker_direct = True
