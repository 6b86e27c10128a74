"""The solve engine: submits waiting jobs within the thread budget and polls them.

One engine per configured provider runs in each worker process (see
:mod:`captcha_tasks.worker.engine_step`: with several providers each has its own client,
budget and poll schedule, and ``acquire.lua`` routes every job to one of them); it
holds no Celery worker slot. All its state is in Redis (but for the reads a reader
has not saved, where one engine reads: ``CAPTCHA_TASKS_READERS=one``, the default), so
any engine can take any job over: a job whose engine dies is picked up by another once
its claim (or its reader's lease) runs out, and a rolling restart loses nothing.

A loop claims due work and hands provider calls (through the
:class:`~captcha_tasks.provider.Provider` interface) to a small thread pool:

- **acquire**: take free threads of the cluster-wide budget for the oldest waiting
  jobs (:mod:`.queue`, one Lua script) and submit them;
- **poll**: claim jobs whose next poll is due (with ``CAPTCHA_TASKS_READERS=one``, the
  default, only while this engine holds the provider's reader lease, and with the ones
  it keeps between reads, :mod:`.reader`) and ask the provider for all of them in one
  request where it reads many at once, else one by one (:mod:`.poll`);
- a call that frees a thread (an answer, an error) immediately acquires and
  submits the next waiting job in the same thread: no queue hop between a thread
  freed at the provider and the next captcha sent to it.

A job is sent to the provider at most once per attempt: a submit is marked ``sending``
in Redis right before its call, and one whose outcome is unknown (no answer in
time, a connection dropped after sending, its engine dead mid-call) fails with
:class:`~captcha_tasks.errors.SubmitUncertain` instead of being sent again (the
provider may have billed it). Only a submit that surely never reached the provider
is retried, and a job left ``submitting`` by a dead engine (never sent) is resubmitted.
The one deliberate second submit is after an unsolvable captcha
(:class:`~captcha_tasks.errors.CaptchaUnsolvable`), which the provider does not bill.

Its other parts: :mod:`.submit` (the submit and what its outcome proves),
:mod:`.breaker` (taking a failing provider out of the routes), :mod:`.refusal` (the
pause after a refused key), :mod:`.wakes` (wake-ups pushed to Redis), :mod:`.finish`
(ending a job once and telling its caller), :mod:`.observer` (every event, to this
engine's stats and to Prometheus when metrics are on).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

from ..errors import (
    SubmitUncertain,
)
from ..provider import Provider
from ..settings import Settings
from ..state.clock import clock_of
from ..state.outage import REDIS_OUTAGE
from .acceptance import AcceptanceBook, AcceptanceRates
from .breaker import Breaker
from .finish import Completer, Finisher
from .jobs import Job
from .observer import INSTALLED, EngineStats, FanOut
from .parts import EngineParts
from .poll import Poller
from .pool import TokenPool
from .queue import SolveQueue
from .reader import Reader
from .reader import supported as reader_supported
from .refusal import KeyRefusal, LiveWorkers
from .retries import RetryLog
from .submit import Submitter
from .timing import BATCH_LEARN_QUANTILE, FirstPollLearner, PollGrid
from .wakes import WakeListener

__all__ = ["Completer", "Engine", "EngineStats", "claim_seconds"]

log = logging.getLogger(__name__)

#: Most captcha ids in one batch poll.
BATCH_MAX = 50
#: Seconds an engine keeps trying a revocation it cannot settle yet: a job being sent
#: (ended once its captcha id is recorded, or its send fails) or at another provider's
#: lane (that lane's engine ends it).
REVOKE_PATIENCE = 60.0
#: Seconds it looks for a revoked id that is no job (yet): a solve whose message is
#: still on its way is admitted within them; any other task's id is dropped after them.
REVOKE_UNKNOWN_PATIENCE = 5.0
#: Least seconds between two looks at the revocations not settled yet.
REVOKE_EVERY = 0.5
#: Least seconds between two of an engine's looks at Redis (not one per call that ends:
#: :mod:`.own_due` knows what its own calls scheduled): for what other engines and
#: expired claims make due.
LOOK_EVERY = 0.1
#: Seconds (scaled) a reader's lease holds unrenewed: how long a dead reader's captchas
#: wait for the next one, past their next read.
READER_LEASE = 10.0


def claim_seconds(settings: Settings) -> float:
    """How long an engine's claim on a job holds: longer than its longest provider call
    (a connect and a read, twice), so only a dead or cut-off engine's runs out."""
    return 2 * (min(5.0, settings.http_timeout) + settings.http_timeout) + 5.0


class Engine:
    """One engine: its loop thread, a pool of threads for provider calls, and the parts
    it drives (:class:`SolveQueue`, :class:`KeyRefusal`, :class:`Finisher`).

    ``live_workers``: the fleet's live workers by name (in a worker,
    :func:`captcha_tasks.fleet.heartbeat.live_workers`), for the key-refusal pause.
    Every event goes to :attr:`observer`: this engine's :attr:`stats` and the
    process's installed observer (Prometheus, when metrics are on).
    """

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        provider: Provider,
        completer: Completer,
        *,
        live_workers: LiveWorkers,
        name: str = "engine",
        clock: Callable[[], float] | None = None,
        provider_name: str = "",
    ) -> None:
        self.settings = settings
        self.redis = client
        self._provider = provider
        self.name = name
        # Redis's clock unless told: claims, leases and deadlines are compared across hosts.
        self.clock = clock = clock or clock_of(client)
        self.stats = EngineStats()
        self.observer = FanOut(self.stats, INSTALLED)
        self.claim_s = claim_seconds(settings)
        self.queue = SolveQueue(
            client, settings, claim_s=self.claim_s, provider=provider_name, claimer=name
        )
        #: The configured provider this engine drives (several: one engine each).
        self.provider_name = self.queue.provider_name
        #: With ``CAPTCHA_TASKS_READERS=one``, this engine's part in the provider's one
        #: reader (:mod:`.reader`); None: every engine claims and reads.
        self.reader: Reader | None = None
        if settings.readers == "one":
            self.reader = self.queue.reader = Reader(
                client,
                self.queue.keys,
                provider=self.provider_name,
                due_key=self.queue.due_key,
                name=name,
                lease_s=max(1.0, settings.scaled(READER_LEASE)),
                max_read_s=self.claim_s,
            )
        self.learner = FirstPollLearner(settings, client, provider=self.provider_name)
        self.breaker = Breaker(client, settings, self.provider_name, clock=clock)
        self.finisher = Finisher(
            self.queue,
            completer,
            TokenPool(client, settings),
            self.learner,
            self.observer,
            name=name,
            clock=clock,
            prices=self.queue.config.prices,
            provider=self.queue.config.protocol,
            provider_name=self.queue.provider_name,
            breaker=self.breaker,
            acceptance=AcceptanceRates(AcceptanceBook(client, settings), settings.scaled(10.0)),
        )
        self.refusal = KeyRefusal(
            client,
            settings,
            name,
            live_workers=live_workers,
            observer=self.observer,
            clock=clock,
            provider=self.provider_name,
        )
        self.grid = PollGrid.for_provider(settings, provider)
        if self.grid.batch:
            self.learner.first_quantile = BATCH_LEARN_QUANTILE
        self.threads = settings.engine_threads
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"{name}-call")
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None
        self.wakes = WakeListener(self.queue, self._kick, self._stop, name)
        # Whether the last acquire took all it asked for: more may be waiting, with
        # threads free. A submit that ends asks for more only then (no round trip
        # per submit once the budget is full or the queue empty).
        self._more_waiting = True
        # When a poll is due and a waiting job has a free thread, as the last look at
        # Redis (:meth:`_idle`, at ``_looked_at``) saw: until then a turn skips that script.
        self._poll_due_at, self._waiting_at, self._looked_at = 0.0, 0.0, float("-inf")
        self.retries = RetryLog(log, name)
        parts = EngineParts(
            settings=settings,
            queue=self.queue,
            finisher=self.finisher,
            refusal=self.refusal,
            breaker=self.breaker,
            grid=self.grid,
            learner=self.learner,
            observer=self.observer,
            retries=self.retries,
            name=name,
            clock=clock,
        )
        self.poller = Poller(parts, provider, on_freed=self.refill)
        self.submitter = Submitter(parts, provider, client, claim_s=self.claim_s)
        # Revoked task ids not settled yet -> when the revoke came (monotonic seconds).
        self._revoking: dict[str, float] = {}
        self._revoke_lock = threading.Lock()
        self._revoke_reason = "revoked"
        self._revoke_looked = float("-inf")
        # Task ids this engine is reading at the provider now (under ``_busy_lock``).
        self._reading: set[str] = set()
        # Since when this engine, its provider's reader, has had no free call thread.
        self._no_thread_since: float | None = None

    @property
    def provider(self) -> Provider:
        return self._provider

    @provider.setter
    def provider(self, provider: Provider) -> None:
        self._provider = self.poller.provider = self.submitter.provider = provider
        self.grid.rules = provider.poll_rules

    @property
    def completer(self) -> Completer:
        return self.finisher.completer

    @completer.setter
    def completer(self, completer: Completer) -> None:
        self.finisher.completer = completer

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Engine:
        if self.reader is not None and not reader_supported(self.redis, self.queue.due_key):
            log.warning(
                "engine %s: this Redis lacks ZMSCORE (Redis 6.2), which one reader needs: "
                "every engine reads %s's captchas, as with CAPTCHA_TASKS_READERS=all",
                self.name,
                self.provider_name,
            )
            self.reader = self.queue.reader = None
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        self.wakes.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming work; let calls in progress finish (up to ``timeout``)."""
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=False)
        self.wakes.join(timeout)
        with contextlib.suppress(redis.RedisError):  # else its mark expires on its own
            self.refusal.forget()
        with contextlib.suppress(redis.RedisError):  # else they are lost: they are samples
            self.learner.flush()
        if self.reader is not None:
            with contextlib.suppress(redis.RedisError):  # else its lease runs out on its own
                self.reader.stop()

    def revoke(self, task_ids: Iterable[str], reason: str = "revoked") -> None:
        """Revoke these solves (Celery's ``revoke`` reached this worker), on the engine's
        thread at its next turn (:meth:`.Finisher.revoke`): a waiting one leaves the queue
        unsent; one at the provider is read no more. A job this engine cannot end yet
        (being sent or read by this engine; at another provider) is tried again for
        :data:`REVOKE_PATIENCE` seconds, an id that is no job for
        :data:`REVOKE_UNKNOWN_PATIENCE`."""
        now = time.monotonic()
        with self._revoke_lock:
            self._revoke_reason = reason
            for task_id in task_ids:
                self._revoking[str(task_id)] = now
            self._revoke_looked = float("-inf")
        self._kick.set()

    @property
    def calls_in_progress(self) -> int:
        """Provider calls (submits and reads) this engine is making now."""
        return self._in_flight()

    def revoking(self) -> int:
        """Revocations this engine has not settled yet."""
        with self._revoke_lock:
            return len(self._revoking)

    def _revoke_pending(self) -> bool:
        """Settle what revocations it can; True if any job was ended."""
        now = time.monotonic()
        with self._revoke_lock:
            if not self._revoking or now - self._revoke_looked < REVOKE_EVERY:
                return False
            self._revoke_looked = now
            pending, reason = dict(self._revoking), self._revoke_reason
        settled, ended = [], False
        for task_id, since in pending.items():
            fields = self.queue.job_fields(task_id)
            if not fields:
                if now - since > REVOKE_UNKNOWN_PATIENCE:
                    settled.append(task_id)
                continue
            job = Job.from_fields(task_id, fields)
            if job.state in ("done", "failed"):
                settled.append(task_id)
            elif (
                # One being sent or read is ended once that call is: its caller's get()
                # raises only when nothing more of it is on its way to the provider.
                job.state != "sending"
                and not self._is_reading(task_id)
                and self.finisher.revoke(job, reason)
            ):
                ended = True  # its completer logs it, as Celery logs a revoked task
                settled.append(task_id)
            elif now - since > REVOKE_PATIENCE:
                settled.append(task_id)
        with self._revoke_lock:
            for task_id in settled:
                if self._revoking.get(task_id) == pending[task_id]:
                    del self._revoking[task_id]
        return ended

    def _is_reading(self, task_id: str) -> bool:
        with self._busy_lock:
            return task_id in self._reading

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                looked = self._looked_at
                worked = self._revoke_pending()
                worked = self.step() or worked
                if not worked:
                    self._idle()
                if worked or self._looked_at != looked:
                    REDIS_OUTAGE.ok()  # this turn's calls to Redis were answered
                backoff = 0.1
            except redis.RedisError as exc:
                # Said once per outage for the whole worker (the other parts meet it too).
                REDIS_OUTAGE.failed(f"engine {self.name}", exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:
                log.exception("engine %s: unexpected error; continuing", self.name)
                self._stop.wait(1.0)

    def _idle(self) -> None:
        """Sleep until the next due poll or waiting job, a local kick, or a wake-up
        pushed by an admission or another engine (:mod:`.wakes`: by this process's
        clock, never a Redis timeout's). What this engine's own calls scheduled it
        knows without asking Redis, which it reads (a look) only once the last look is
        :data:`LOOK_EVERY` old: for other engines' polls, claims run out, queue
        deadlines and the load."""
        # A call that ends kicks after its changes are in Redis: one that ended before
        # this clear is seen below (by the look, or in what it scheduled), one that
        # ends after it cuts the wait.
        self._kick.clear()
        now = self.clock()
        if now - self._looked_at >= LOOK_EVERY:
            self._poll_due_at, self._waiting_at = self.queue.next_work(now)
            self._looked_at = now
            self.grid.note_load(self.queue.in_flight)
            # Samples of the last second's solves, if no solve since has written them.
            self.learner.flush_if_due()
            if self.reader is not None and not self.refusal.paused:
                self.reader.look(now)
                self._step_aside_if_stuck(self.reader, now)
        else:
            self._poll_due_at = min(self._poll_due_at, self.queue.scheduled.next_after())
        reader = self.reader
        if reader is not None:
            if reader.holding:
                self._poll_due_at = min(self._poll_due_at, reader.next_at())
            else:  # another engine reads: this one only looks at the lease now and then
                self._poll_due_at = min(now + reader.lease_s / 3, 1.0 + now)
        wait = min(max(min(self._poll_due_at, self._waiting_at) - now, 0.005), 1.0)
        if reader is not None and reader.holding:  # back in time to renew the lease
            wait = min(wait, reader.lease_s / 3)
        if not self.wakes.woken:
            if self._in_flight() > 0:
                # Our own calls will change what is due: look again soon, never busily.
                self._kick.wait(min(wait, max(self.grid.interval, 0.005)))
            else:
                self.wakes.sleep(wait)
        if self.wakes.take():
            # An admission, a requeue or a thread freed elsewhere: waiting jobs may be
            # takeable now. Wake-ups say nothing of polls (those are due by time, as
            # the look above saw), so no claim for them.
            self._waiting_at = 0.0

    def _step_aside_if_stuck(self, reader: Reader, now: float) -> None:
        """A reader with no free call thread for a whole lease reads nothing meanwhile:
        it lets another engine read (its calls go on)."""
        if not reader.holding or self._free_calls() > 0:
            self._no_thread_since = None
            return
        if self._no_thread_since is None:
            self._no_thread_since = now
        elif now - self._no_thread_since > reader.lease_s:
            log.warning(
                "engine %s: no free call thread for %.1f s: another engine reads %s's captchas",
                self.name,
                now - self._no_thread_since,
                self.provider_name,
            )
            reader.step_aside(now)
            self._no_thread_since = None

    def _in_flight(self) -> int:
        with self._busy_lock:
            return self._busy

    def _spawn(self, fn: Callable[..., None], *args: Any) -> bool:
        with self._busy_lock:
            if self._busy >= self.threads:
                return False
            self._busy += 1

        def call() -> None:
            try:
                fn(*args)
            except redis.RedisError as exc:
                REDIS_OUTAGE.failed(f"engine {self.name}, a provider call's record", exc)
            except Exception:
                log.exception("engine %s: unexpected error in a call", self.name)
            finally:
                with self._busy_lock:
                    self._busy -= 1
                self._kick.set()

        self._pool.submit(call)
        return True

    # -- one turn of the loop -----------------------------------------------------------

    def step(self) -> bool:
        """Claim due polls and acquire threads for waiting jobs; True if anything started."""
        # Paused after a refused key: resume only once the provider takes it again, so a
        # misconfigured worker never touches more than the calls it had in flight.
        if self.refusal.holds(self.provider):
            if self.reader is not None and self.reader.holding:  # another engine reads
                self.reader.stop()
            f = self.finisher
            self.refusal.fail_all_if_alone(self.queue, f.fail, f.report_again, self._hand_on)
            return False
        # What the last look at Redis said is due: a kick from one of our own calls
        # (most turns of the loop) claims and acquires only if something may be.
        now = self.clock()
        worked = self._claim_and_poll() if now >= self._poll_due_at else False
        if self._more_waiting or now >= self._waiting_at:
            worked = self._acquire_and_submit() or worked
        return worked

    def _hand_on(self, job: Job) -> bool:
        """A job taken for a submit while this engine's key is refused everywhere: to
        the next provider of its route, if it has one."""
        code = self.refusal.refusal.code if self.refusal.refusal is not None else "refused"
        return self.submitter.hand_on(job, f"key refused ({code})", say=False)

    def _free_calls(self) -> int:
        if self.refusal.paused:
            return 0  # paused: take no new work, from the loop or from a finishing call
        return self.threads - self._in_flight()

    def _claim_and_poll(self) -> bool:
        free = self._free_calls()
        if free <= 0 or self._stop.is_set():
            return False
        per_call = BATCH_MAX if self.grid.batch else 1
        now = self.clock()
        reader = self.reader
        if reader is not None and not reader.look(now):
            self._poll_due_at = now + reader.lease_s / 3
            return False
        kept = reader.take_due(now, free * per_call) if reader is not None else []
        try:
            room = free * per_call - len(kept)
            claimed = self.queue.claim(now, room) if room > 0 else []
            fresh = {job.task_id for job, _ in claimed}
            taken = [job for job, fields in claimed if self._take_claimed(job, fields)]
        except BaseException:  # Redis failed: the kept ones are read at the next turn
            if reader is not None:
                reader.put_back(kept)
            raise
        polls = [job for job in kept if job.task_id not in fresh] + taken
        # Took all it asked for: more may be due. Else nothing else is until the next
        # poll this engine's own calls scheduled, or one the next look at Redis finds.
        more = len(claimed) >= room
        self._poll_due_at = 0.0 if more else self.queue.scheduled.next_after(now)
        if reader is not None:
            reader.reading(taken, now)
            self._poll_due_at = min(self._poll_due_at, reader.next_at())
        for start in range(0, len(polls), per_call):
            batch = polls[start : start + per_call]
            with self._busy_lock:  # marked here, before a revoke's turn can look
                self._reading.update(job.task_id for job in batch)
            if not self._spawn(self._poll, batch):
                self._read_ended(batch)
                if reader is not None:
                    reader.give_back(batch, self.clock())
                else:
                    for job in batch:
                        self.queue.release_claim(job.task_id, self.clock())
                self._poll_due_at = 0.0
        return bool(claimed) or bool(kept)

    def _take_claimed(self, job: Job, fields: dict[str, str]) -> bool:
        """Start what a claimed job needs; True if it is to be polled."""
        if job.state == "submitting":
            # Its engine died (or stalled) after taking it, before sending it: the
            # provider never saw it, so submitting it now is its first submit.
            self.observer.noted("resubmits_after_crash")
            log.warning(
                "engine %s: submitting %s, taken but never sent by a stopped engine",
                self.name,
                job.task_id,
            )
            if not self._spawn(self._submit, job):
                self.queue.release_claim(job.task_id, self.clock())
                self._poll_due_at = 0.0
        elif job.state == "sending":
            # Its engine died during its submit: the provider may have it.
            self._lost_send(job)
        elif job.state == "polling":
            # Past its deadline too: polled once more all the same. Its deadline may
            # have passed while a dead engine's claim kept everyone else from polling
            # it, and the answer may be waiting at the provider; ``_poll`` fails it
            # with SolveTimeout if it is not.
            return True
        elif job.state in ("done", "failed"):
            # Ended: reported already (a stale entry), or its engine died between
            # ending it and reporting it to Celery.
            self.finisher.report_again(job, fields)
        else:  # requeued meanwhile: the entry is stale
            self.queue.forget(job.task_id)
        return False

    def _lost_send(self, job: Job) -> None:
        error = SubmitUncertain(
            f"the engine sending it ({job.sender or 'unknown'}) stopped during its in.php "
            f"call: {SubmitUncertain.consequence}"
        )
        # Only if its sender did not record the captcha meanwhile (it was cut off from
        # Redis for longer than its claim, not dead): then the job is polled as usual.
        if self.finisher.fail(job, error, expected="sending"):
            log.warning(
                "engine %s: %s was being sent by %s, which stopped: failed it (%s)",
                self.name,
                job.task_id,
                job.sender or "an engine",
                error.code,
            )
            self.observer.noted("submit_uncertain_after_crash")
            self.observer.submitted(job.type, error)

    def _acquire_and_submit(self) -> bool:
        free = self._free_calls()
        if free <= 0 or self._stop.is_set():
            return False
        now = self.clock()
        taken = self.queue.acquire(now, free)
        self._more_waiting = len(taken) >= free
        if not self._more_waiting:
            self._waiting_at = float("inf")  # none left now: until a wake or the next look
        for job, _ in taken:
            if not self._spawn(self._submit, job):
                self.queue.requeue(job, "submitting", now)
        return bool(taken)

    # -- submits (pool threads) -----------------------------------------------------------

    def _submit(self, job: Job) -> None:
        self.submitter.submit(job)
        # A failed submit that freed its thread pushes a wake-up (requeue, finish): the
        # loop acquires then.
        if self._more_waiting:
            self._acquire_and_submit()

    def _poll(self, jobs: Sequence[Job]) -> None:
        try:
            freed = self.poller.poll(jobs)
        finally:
            self._read_ended(jobs)
        if freed:
            self._acquire_and_submit()

    def _read_ended(self, jobs: Sequence[Job]) -> None:
        # The call's end kicks the loop (``_spawn``): a revoke the read held back is
        # settled at its next turn, before that turn claims more reads.
        ids = {job.task_id for job in jobs}
        if self.reader is not None:
            self.reader.read_ended(ids)
        with self._busy_lock:
            self._reading -= ids
        if not self._revoking:  # the common case: no revoke waits (read without the lock)
            return
        with self._revoke_lock:
            if not ids.isdisjoint(self._revoking):
                self._revoke_looked = float("-inf")

    def refill(self) -> None:
        """Threads were just freed (a poll's or a callback's answers): the next waiting
        jobs take them now, from the caller's thread, without waiting for the loop."""
        self._acquire_and_submit()
