"""The Celery application: ``celery -A captcha_tasks worker`` finds ``captcha_tasks.app``."""

from __future__ import annotations

from celery import Celery

app = Celery("captcha_tasks", include=["captcha_tasks.tasks", "captcha_tasks.page_tasks"])
app.config_from_object("celeryconfig")


def _install_steps() -> None:
    from .engine_step import SolveEngineStep
    from .fleet import control  # noqa: F401 - registers the fleet_version inspect command
    from .fleet.heartbeat import HeartbeatStep
    from .metrics_step import MetricsStep
    from .session.proxy_step import ProxyLeaseStep

    app.steps["worker"].add(SolveEngineStep)
    app.steps["worker"].add(ProxyLeaseStep)
    app.steps["worker"].add(MetricsStep)
    app.steps["consumer"].add(HeartbeatStep)


_install_steps()


def _quiet_success_log() -> None:
    # Celery logs every task's return value at INFO; a solve's is a single-use token
    # (and a page's may carry form data). Log that the task succeeded, not what it
    # returned: results are for the backend, not for log files.
    from celery.app import trace

    trace.LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"


_quiet_success_log()
