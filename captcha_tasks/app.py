"""The Celery application: ``celery -A captcha_tasks worker`` finds ``captcha_tasks.app``."""

from __future__ import annotations

from celery import Celery

app = Celery("captcha_tasks", include=["captcha_tasks.tasks", "captcha_tasks.page_tasks"])
app.config_from_object("celeryconfig")


def _install_steps() -> None:
    from .engine_step import SolveEngineStep
    from .session.proxy_step import ProxyLeaseStep

    app.steps["worker"].add(SolveEngineStep)
    app.steps["worker"].add(ProxyLeaseStep)


_install_steps()
