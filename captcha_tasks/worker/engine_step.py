"""Runs the solve engine inside every ``celery worker`` (a worker bootstep).

The engine writes each finished solve to the result backend under its task id and
sends ``task-succeeded`` / ``task-failed`` events, so ``AsyncResult.get()``, Flower
and event consumers see solves end as if the admitting execution had returned.
"""

from __future__ import annotations

import functools
import json
import logging
import threading
from typing import Any, ClassVar

from celery import bootsteps, signature
from celery.app.base import Celery
from celery.app.task import Context
from celery.exceptions import WorkerShutdown
from kombu.utils.objects import cached_property

from ..engine import Engine, Job
from ..engine.balance import BalanceWatch
from ..errors import CaptchaTasksError, ConfigurationError
from ..fleet.heartbeat import live_workers
from ..provider import make_provider
from ..settings import Settings, get_settings
from ..state import Keys, state_redis

__all__ = ["CeleryCompleter", "SolveEngineStep", "check_one_provider"]

log = logging.getLogger(__name__)


class CeleryCompleter:
    """Stores a job's outcome under its task id and tells event consumers."""

    def __init__(self, app: Celery, hostname: str) -> None:
        self.app = app
        self.hostname = hostname
        self._local = threading.local()

    @cached_property
    def _events_enabled(self) -> bool:
        return bool(self.app.conf.worker_send_task_events)

    def _dispatcher(self) -> Any:
        dispatcher = getattr(self._local, "dispatcher", None)
        if dispatcher is None:
            connection = self.app.connection_for_write()
            dispatcher = self.app.events.Dispatcher(
                connection, hostname=self.hostname, enabled=self._events_enabled
            )
            self._local.dispatcher = dispatcher
        return dispatcher

    def _send(self, event: str, **fields: Any) -> None:
        if not self._events_enabled:
            return
        try:
            self._dispatcher().send(event, **fields)
        except Exception as exc:  # events are best effort; the result is what counts
            log.warning("could not send %s event: %s", event, exc)
            self._local.dispatcher = None

    def _request(self, job: Job) -> Context:
        fields = json.loads(job.request_json) if job.request_json else {}
        fields["id"] = job.task_id
        fields.setdefault("delivery_info", {})  # read by Celery's old-style errbacks
        return Context(fields)

    def succeed(self, job: Job, result: dict[str, Any]) -> None:
        """What a worker does when a task returns: callbacks, the chain's next task,
        then the result (with chord bookkeeping) and the event."""
        request = self._request(job)
        root_id = request.root_id or job.task_id
        for callback in request.callbacks or ():
            signature(callback, app=self.app).apply_async(
                (result,), parent_id=job.task_id, root_id=root_id
            )
        chain = list(request.chain or ())
        if chain:
            signature(chain.pop(), app=self.app).apply_async(
                (result,), chain=chain, parent_id=job.task_id, root_id=root_id
            )
        self.app.backend.mark_as_done(job.task_id, result, request=request)
        shown = {k: v for k, v in result.items() if k != "solution"}
        self._send("task-succeeded", uuid=job.task_id, result=repr(shown),
                   runtime=result.get("solve_seconds"))  # fmt: skip

    def fail(self, job: Job, error: CaptchaTasksError) -> None:
        # mark_as_failure also calls the request's errbacks and ends its chord part.
        self.app.backend.mark_as_failure(job.task_id, error, request=self._request(job))
        self._send("task-failed", uuid=job.task_id, exception=repr(error), traceback="")


def check_one_provider(settings: Settings) -> None:
    """This build's engine drives one provider: with more configured, a worker would
    silently use only the first, so it refuses to start (issue 15, the engine part)."""
    configured = len(settings.providers())
    if configured > 1:
        raise ConfigurationError(
            f"CAPTCHA_TASKS_PROVIDERS names {configured} providers; this build's solve "
            "engine runs one (issue 15 in progress)"
        )


class SolveEngineStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Starts the engine once the worker's pool is up; stops it on shutdown."""

    requires: ClassVar[set[str]] = {"celery.worker.components:Pool"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.engine: Engine | None = None
        self.balance: BalanceWatch | None = None

    def start(self, worker: Any) -> None:
        settings = get_settings()
        try:
            check_one_provider(settings)
        except ConfigurationError as exc:
            log.critical("%s", exc.message)  # one line; then a clean exit with status 1
            raise WorkerShutdown(1) from None
        if not settings.api_key:
            log.warning("CAPTCHA_TASKS_API_KEY is not set: this worker will not solve captchas")
            return
        completer = CeleryCompleter(worker.app, worker.hostname)
        client = state_redis(settings)
        self.engine = Engine(
            settings,
            client,
            make_provider(settings),
            completer,
            live_workers=functools.partial(live_workers, client, Keys(settings.key_prefix)),
            name=f"engine@{worker.hostname}",
        ).start()
        if settings.balance_floor is not None:
            # The floor turns the watch on (no extra provider calls for those who set
            # none); its own provider client, called from its thread beside the engine's.
            self.balance = BalanceWatch(client, settings, make_provider(settings),
                                        name=settings.providers()[0].name).start()  # fmt: skip
        log.info(
            "solve engine started: %d threads budget, %d concurrent provider calls, batch polls %s",
            settings.threads,
            settings.engine_threads,
            settings.batch_poll,
        )

    def stop(self, worker: Any) -> None:
        if self.balance is not None:
            self.balance.stop()
            self.balance = None
        if self.engine is not None:
            self.engine.stop()
            self.engine = None
            log.info("solve engine stopped: its provider calls finished")

    def terminate(self, worker: Any) -> None:
        # A cold shutdown (SIGQUIT, or SIGTERM with REMAP_SIGTERM=SIGQUIT as deployed)
        # terminates steps instead of stopping them, and StartStopStep.terminate only
        # knows ``self.obj``: without this the engine thread would die mid-call, leaving
        # its claimed polls stranded until their claims expire.
        self.stop(worker)
