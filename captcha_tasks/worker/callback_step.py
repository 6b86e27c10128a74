"""The callback receiver inside every ``celery worker`` (a worker bootstep).

Why a bootstep rather than a process of its own: a callback ends its job through the
engine's own :class:`~captcha_tasks.engine.finish.Finisher` (result backend, chain
and callbacks, events, spend, metrics, first-poll learning), which lives here; and
every worker being a receiver (state is in Redis: any engine ends any job), the
receiver scales and fails with the workers and needs no deployment of its own, only
the port exposed behind the deployment's HTTPS ingress (docs/CALLBACKS.md).
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from celery import bootsteps

from ..engine.callback_http import CallbackServer
from ..engine.callbacks import Receiver
from ..settings import get_settings
from ..state import state_redis

__all__ = ["CallbackStep"]

log = logging.getLogger(__name__)


class CallbackStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Serves callbacks (``CAPTCHA_TASKS_CALLBACK_PORT``) once the engines run."""

    requires: ClassVar[set[str]] = {"captcha_tasks.worker.engine_step:SolveEngineStep"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.server: CallbackServer | None = None

    def start(self, worker: Any) -> None:
        from .engine_step import SolveEngineStep

        settings = get_settings()
        if settings.callback_port is None:
            return
        step = next((s for s in worker.steps if isinstance(s, SolveEngineStep)), None)
        lanes = {engine.provider_name: engine.poller for engine in (step.engines if step else [])}
        if not lanes:
            log.warning("callbacks: no solve engine in this worker; not receiving callbacks")
            return
        receiver = Receiver(settings, state_redis(settings), lanes)
        try:
            self.server = CallbackServer(
                receiver, settings.callback_address, settings.callback_port
            ).start()
        except OSError as exc:
            # The polls still collect every answer, later: run on, but say it loudly.
            log.error(
                "callbacks: cannot listen on %s:%d (%s); polls only",
                settings.callback_address,
                settings.callback_port,
                exc,
            )
            return
        log.info("callbacks: receiving on %s:%d", settings.callback_address, self.server.port)

    def stop(self, worker: Any) -> None:
        server, self.server = self.server, None
        if server is not None:
            server.stop()

    def terminate(self, worker: Any) -> None:
        self.stop(worker)
