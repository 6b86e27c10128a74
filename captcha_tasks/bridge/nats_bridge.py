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
a deadline. docs/NATS.md has the semantics (what a crash can lose or repeat).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..engine.timing import DEADLINE
from ..errors import ConfigurationError, InvalidTaskInput, SolveTimeout
from ..redaction import scrub_text
from ..settings import Settings, mask_url
from .jobs import TaskCall, failed, jetstream_task_id, parse_job, solved, task_call
from .pending import Entry, PendingResults, has_state, ready_results

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

__all__ = ["BridgeOptions", "NatsBridge", "default_result_timeout", "load_nats"]

log = logging.getLogger("captcha_tasks.bridge")

_T = TypeVar("_T")

#: Deadline of one Redis or broker round trip made from a loop (seconds).
IO_TIMEOUT = 30.0
#: Seconds the first connection to NATS may take before the bridge gives up.
CONNECT_TIMEOUT = 15.0
#: Most results read in one MGET.
READ_CHUNK = 500
#: How the broker publish of a solve task is retried before the job counts as failed.
ENQUEUE_RETRY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.5, "interval_max": 2}


def load_nats() -> ModuleType:
    """The ``nats`` package (nats-py), imported only when a bridge runs."""
    try:
        import nats
    except ImportError:
        raise ConfigurationError(
            "the NATS bridge needs the NATS client: pip install 'captcha_tasks[nats]'",
            "MISSING_EXTRA",
        ) from None
    return nats


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

    def __init__(self, options: BridgeOptions, settings: Settings, app: Any = None) -> None:
        if app is None:
            from ..worker.app import app
        self.options = options
        self.settings = settings
        self.app = app
        self.result_timeout = options.result_timeout or default_result_timeout(settings)
        self.counters = Counters()
        #: Jobs of the group in flight, as of the last watch pass (plus those taken since).
        self.pending_count = 0
        from ..state import state_redis

        # Published markers must outlive any redelivery of their job.
        ttl = self.result_timeout + 3600
        self.store = PendingResults(state_redis(settings), settings.key_prefix, options.queue, ttl)
        self._intake_pool = ThreadPoolExecutor(1, thread_name_prefix="bridge-intake")
        self._watch_pool = ThreadPoolExecutor(1, thread_name_prefix="bridge-watch")
        self._nc: Client | None = None

    # -- running ------------------------------------------------------------------

    async def run(self, stop: asyncio.Event) -> None:
        nats = load_nats()
        options = self.options
        servers = [url.strip() for url in options.url.split(",") if url.strip()]
        shown = ",".join(mask_url(url) for url in servers)
        nc = await self._connect(nats, servers, shown, stop)
        if nc is None:
            return
        self._nc = nc
        watcher = asyncio.create_task(self._watch(stop))
        try:
            with _no_result_subscriptions():
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

    async def _connect(
        self, nats: ModuleType, servers: list[str], shown: str, stop: asyncio.Event
    ) -> Client | None:
        """Connect within :data:`CONNECT_TIMEOUT` (the client alone would retry forever);
        ``None`` when told to stop first. Once connected, the client reconnects by itself."""
        errors: list[str] = []

        async def note_error(exc: Exception) -> None:
            errors.append(scrub_text(str(exc)) or type(exc).__name__)
            await _log_nats_error(exc)

        connecting = asyncio.ensure_future(
            nats.connect(
                servers,
                name="captcha-tasks-bridge",
                connect_timeout=5,
                max_reconnect_attempts=-1,
                reconnect_time_wait=1,
                error_cb=note_error,
                disconnected_cb=_note(f"bridge: disconnected from {shown}"),
                reconnected_cb=_note(f"bridge: reconnected to {shown}"),
            )
        )
        stopping = asyncio.ensure_future(stop.wait())
        done, _ = await asyncio.wait(
            {connecting, stopping}, timeout=CONNECT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        stopping.cancel()
        if connecting not in done:
            connecting.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await connecting
            if stop.is_set():
                return None
            last = errors[-1] if errors else "no answer"
            raise ConfigurationError(
                f"cannot connect to NATS at {shown} within {CONNECT_TIMEOUT:.0f} s: {last}",
                "NATS_UNREACHABLE",
            )
        try:
            nc: Client = connecting.result()
        except Exception as exc:
            raise ConfigurationError(
                f"cannot connect to NATS at {shown}: {scrub_text(str(exc)) or type(exc).__name__}",
                "NATS_UNREACHABLE",
            ) from None
        return nc

    def _listening(self, mode: str) -> None:
        o = self.options
        servers = ",".join(mask_url(url.strip()) for url in o.url.split(","))
        log.info(
            "bridge: listening on %s: %s in queue group %s -> results on %s (%s); "
            "result timeout %.0f s",
            servers, o.tasks_subject, o.queue, o.results_subject, mode, self.result_timeout,
        )  # fmt: skip

    async def _intake_core(self, nc: Client, stop: asyncio.Event) -> None:
        nats = load_nats()
        sub = await nc.subscribe(self.options.tasks_subject, queue=self.options.queue)
        await nc.flush(timeout=5)
        self._listening("core NATS: jobs in flight in this process are lost if it dies")
        while not stop.is_set():
            if self.pending_count >= self.options.max_pending:
                await _sleep(stop, self.options.poll_interval)
                continue
            try:
                msg = await sub.next_msg(timeout=0.5)
            except nats.errors.TimeoutError:
                continue
            except Exception as exc:
                await _intake_trouble(nc, stop, exc)
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
        sub = await js.pull_subscribe(o.tasks_subject, durable=o.queue, stream=o.jetstream,
                                      config=config)  # fmt: skip
        self._listening(f"JetStream stream {o.jetstream}, durable consumer {o.queue}")
        while not stop.is_set():
            room = min(o.batch, o.max_pending - self.pending_count)
            if room <= 0:
                await _sleep(stop, o.poll_interval)
                continue
            try:
                msgs = await sub.fetch(room, timeout=1.0)
            except nats.errors.TimeoutError:
                continue
            except Exception as exc:  # e.g. while the client reconnects
                await _intake_trouble(nc, stop, exc)
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
            log.warning("bridge: job left unhandled: %s: %s", type(exc).__name__,
                        scrub_text(str(exc)))  # fmt: skip
            if jetstream:
                await _settle(msg.nak(delay=min(5.0, self.options.ack_wait)))

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
        entry = Entry(job.task_id, self.options.results_subject, time.time() + self.result_timeout)
        try:
            fresh = await self._io(self._intake_pool, self.enqueue, celery_id, call, entry,
                                   redelivered)  # fmt: skip
        except Exception as exc:
            await self._enqueue_failed(msg, jetstream, celery_id, entry, exc)
            return
        if fresh:
            self.counters.enqueued += 1
            self.pending_count += 1
        if jetstream:
            # Only now: the job is in the pending hash and its task on the broker.
            await _settle(msg.ack())

    async def _reject(
        self, msg: Msg, task_id: str | int | None, exc: InvalidTaskInput, *, jetstream: bool
    ) -> None:
        self.counters.rejected += 1
        log.info("bridge: rejected job %r: %s", task_id, scrub_text(str(exc)))
        await self._publish(self.options.results_subject, failed(task_id, exc))
        if jetstream:  # a bad message does not get better: never deliver it again
            await _settle(msg.ack())

    def enqueue(self, celery_id: str, call: TaskCall, entry: Entry, redelivered: bool) -> bool:
        """Record the job, then send its task (blocking: the intake thread runs it). False
        when there was nothing to do: its result went out already, or (a redelivered job)
        a worker has its task already."""
        if not self.store.track(celery_id, entry):
            return False
        if redelivered and has_state(self.app.backend, celery_id):
            return False
        task = self.app.tasks[call.task]
        task.apply_async(call.args, call.kwargs, task_id=celery_id, retry=True,
                         retry_policy=ENQUEUE_RETRY)  # fmt: skip
        return True

    async def _enqueue_failed(
        self, msg: Msg, jetstream: bool, celery_id: str, entry: Entry, exc: Exception
    ) -> None:
        reason = scrub_text(str(exc)) or type(exc).__name__
        if jetstream:
            # Left for a later delivery (the same Celery task id): nothing is lost.
            log.warning("bridge: could not enqueue job %r, will retry: %s", entry.task_id, reason)
            await _settle(msg.nak(delay=min(5.0, self.options.ack_wait)))
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
            await _sleep(stop, self.options.poll_interval)

    def _collect(self) -> list[tuple[str, Entry, dict[str, Any]]]:
        """One pass (in the watch thread): the pending jobs that ended or ran out of time,
        claimed by this bridge, with their result messages."""
        entries = self.store.entries()
        self.pending_count = len(entries)
        if not entries:
            return []
        backend = self.app.backend
        ids = list(entries)
        metas: dict[str, dict[str, Any]] = {}
        for start in range(0, len(ids), READ_CHUNK):
            metas.update(ready_results(backend, ids[start : start + READ_CHUNK]))
        now = time.time()
        expired = [tid for tid in ids if tid not in metas and entries[tid].deadline <= now]
        taken = self.store.claim([*metas, *expired])
        self.pending_count -= len(taken)
        due = []
        for tid in taken:
            entry = entries[tid]
            due.append((tid, entry, self._message(backend, tid, entry, metas.get(tid))))
        return due

    def _message(
        self, backend: Any, celery_id: str, entry: Entry, meta: dict[str, Any] | None
    ) -> dict[str, Any]:
        if meta is None:
            timeout = SolveTimeout(f"no result within {self.result_timeout:.0f} s of the job")
            return failed(entry.task_id, timeout, celery_id)
        if meta.get("status") == "SUCCESS" and isinstance(meta.get("result"), dict):
            return solved(entry.task_id, meta["result"], celery_id)
        if meta.get("status") == "REVOKED":
            return failed(entry.task_id, "REVOKED: the solve task was revoked", celery_id)
        try:
            error: BaseException | str = backend.exception_to_python(meta.get("result"))
        except Exception:
            error = f"TASK_FAILED: {str(meta.get('result'))[:200]}"
        return failed(entry.task_id, error, celery_id)

    async def _publish(self, subject: str, message: dict[str, Any]) -> bool:
        assert self._nc is not None
        try:
            await self._nc.publish(subject, json.dumps(message, default=str).encode())
        except Exception as exc:
            log.warning("bridge: could not publish a result on %s: %s", subject,
                        scrub_text(str(exc)) or type(exc).__name__)  # fmt: skip
            return False
        return True

    async def _io(self, pool: ThreadPoolExecutor, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` in ``pool``, waited for at most :data:`IO_TIMEOUT` seconds."""
        loop = asyncio.get_running_loop()
        return await asyncio.wait_for(loop.run_in_executor(pool, fn, *args), IO_TIMEOUT)


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


async def _intake_trouble(nc: Client, stop: asyncio.Event, exc: Exception) -> None:
    """A failed receive: wait a second and try again, unless the connection is gone for good."""
    if nc.is_closed:
        raise exc
    log.warning("bridge: taking jobs failed: %s", scrub_text(str(exc)) or type(exc).__name__)
    await _sleep(stop, 1.0)


async def _settle(ack: Any) -> None:
    """Send an ack or nak; a failure only means the message comes again (same task id)."""
    try:
        await ack
    except Exception as exc:
        log.warning("bridge: acknowledgement failed: %s", scrub_text(str(exc)))


async def _log_nats_error(exc: Exception) -> None:
    log.warning("bridge: NATS: %s", scrub_text(str(exc)) or type(exc).__name__)


def _note(text: str) -> Callable[[], Any]:
    async def callback() -> None:
        log.warning(text)

    return callback


@contextlib.contextmanager
def _no_result_subscriptions() -> Iterator[None]:
    """Stop Celery's Redis backend from subscribing to every task the bridge sends.

    By default it subscribes to each task's result channel, for a later ``.get()``; the
    bridge never calls one (it reads results with MGET), so the subscriptions would only
    pile up unread on one connection. Celery skips them in processes that must never
    block on a result, which the bridge is: it says so for the duration of the run.
    """
    from celery import _state

    before = _state.task_join_will_block()
    _state._set_task_join_will_block(True)
    try:
        yield
    finally:
        _state._set_task_join_will_block(before)
