"""The NATS bridge: solve jobs from a NATS subject in, results on another subject out.

Two loops share one connection:

- *intake* takes jobs (a queue-group subscription, or a JetStream pull consumer named
  after the queue group), maps each to its solve task (:mod:`.jobs`), records it in
  the pending hash (:mod:`.pending`) and enqueues it under a known Celery task id;
  with JetStream it acknowledges the message only then;
- *watch* reads the results of every pending job from the result backend, one ``MGET``
  per pass, and publishes ``{"task_id", "solution"}`` or ``{"task_id", "error"}``.

No coroutine waits on one task's result: a job costs a hash field while it is solved.
Blocking Redis and broker calls run in two one-thread executors (one per loop) under
a deadline. The connection is :mod:`.nats_io`'s; the task system is a
:class:`~.queue.TaskQueue` passed in (Celery's: ``captcha_tasks.worker.bridge_queue``).
docs/NATS.md has the semantics (what a crash can lose or repeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from ..engine.timing import DEADLINE
from ..errors import InvalidTaskInput, SolveTimeout
from ..redaction import scrub_text
from ..settings import Settings, mask_url
from ..state import state_redis
from ..state.clock import clock_of
from .jobs import TaskCall, failed, jetstream_task_id, parse_job, solved, task_call
from .nats_io import connect, intake_trouble, load_nats, pause, settle
from .pending import Entry, PendingResults
from .queue import Outcome, TaskQueue

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

__all__ = ["BridgeOptions", "NatsBridge", "default_result_timeout", "load_nats"]

log = logging.getLogger("captcha_tasks.bridge")

_T = TypeVar("_T")

#: Deadline of one Redis or broker round trip made from a loop (seconds).
IO_TIMEOUT = 30.0
#: Most results read in one MGET.
READ_CHUNK = 500


def default_result_timeout(settings: Settings) -> float:
    """How long a job may wait for its result: the longest wait for a thread of the
    plan, plus the longest solve deadline, plus a minute."""
    return settings.queue_timeout + settings.scaled(max(DEADLINE.values())) + 60.0


@dataclasses.dataclass(frozen=True)
class BridgeOptions:
    """What ``captcha-tasks bridge nats`` takes (see its ``--help``)."""

    url: str
    tasks_subject: str = "captcha.tasks"
    queue: str = "captcha-workers"
    results_subject: str = "captcha.results"
    #: Stream name: JetStream mode (durable, acknowledged); ``None``: core NATS.
    jetstream: str | None = None
    #: Jobs in flight across the queue group before this bridge stops taking more.
    max_pending: int = 1000
    #: JetStream messages fetched at once.
    batch: int = 64
    #: JetStream: seconds before an unacknowledged message is delivered again.
    ack_wait: float = 30.0
    #: Seconds between two reads of the pending results.
    poll_interval: float = 0.25
    #: Seconds a job may wait for its result (``None``: :func:`default_result_timeout`).
    result_timeout: float | None = None


@dataclasses.dataclass
class Counters:
    taken: int = 0
    enqueued: int = 0
    rejected: int = 0
    solved: int = 0
    failed: int = 0

    def __str__(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in dataclasses.asdict(self).items())


class NatsBridge:
    """One bridge process's worth of state; :meth:`run` until ``stop`` is set."""

    def __init__(self, options: BridgeOptions, settings: Settings, tasks: TaskQueue) -> None:
        self.options = options
        self.settings = settings
        self.tasks = tasks
        self.result_timeout = options.result_timeout or default_result_timeout(settings)
        self.counters = Counters()
        #: Jobs of the group in flight, as of the last watch pass (plus those taken since).
        self.pending_count = 0
        # Published markers must outlive any redelivery of their job.
        ttl = self.result_timeout + 3600
        self.store = PendingResults(state_redis(settings), settings.key_prefix, options.queue, ttl)
        # Redis's clock: a pending result's deadline is checked by any bridge of the group.
        self.clock = clock_of(state_redis(settings))
        self._intake_pool = ThreadPoolExecutor(1, thread_name_prefix="bridge-intake")
        self._watch_pool = ThreadPoolExecutor(1, thread_name_prefix="bridge-watch")
        self._nc: Client | None = None

    # -- running ------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        nats = load_nats()
        options = self.options
        servers = [url.strip() for url in options.url.split(",") if url.strip()]
        shown = ",".join(mask_url(url) for url in servers)
        nc = await connect(nats, servers, shown, stop)
        if nc is None:
            return
        self._nc = nc
        watcher = asyncio.create_task(self._watch(stop))
        try:
            if options.jetstream:
                await self._intake_jetstream(nc, stop)
            else:
                await self._intake_core(nc, stop)
        finally:
            stop.set()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(watcher, timeout=IO_TIMEOUT)
            with contextlib.suppress(Exception):  # the last results out before closing
                await nc.flush(timeout=5)
            if not nc.is_closed:
                with contextlib.suppress(Exception):
                    await nc.close()
            self._intake_pool.shutdown(wait=False, cancel_futures=True)
            self._watch_pool.shutdown(wait=False, cancel_futures=True)
            log.info("bridge: stopped (%s)", self.counters)

    def _listening(self, mode: str) -> None:
        o = self.options
        servers = ",".join(mask_url(url.strip()) for url in o.url.split(","))
        log.info(
            "bridge: listening on %s: %s in queue group %s -> results on %s (%s); "
            "result timeout %.0f s",
            servers,
            o.tasks_subject,
            o.queue,
            o.results_subject,
            mode,
            self.result_timeout,
        )

    async def _intake_core(self, nc: Client, stop: asyncio.Event) -> None:
        nats = load_nats()
        sub = await nc.subscribe(self.options.tasks_subject, queue=self.options.queue)
        await nc.flush(timeout=5)
        self._listening("core NATS: jobs in flight in this process are lost if it dies")
        while not stop.is_set():
            if self.pending_count >= self.options.max_pending:
                await pause(stop, self.options.poll_interval)
                continue
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                continue
            except Exception as exc:
                await intake_trouble(nc, stop, exc)
                continue
            await self._take_safely(msg, jetstream=False)
        with contextlib.suppress(Exception):
            await sub.unsubscribe()

    async def _intake_jetstream(self, nc: Client, stop: asyncio.Event) -> None:
        nats = load_nats()
        from nats.js.api import AckPolicy, ConsumerConfig

        o = self.options
        assert o.jetstream is not None
        js = nc.jetstream()
        try:
            await js.stream_info(o.jetstream)
        except nats.js.errors.NotFoundError:
            await js.add_stream(name=o.jetstream, subjects=[o.tasks_subject])
            log.info("bridge: created stream %s on %s", o.jetstream, o.tasks_subject)
        config = ConsumerConfig(
            durable_name=o.queue,
            ack_policy=AckPolicy.EXPLICIT,
            ack_wait=o.ack_wait,
            filter_subject=o.tasks_subject,
        )
        sub = await js.pull_subscribe(
            o.tasks_subject, durable=o.queue, stream=o.jetstream, config=config
        )
        self._listening(f"JetStream stream {o.jetstream}, durable consumer {o.queue}")
        while not stop.is_set():
            room = min(o.batch, o.max_pending - self.pending_count)
            if room <= 0:
                await pause(stop, o.poll_interval)
                continue
            try:
                msgs = await sub.fetch(room, timeout=1.0)
            except nats.errors.TimeoutError:
                continue
            except Exception as exc:  # e.g. while the client reconnects
                await intake_trouble(nc, stop, exc)
                continue
            for msg in msgs:
                await self._take_safely(msg, jetstream=True)
        # Messages fetched and not acknowledged come again after --ack-wait.
        with contextlib.suppress(Exception):
            await sub.unsubscribe()

    # -- one job ------------------------------------------------------------------

    async def _take_safely(self, msg: Msg, *, jetstream: bool) -> None:
        try:
            await self._take(msg, jetstream=jetstream)
        except Exception as exc:  # a bug must not stop the bridge: the job comes again
            log.warning(
                "bridge: job left unhandled: %s: %s", type(exc).__name__, scrub_text(str(exc))
            )
            if jetstream:
                await settle(msg.nak(delay=min(5.0, self.options.ack_wait)))

    async def _take(self, msg: Msg, *, jetstream: bool) -> None:
        """Enqueue one job (or publish why not); never raises for a bad job."""
        self.counters.taken += 1
        redelivered = False
        if jetstream:
            meta = msg.metadata
            celery_id = jetstream_task_id(
                meta.stream, meta.sequence.stream, meta.timestamp.isoformat()
            )
            redelivered = meta.num_delivered > 1
        else:
            celery_id = str(uuid.uuid4())
        try:
            job = parse_job(msg.data)
        except InvalidTaskInput as exc:
            await self._reject(msg, None, exc, jetstream=jetstream)
            return
        try:
            call = task_call(job)
        except InvalidTaskInput as exc:
            await self._reject(msg, job.task_id, exc, jetstream=jetstream)
            return
        entry = Entry(job.task_id, self.options.results_subject, self.clock() + self.result_timeout)
        try:
            fresh = await self._io(
                self._intake_pool, self.enqueue, celery_id, call, entry, redelivered
            )
        except Exception as exc:
            await self._enqueue_failed(msg, jetstream, celery_id, entry, exc)
            return
        if fresh:
            self.counters.enqueued += 1
            self.pending_count += 1
        if jetstream:
            # Only now: the job is in the pending hash and its task on the broker.
            await settle(msg.ack())

    async def _reject(
        self, msg: Msg, task_id: str | int | None, exc: InvalidTaskInput, *, jetstream: bool
    ) -> None:
        self.counters.rejected += 1
        log.info("bridge: rejected job %r: %s", task_id, scrub_text(str(exc)))
        await self._publish(self.options.results_subject, failed(task_id, exc))
        if jetstream:  # a bad message does not get better: never deliver it again
            await settle(msg.ack())

    def enqueue(self, celery_id: str, call: TaskCall, entry: Entry, redelivered: bool) -> bool:
        """Record the job, then send its task (blocking: the intake thread runs it). False
        when there was nothing to do: its result went out already, or (a redelivered job)
        a worker has its task already."""
        if not self.store.track(celery_id, entry):
            return False
        if redelivered and self.tasks.started(celery_id):
            return False
        self.tasks.send(celery_id, call)
        return True

    async def _enqueue_failed(
        self, msg: Msg, jetstream: bool, celery_id: str, entry: Entry, exc: Exception
    ) -> None:
        reason = scrub_text(str(exc)) or type(exc).__name__
        if jetstream:
            # Left for a later delivery (the same Celery task id): nothing is lost.
            log.warning("bridge: could not enqueue job %r, will retry: %s", entry.task_id, reason)
            await settle(msg.nak(delay=min(5.0, self.options.ack_wait)))
            return
        log.warning("bridge: could not enqueue job %r, failing it: %s", entry.task_id, reason)
        try:  # it may be in the pending hash: take it off, so it is failed once
            mine = celery_id in await self._io(self._intake_pool, self.store.claim, [celery_id])
        except Exception:
            mine = True
        if mine:
            self.counters.failed += 1
            error = f"ENQUEUE_FAILED: the job could not be queued: {reason}"
            await self._publish(entry.subject, failed(entry.task_id, error, celery_id))

    # -- results ------------------------------------------------------------------

    async def _watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                due = await self._io(self._watch_pool, self._collect)
            except Exception as exc:
                log.warning("bridge: reading results failed: %s", scrub_text(str(exc)))
                due = []
            for celery_id, entry, message in due:
                if not await self._publish(entry.subject, message):
                    with contextlib.suppress(Exception):
                        await self._io(self._watch_pool, self.store.release, celery_id, entry)
                    continue
                if "solution" in message:
                    self.counters.solved += 1
                else:
                    self.counters.failed += 1
            await pause(stop, self.options.poll_interval)

    def _collect(self) -> list[tuple[str, Entry, dict[str, Any]]]:
        """One pass (in the watch thread): the pending jobs that ended or ran out of time,
        claimed by this bridge, with their result messages."""
        entries = self.store.entries()
        self.pending_count = len(entries)
        if not entries:
            return []
        ids = list(entries)
        outcomes: dict[str, Outcome] = {}
        for start in range(0, len(ids), READ_CHUNK):
            outcomes.update(self.tasks.ended(ids[start : start + READ_CHUNK]))
        now = self.clock()
        expired = [tid for tid in ids if tid not in outcomes and entries[tid].deadline <= now]
        taken = self.store.claim([*outcomes, *expired])
        self.pending_count -= len(taken)
        return [
            (tid, entries[tid], self._message(tid, entries[tid], outcomes.get(tid)))
            for tid in taken
        ]

    def _message(self, celery_id: str, entry: Entry, outcome: Outcome | None) -> dict[str, Any]:
        if outcome is None:
            timeout = SolveTimeout(f"no result within {self.result_timeout:.0f} s of the job")
            return failed(entry.task_id, timeout, celery_id)
        if outcome.result is not None:
            return solved(entry.task_id, outcome.result, celery_id)
        return failed(entry.task_id, outcome.error or "TASK_FAILED", celery_id)

    async def _publish(self, subject: str, message: dict[str, Any]) -> bool:
        assert self._nc is not None
        try:
            await self._nc.publish(subject, json.dumps(message, default=str).encode())
        except Exception as exc:
            log.warning(
                "bridge: could not publish a result on %s: %s",
                subject,
                scrub_text(str(exc)) or type(exc).__name__,
            )
            return False
        return True

    async def _io(self, pool: ThreadPoolExecutor, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in ``pool``, waited for at most :data:`IO_TIMEOUT` seconds."""
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.run_in_executor(pool, fn, *args), IO_TIMEOUT)
