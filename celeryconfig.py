"""Celery configuration for captcha_tasks, loaded with ``app.config_from_object("celeryconfig")``.

Every value comes from :class:`captcha_tasks.settings.Settings` (the environment);
the reliability choices below are fixed on purpose. See ../shared/CELERY_NOTES.md
and the README's "Reliability" section for why each is set.
"""

from __future__ import annotations

from captcha_tasks.settings import get_settings

_settings = get_settings()

#: Redis redelivers unacked messages older than the visibility timeout
#: (CAPTCHA_TASKS_VISIBILITY_TIMEOUT, default 3600 s), including a SIGKILLed worker's
#: reserved ones, so it must stay well above any countdown plus a task's run time.
VISIBILITY_TIMEOUT_SECONDS = _settings.visibility_timeout
#: Longest countdown any task of ours schedules (retry back-offs), in seconds: 300, or a
#: quarter of a shorter visibility timeout.
MAX_COUNTDOWN_SECONDS = min(300, VISIBILITY_TIMEOUT_SECONDS // 4)

broker_url = _settings.broker_url
result_backend = _settings.result_backend
broker_connection_retry_on_startup = True
# rediss:// URLs: certificates are verified (against CAPTCHA_TASKS_REDIS_CA_CERTS if set).
broker_use_ssl = _settings.redis_ssl_options(broker_url)
redis_backend_use_ssl = _settings.redis_ssl_options(result_backend)
broker_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT_SECONDS}
result_backend_transport_options = {"visibility_timeout": VISIBILITY_TIMEOUT_SECONDS}

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
