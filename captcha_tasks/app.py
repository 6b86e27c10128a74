"""The Celery application: ``celery -A captcha_tasks worker`` finds ``captcha_tasks.app``."""

from __future__ import annotations

from celery import Celery

app = Celery("captcha_tasks", include=["captcha_tasks.tasks"])
app.config_from_object("celeryconfig")


def _install_engine() -> None:
    from .engine_step import SolveEngineStep

    app.steps["worker"].add(SolveEngineStep)


_install_engine()
