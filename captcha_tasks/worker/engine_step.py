"""Runs the solve engine inside every ``celery worker`` (a worker bootstep).

The engine writes each finished solve to the result backend under its task id and
sends ``task-started`` (dated when it reached the provider) then ``task-succeeded`` /
``task-failed`` events, so ``AsyncResult.get()``, Flower and event consumers see solves
end as if the admitting execution had returned: received when admitted, started when
submitted (the gap is the wait for a thread), runtime the solve's. It logs each
outcome in one line, as Celery logs a task's.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any, ClassVar

from celery import Celery, bootsteps
from celery.app.task import Context

from ..engine import Engine, Job
from ..engine.balance import BalanceWatch
from ..errors import CaptchaTasksError, InvalidApiKey
from ..fleet.heartbeat import live_workers
from ..provider import make_provider
from ..settings import get_settings
from ..settings.providers import DEFAULT_PROVIDER
from ..state import Keys, state_redis
from ..state.clock import clock_of
from .celery_internals import completion, revoke
from .redacted import task_reprs

__all__ = ["CeleryCompleter", "SolveEngineStep", "running_engines"]

log = logging.getLogger(__name__)

#: The engines of the worker running in this process (one per provider), while it runs.
_running: list[Engine] = []


def running_engines() -> list[Engine]:
    """This worker's engines (none outside a worker, or before its start)."""
    return list(_running)


class CeleryCompleter:
    """Stores a job's outcome under its task id and tells event consumers."""

    def __init__(self, app: Celery, hostname: str) -> None:
        self.app = app
        self.hostname = hostname
        self._local = threading.local()
        # CPU seconds this process's threads spent storing outcomes (result backend,
        # callbacks, events), and how many: logged when the engine stops (benchmarks).
        self._cpu_lock = threading.Lock()
        self.cpu_seconds = 0.0
        self.stored = 0

    def _count(self, started: float) -> None:
        spent = time.thread_time() - started
        with self._cpu_lock:
            self.cpu_seconds += spent
            self.stored += 1

    @functools.cached_property
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

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """The events of the outcomes stored inside (this thread's) reach the broker in
        one round trip at the end, not one each: a batch poll's solves (kombu 5.7's
        publish batch; with an older kombu, one publish each). Each result is still
        stored at once, before its event; the events are sent at the end even if the
        block raises (their results are stored). Events stay best effort: a batch that
        fails is logged, never raised."""
        if not self._events_enabled or getattr(self._local, "batching", False):
            yield  # events off, or nested: the outer batch sends them
            return
        try:
            producer = self._dispatcher().producer
            if not hasattr(producer, "batch"):  # kombu before 5.7: one publish each
                batch = None
            else:
                batch = producer.batch()
                batch.__enter__()
        except Exception as exc:  # no broker now: each event tries on its own
            log.warning("could not batch events: %s", exc)
            self._local.dispatcher = None
            batch = None
        if batch is None:
            yield
            return
        self._local.batching = True
        try:
            yield
        finally:
            self._local.batching = False
            try:
                batch.__exit__(None, None, None)  # flushes what was buffered
            except Exception as exc:
                log.warning("could not send a batch of events: %s", exc)
                self._local.dispatcher = None

    def _request(self, job: Job) -> Context:
        fields = json.loads(job.request_json) if job.request_json else {}
        fields["id"] = job.task_id
        fields.setdefault("delivery_info", {})  # read by Celery's old-style errbacks
        return Context(fields)

    @staticmethod
    def _name(job: Job, request: Context) -> str:
        # The admitting request's name (jobs admitted by an older worker lack it).
        return str(request.shadow or request.task or f"captcha_tasks.solve_{job.type}")

    def _started(self, job: Job, at: float | None) -> None:
        """``task-started`` dated ``at``, when the job reached the provider: sent with its
        outcome's event (one round trip where batched), not at submit, so a solve costs
        no extra publish; Flower shows the start time and state as they were once the
        task has ended."""
        if at is not None:
            self._send("task-started", uuid=job.task_id, timestamp=at)

    def _reprs(self, then: Any, result: dict[str, Any]) -> dict[str, str]:
        """The ``argsrepr``/``kwargsrepr`` of the call of ``then`` with ``result``: the
        whole call (the signature's own arguments too), redacted. The call carries the
        solution: its task-sent event and Flower show it masked, as this task's own
        task-succeeded does (a task of the caller's app would show the real token
        otherwise). A later step of a page task runs under the page's id: its event must
        show that step's arguments, which Flower may take for the page's."""
        task = self.app.tasks.get(then.task)
        argsrepr, kwargsrepr = task_reprs(task, (result, *then.args), then.kwargs)
        return {"argsrepr": argsrepr, "kwargsrepr": kwargsrepr}

    def succeed(self, job: Job, result: dict[str, Any]) -> None:
        """What a worker does when a task returns (:mod:`.celery_internals.completion`),
        then the events and the log line."""
        started = time.thread_time()
        request = self._request(job)
        completion.succeed(self.app, job.task_id, request, result, self._reprs)
        shown = {k: v for k, v in result.items() if k != "solution"}
        solve_s, queued_s = result.get("solve_seconds"), result.get("queued_seconds")
        now = time.time()
        # The result's times are Redis's clock; the events', this host's: dated back
        # from now by the solve's own duration, the runtime shows as started-to-end.
        self._started(job, now - solve_s if isinstance(solve_s, int | float) else None)
        self._send("task-succeeded", uuid=job.task_id, result=repr(shown), runtime=solve_s)
        if log.isEnabledFor(logging.INFO) and isinstance(solve_s, int | float):
            queued = queued_s if isinstance(queued_s, int | float) else 0.0
            log.info(
                "Task %s[%s] succeeded in %.1f s (queued %.1f s, solved in %.1f s)",
                self._name(job, request),
                job.task_id,
                queued + solve_s,
                queued,
                solve_s,
            )
        self._count(started)

    def fail(self, job: Job, error: CaptchaTasksError) -> None:
        started = time.thread_time()
        request = self._request(job)
        completion.fail(self.app, job.task_id, request, error)
        now = time.time()  # this host's clock against the job's Redis times (skew warned)
        self._started(job, job.submitted_at)
        self._send("task-failed", uuid=job.task_id, exception=repr(error), traceback="")
        if log.isEnabledFor(logging.INFO):
            queued = (job.submitted_at or now) - job.enqueued_at if job.enqueued_at else 0.0
            log.info(
                "Task %s[%s] failed after %.1f s (queued %.1f s): %s: %s",
                self._name(job, request),
                job.task_id,
                max(now - job.enqueued_at, 0.0) if job.enqueued_at else 0.0,
                max(queued, 0.0),
                error.code or type(error).__name__,
                error.message,
            )
        self._count(started)

    def revoke(self, job: Job, reason: str) -> None:
        """What a worker does with a revoked task (the backend's ``mark_as_revoked``: its
        caller's ``get()`` raises ``TaskRevokedError``), then the event and the log line."""
        started = time.thread_time()
        request = self._request(job)
        self.app.backend.mark_as_revoked(job.task_id, reason, request=request)
        self._send("task-revoked", uuid=job.task_id, terminated=False, signum=None, expired=False)
        log.info("Task %s[%s] revoked: %s", self._name(job, request), job.task_id, reason)
        self._count(started)


class SolveEngineStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Starts the engine once the worker's pool is up; stops it on shutdown."""

    requires: ClassVar[set[str]] = {
        "celery.worker.components:Pool",
        "captcha_tasks.worker.startup_step:StartupCheckStep",
    }

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        self.engines: list[Engine] = []
        self.balances: list[BalanceWatch] = []
        self.completer: CeleryCompleter | None = None

    def start(self, worker: Any) -> None:
        settings = get_settings()
        if not settings.has_api_key():
            log.warning("CAPTCHA_TASKS_API_KEY is not set: this worker will not solve captchas")
            return
        completer = self.completer = CeleryCompleter(worker.app, worker.hostname)
        client = state_redis(settings)
        skew = clock_of(client).offset()
        if abs(skew) > 1.0:  # harmless (everything shared is timed by Redis), but telling
            log.warning(
                "this host's clock is %+.1f s off Redis's; claims, leases, deadlines "
                "and cookie stamps go by Redis's clock",
                skew,
            )
        several = len(settings.providers()) > 1
        # Refused at start (the startup step said so): the engine starts paused, as after a
        # refusal met later, and resumes once the provider takes the key. Meanwhile other
        # workers' engines take that provider's work; with none whose key it takes, the
        # paused engine hands the requests routed to it to the next provider of their
        # route (and opens its breaker: engine.refusal).
        refused: dict[str, InvalidApiKey] = getattr(worker, "refused_keys", {})
        # One engine per provider, each with its own client and thread budget; they
        # share the waiting queue, and acquire.lua routes each job to one of them.
        for config in settings.providers():
            named = f"/{config.name}" if config.name != DEFAULT_PROVIDER else ""
            engine = Engine(
                settings,
                client,
                make_provider(settings, config),
                completer,
                live_workers=functools.partial(live_workers, client, Keys(settings.key_prefix)),
                name=f"engine@{worker.hostname}{named}",
                provider_name=config.name,
            )
            refusal = refused.get(config.name)
            if refusal is not None:
                engine.refusal.pause(refusal, said=True)
            self.engines.append(engine.start())
            if refusal is not None:
                log.info("solve engine for provider %s paused: its key is refused", config.name)
                continue
            if config.balance_floor is not None:
                # The floor turns the watch on (no extra provider calls for those who
                # set none); its own client, called from its thread beside the engine's.
                watch = BalanceWatch(
                    client, settings, make_provider(settings, config), name=config.name
                )
                self.balances.append(watch.start())
            log.info(
                "solve engine started%s: %d threads budget (%s), %d concurrent provider "
                "calls, batch polls %s",
                f" for provider {config.name}" if several else "",
                config.threads,
                config.protocol,
                settings.engine_threads,
                settings.batch_poll,
            )

        if self.engines:
            revoke.install(self.revoke, self.held)
        _running[:] = self.engines

    def revoke(self, task_ids: list[str], terminate: bool) -> None:
        """Celery's ``revoke`` reached this worker: every engine of it ends those of the
        ids that are solves it can end (waiting, or at its provider); ``terminate`` changes
        nothing, as no pool process runs a solve."""
        for engine in self.engines:
            engine.revoke(task_ids)

    def held(self, task_ids: list[str]) -> set[str]:
        """Which of ``task_ids`` are solves admitted to the engines (their jobs exist)."""
        queue = self.engines[0].queue
        with queue.redis.pipeline(transaction=False) as pipe:
            for task_id in task_ids:
                pipe.exists(queue.keys.job(task_id))
            found = pipe.execute()
        return {task_id for task_id, n in zip(task_ids, found, strict=True) if n}

    def stop(self, worker: Any) -> None:
        for watch in self.balances:
            watch.stop()
        self.balances = []
        engines, self.engines = self.engines, []
        _running.clear()
        for engine in engines:
            engine.stop()
        if engines:
            log.info("solve engine stopped: its provider calls finished")
        if self.completer is not None and self.completer.stored:
            c = self.completer
            log.info(
                "solve engine result store: %.3f s CPU over %d outcomes", c.cpu_seconds, c.stored
            )
        self.completer = None

    def terminate(self, worker: Any) -> None:
        # A cold shutdown (SIGQUIT, or SIGTERM with REMAP_SIGTERM=SIGQUIT as deployed)
        # terminates steps instead of stopping them, and StartStopStep.terminate only
        # knows ``self.obj``: without this the engine thread would die mid-call, leaving
        # its claimed polls stranded until their claims expire.
        self.stop(worker)
