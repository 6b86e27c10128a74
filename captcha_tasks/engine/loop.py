"""The solve engine: submits waiting jobs within the thread budget and polls them.

One engine runs in each worker process (see :mod:`captcha_tasks.worker.engine_step`); it
holds no Celery worker slot. All its state is in Redis, so any engine can poll
any job: a job whose engine dies is picked up by another once its claim expires,
and a rolling restart loses nothing.

A loop claims due work and hands provider calls to a small thread pool:

- **acquire**: take free threads of the cluster-wide budget for the oldest waiting
  jobs (one Lua script) and submit them;
- **poll**: claim jobs whose next poll is due and ask the provider for all of them
  in one request (``ids=``) where it takes that, else one by one;
- a call that frees a thread (an answer, an error) immediately acquires and
  submits the next waiting job in the same thread: no queue hop between a thread
  freed at the provider and the next captcha sent to it.

A job is sent to in.php at most once per attempt: a submit is marked ``sending`` in
Redis right before its HTTP call, and one whose outcome is unknown (no answer in
time, a connection dropped after sending, its engine dead mid-call) fails with
:class:`~captcha_tasks.errors.SubmitUncertain` instead of being sent again (the
provider may have billed it). Only a submit that surely never reached the provider
is retried, and a job left ``submitting`` by a dead engine (never sent) is resubmitted.
The one deliberate second submit is after ERROR_CAPTCHA_UNSOLVABLE, which the
provider does not bill.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import redis

from .. import errors
from ..errors import (
    CaptchaTasksError,
    CaptchaUnsolvable,
    ClientError,
    InvalidApiKey,
    NoSlotAvailable,
    PermanentSolverError,
    SolverError,
    SolveTimeout,
    SubmitUncertain,
    TransientSolverError,
    UnknownProxy,
)
from ..monitor.metrics import solve_observer
from ..provider import Answer, Proxy, SolverClient
from ..settings import Settings
from ..state.keys import STRUCTURE_TTL, Keys
from ..state.scripts import run
from .jobs import Job, solve_result
from .pool import TokenPool
from .timing import MAX_POLLS_PER_CAPTCHA, POLL_INTERVAL, FirstPollLearner

__all__ = ["Completer", "Engine", "EngineStats"]

log = logging.getLogger(__name__)

#: Most captcha ids in one ``ids=`` poll.
BATCH_MAX = 50
#: Seconds (scaled) the provider's limit learned from a "no free slot" answer holds
#: before the whole configured budget is tried again.
PROVIDER_LIMIT_TTL = 60.0
#: Seconds (scaled) an engine whose key the provider refused stays out of the work.
KEY_REFUSED_PAUSE = 30.0
#: Seconds (not scaled) between two log lines about retried provider calls of one engine.
RETRY_LOG_INTERVAL = 10.0


class Completer(Protocol):
    """Where finished jobs go (the Celery result backend, in a worker)."""

    def succeed(self, job: Job, result: dict[str, Any]) -> None: ...

    def fail(self, job: Job, error: CaptchaTasksError) -> None: ...


class EngineStats:
    """Counters for benchmarks and metrics (this engine only)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)


class Engine:
    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        solver: SolverClient,
        completer: Completer,
        *,
        name: str = "engine",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.redis = client
        self.solver = solver
        self.completer = completer
        self.name = name
        self.clock = clock
        self.keys = Keys(settings.key_prefix)
        self.learner = FirstPollLearner(settings, client)
        self.pool = TokenPool(client, settings)
        self.stats = EngineStats()
        self.threads = settings.engine_threads
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix=f"{name}-call")
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._stop = threading.Event()
        self._kick = threading.Event()
        self._thread: threading.Thread | None = None
        self.batch = settings.batch_poll != "off"
        self.interval = settings.scaled(POLL_INTERVAL)
        #: After the provider refuses this worker's key, it takes no work for this long.
        self.pause_s = settings.scaled(KEY_REFUSED_PAUSE)
        self._paused_until = 0.0
        self._refusal: InvalidApiKey | None = None
        self._retry_logged_at = -math.inf
        self._retries_unlogged = 0
        # A claim outlives the longest provider call, so only a dead engine's expires.
        self.claim_s = 2 * (min(5.0, settings.http_timeout) + settings.http_timeout) + 5.0

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> Engine:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 30.0) -> None:
        """Stop claiming work; let calls in progress finish (up to ``timeout``)."""
        self._stop.set()
        self._kick.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self._pool.shutdown(wait=True, cancel_futures=False)
        if self._refusal is not None:
            with contextlib.suppress(redis.RedisError):  # else it expires on its own
                self.redis.delete(self.keys.key_refused(self.name))

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                if not self.step():
                    self._idle()
                backoff = 0.1
            except redis.RedisError as exc:
                log.warning("engine %s: Redis unavailable (%s); retrying", self.name, exc)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
            except Exception:
                log.exception("engine %s: unexpected error; continuing", self.name)
                self._stop.wait(1.0)

    def _idle(self) -> None:
        """Sleep until the next due poll or waiting job, a local kick, or a wake-up
        pushed by an admission or another engine."""
        now = self.clock()
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(self.keys.due, 0, 0, withscores=True)
        pipe.zrange(self.keys.waiting, 0, 0, withscores=True)
        pipe.zcount(self.keys.budget, now, "+inf")
        due, waiting, held = pipe.execute()
        times = [float(score) for _, score in due]
        if int(held) < self.settings.threads:  # else a freed thread pushes a wake-up
            times += [float(score) for _, score in waiting]
        nxt = min([*times, now + 1.0])
        wait = min(max(nxt - now, 0.005), 1.0)
        if self._in_flight() > 0:
            # Our own calls will change what is due: look again soon.
            self._kick.wait(min(wait, self.interval))
            self._kick.clear()
        else:
            self.redis.blpop([self.keys.wake], timeout=max(wait, 0.01))

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
                log.warning("engine %s: Redis error in a call: %s", self.name, exc)
            except Exception:
                log.exception("engine %s: unexpected error in a call", self.name)
            finally:
                with self._busy_lock:
                    self._busy -= 1
                self._kick.set()

        self._pool.submit(call)
        return True

    # -- one turn of the loop -----------------------------------------------------------

    def _pause(self, exc: InvalidApiKey) -> None:
        if self.clock() >= self._paused_until:
            log.error("engine %s: the provider refused this worker's key (%s); pausing %.1f s",
                      self.name, exc.code, self.pause_s)  # fmt: skip
        self.stats.add("paused")
        self._paused_until = self.clock() + self.pause_s
        self._refusal = exc
        ttl = max(1, math.ceil(2 * self.pause_s + self.settings.heartbeat_interval))
        self.redis.set(self.keys.key_refused(self.name), exc.code or "refused", ex=ttl)

    def _other_workers_alive(self) -> bool:
        """Whether another worker beats (``{prefix}heartbeat:*``) whose key the provider
        has not refused (as far as the ``key_refused`` marks say)."""
        beats = sum(1 for _ in self.redis.scan_iter(
            match=f"{self.keys.heartbeat_prefix}*", count=100))  # fmt: skip
        refused = sum(1 for _ in self.redis.scan_iter(
            match=f"{self.keys.key_refused_prefix}*", count=100))  # fmt: skip
        mine = 1 if self._paused_until else 0
        return beats - 1 > refused - mine

    def _fail_all_if_every_key_is_refused(self) -> None:
        """Paused, and no other live worker has a key the provider takes: nobody can
        submit or poll, so waiting and polling jobs end now with the provider's refusal
        instead of sitting out their deadlines. Bounded: a few hundred jobs per turn."""
        if self._refusal is None or self._other_workers_alive():
            return
        error = self._refusal
        now = self.clock()
        ended = 0
        for _ in range(20):
            taken = run(
                self.redis,
                "acquire",
                [self.keys.budget, self.keys.waiting, self.keys.due, self.keys.provider_limit],
                [now, self.settings.threads, BATCH_MAX, now + self.claim_s,
                 self.keys.job_prefix, STRUCTURE_TTL],
            )  # fmt: skip
            raw = run(self.redis, "claim", [self.keys.due],
                      [now, now + self.claim_s, BATCH_MAX, self.keys.job_prefix])  # fmt: skip
            pipe = self.redis.pipeline(transaction=False)
            for task_id in taken:
                pipe.hgetall(self.keys.job(task_id))
            found = list(zip(taken, pipe.execute(), strict=True))
            found += [
                (i, dict(zip(f[::2], f[1::2], strict=True)))
                for i, f in zip(raw[::2], raw[1::2], strict=True)
            ]
            if not found:
                break
            for task_id, fields in found:
                job = Job.from_fields(task_id, fields)
                if job.state in ("done", "failed"):
                    self._report_again(job, fields)
                else:
                    ended += self._fail(job, error)
        if ended:
            self.stats.add("failed_every_key_refused", ended)
            log.error("engine %s: every live worker's key is refused; failed %d job(s) with %s",
                      self.name, ended, error.code)  # fmt: skip

    def _still_refused(self) -> bool:
        """After a pause: is this worker's key still refused? (one getbalance)"""
        try:
            self.solver.balance()
        except InvalidApiKey as exc:
            self._pause(exc)
            return True
        except SolverError:
            pass  # other trouble is for the calls themselves to meet and handle
        log.info("engine %s: the provider accepts this worker's key again", self.name)
        self._paused_until = 0.0
        self._refusal = None
        self.redis.delete(self.keys.key_refused(self.name))
        return False

    def step(self) -> bool:
        """Claim due polls and acquire threads for waiting jobs; True if anything started."""
        # Paused after a refused key: resume only once the provider takes it again, so a
        # misconfigured worker never touches more than the calls it had in flight.
        if self._paused_until and (self.clock() < self._paused_until or self._still_refused()):
            self._fail_all_if_every_key_is_refused()
            return False
        worked = self._claim_and_poll()
        worked = self._acquire_and_submit() or worked
        return worked

    def _free_calls(self) -> int:
        if self._paused_until:
            return 0  # paused: take no new work, from the loop or from a finishing call
        return self.threads - self._in_flight()

    def _claim_and_poll(self) -> bool:
        free = self._free_calls()
        if free <= 0 or self._stop.is_set():
            return False
        now = self.clock()
        per_call = BATCH_MAX if self.batch else 1
        raw = run(
            self.redis,
            "claim",
            [self.keys.due],
            [now, now + self.claim_s, free * per_call, self.keys.job_prefix],
        )
        if not raw:
            return False
        polls: list[Job] = []
        for task_id, fields in zip(raw[::2], raw[1::2], strict=True):
            job = Job.from_fields(task_id, dict(zip(fields[::2], fields[1::2], strict=True)))
            if job.state == "submitting":
                # Its engine died (or stalled) after taking it, before sending it: the
                # provider never saw it, so submitting it now is its first submit.
                self.stats.add("resubmits_after_crash")
                log.warning("engine %s: submitting %s, taken but never sent by a stopped engine",
                            self.name, task_id)  # fmt: skip
                if not self._spawn(self._submit, job):
                    self._release_claim(job)
            elif job.state == "sending":
                # Its engine died during the in.php call: the provider may have it.
                self._lost_send(job)
            elif job.state == "polling":
                # Past its deadline too: polled once more all the same. Its deadline may
                # have passed while a dead engine's claim kept everyone else from
                # polling it, and the answer may be waiting at the provider; ``_poll``
                # fails it with SolveTimeout if it is not.
                polls.append(job)
            elif job.state in ("done", "failed"):
                # Ended: reported already (a stale entry), or its engine died between
                # ending it and reporting it to Celery.
                self._report_again(job, dict(zip(fields[::2], fields[1::2], strict=True)))
            else:  # requeued meanwhile: the entry is stale
                self.redis.zrem(self.keys.due, task_id)
        for start in range(0, len(polls), per_call):
            batch = polls[start : start + per_call]
            if not self._spawn(self._poll, batch):
                for job in batch:
                    self._release_claim(job)
        return True

    def _lost_send(self, job: Job) -> None:
        error = SubmitUncertain(
            f"the engine sending it ({job.sender or 'unknown'}) stopped during its in.php "
            f"call: {SubmitUncertain.consequence}"
        )
        log.warning("engine %s: %s was being sent by %s, which stopped: failing it (%s)",
                    self.name, job.task_id, job.sender or "an engine", error.code)  # fmt: skip
        self.stats.add("submit_uncertain")
        self.stats.add("submit_uncertain_after_crash")
        solve_observer().submitted(job.type, error)
        self._fail(job, error)

    def _release_claim(self, job: Job) -> None:
        self.redis.zadd(self.keys.due, {job.task_id: self.clock()}, xx=True)

    def _acquire_and_submit(self) -> bool:
        free = self._free_calls()
        if free <= 0 or self._stop.is_set():
            return False
        now = self.clock()
        taken = run(
            self.redis,
            "acquire",
            [self.keys.budget, self.keys.waiting, self.keys.due, self.keys.provider_limit],
            [now, self.settings.threads, free, now + self.claim_s, self.keys.job_prefix,
             STRUCTURE_TTL],
        )  # fmt: skip
        if not taken:
            return False
        pipe = self.redis.pipeline(transaction=False)
        for task_id in taken:
            pipe.hgetall(self.keys.job(task_id))
        for task_id, fields in zip(taken, pipe.execute(), strict=True):
            job = Job.from_fields(task_id, fields)
            if not self._spawn(self._submit, job):
                self._requeue(job, "submitting", now, counter="")
        return True

    # -- provider calls (pool threads) ----------------------------------------------------

    def _submit(self, job: Job) -> None:
        now = self.clock()
        if now > job.queue_deadline:
            waited = now - job.enqueued_at
            self._fail(job, SolveTimeout(f"no free thread within {waited:.0f} s"))
            return
        try:
            captcha = job.captcha()
            proxy = self._proxy_for(job)
        except CaptchaTasksError as exc:
            self._fail(job, exc)
            return
        sending_at = self.clock()
        if not self._mark_sending(job):
            # Ended meanwhile, or another engine took it over after our claim ran out.
            self.stats.add("send_skipped")
            return
        try:
            captcha_id = self.solver.submit(captcha, proxy=proxy)
        except SubmitUncertain as exc:
            # The provider may have accepted (and billed) it: sending it again could
            # pay twice. The task fails with that error; the caller may retry it.
            self.stats.add("submit_uncertain")
            solve_observer().submitted(job.type, exc)
            log.warning("engine %s: %s: %s", self.name, job.task_id, exc)
            self._fail(job, exc)
        except TransientSolverError as exc:
            # Surely not processed (no connection, a gateway's 5xx, a provider code).
            self.stats.add(f"submit_retry:{exc.code}")
            solve_observer().submitted(job.type, exc)
            delay = self.settings.scaled(exc.retry_after or 5.0)
            self._log_retry("a submit", exc)
            self._requeue(job, "sending", self.clock() + delay, counter="")
            if isinstance(exc, NoSlotAvailable):
                # The provider holds fewer captchas of ours than the budget allows:
                # submit no more than it holds until the limit is forgotten, instead of
                # asking again and again (a retry storm of "no slot" answers).
                limit = run(self.redis, "provider_limit",
                            [self.keys.provider_limit, self.keys.budget],
                            [int(self.settings.scaled(PROVIDER_LIMIT_TTL) * 1000)])  # fmt: skip
                self.stats.add("provider_limit_learned")
                log.info("engine %s: the provider has no free slot; budget now %s of %d",
                         self.name, limit, self.settings.threads)  # fmt: skip
        except InvalidApiKey as exc:
            solve_observer().submitted(job.type, exc)
            # This worker's key is refused: likely its own configuration (a bad release
            # mid-rollout), not the request's. Step aside and let another engine try it;
            # a second refusal fails it with the provider's code.
            self._pause(exc)
            if job.key_refusals < 1 and self._other_workers_alive():
                self._requeue(job, "sending", self.clock(), counter="key_refusals")
            else:
                self._fail(job, exc)
        except CaptchaTasksError as exc:
            solve_observer().submitted(job.type, exc)
            self._fail(job, exc)
        else:
            self.stats.add("submitted")
            solve_observer().submitted(job.type)
            at = self.clock()
            first = self._on_tick(at + self.learner.first_poll(job.type))
            ok = self._record_submitted(job, captcha_id, at, first, sending_at + self.claim_s)
            if not ok:
                self.stats.add("submitted_after_end")
        self._acquire_and_submit()

    def _log_retry(self, what: str, exc: TransientSolverError) -> None:
        """Say that provider calls are being retried: at most one line per
        ``RETRY_LOG_INTERVAL`` (a provider that is away must be seen in the log, and a
        burst of 502s must not flood it)."""
        now = time.monotonic()
        if now - self._retry_logged_at < RETRY_LOG_INTERVAL:
            self._retries_unlogged += 1
            return
        more = f" ({self._retries_unlogged} more since the last line)" if (
            self._retries_unlogged) else ""  # fmt: skip
        self._retry_logged_at, self._retries_unlogged = now, 0
        log.warning("engine %s: %s failed, retrying: %s%s", self.name, what, exc, more)

    def _record_submitted(
        self, job: Job, captcha_id: str, at: float, first: float, claim_until: float
    ) -> bool:
        """Store the captcha id of a job just submitted. Redis may be away for a moment
        (a restart): retry while this engine's claim on the job holds, since once the id
        is lost the job can only end ``SubmitUncertain``."""
        delay = 0.1
        while True:
            try:
                return bool(
                    run(
                        self.redis,
                        "submitted",
                        [self.keys.job(job.task_id), self.keys.due],
                        [job.task_id, captcha_id, at, first, STRUCTURE_TTL],
                    )
                )
            except redis.RedisError as exc:
                if self.clock() + delay >= claim_until - 1.0:
                    raise
                log.warning("engine %s: storing captcha %s of %s: Redis unavailable (%s); "
                            "retrying", self.name, captcha_id, job.task_id, exc)  # fmt: skip
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _mark_sending(self, job: Job) -> bool:
        """Mark the job ``sending`` right before its in.php call (and renew its claim for
        the call); False if it is no longer this engine's to send."""
        now = self.clock()
        return bool(
            run(
                self.redis,
                "sending",
                [self.keys.job(job.task_id), self.keys.due],
                [job.task_id, now + self.claim_s, now, self.name, STRUCTURE_TTL],
            )
        )

    def _proxy_for(self, job: Job) -> Proxy | None:
        if not job.proxy_id:
            return None
        from ..session.proxies import ProxyPool

        try:
            return ProxyPool(self.redis, self.settings).get(job.proxy_id)
        except UnknownProxy:
            # Removed from the pool since: solving without it beats failing the page.
            log.warning("engine %s: proxy %s is gone; submitting without", self.name, job.proxy_id)
            return None

    def _poll(self, jobs: Sequence[Job]) -> None:
        now = self.clock()
        answers: dict[str, Answer | SolverError | None]
        try:
            answers = self._get_answers(jobs)
        except TransientSolverError as exc:
            self.stats.add(f"poll_retry:{exc.code}")
            self._log_retry("a poll", exc)
            later = self._on_tick(
                now + max(self.settings.scaled(exc.retry_after or 5.0), self.interval)
            )
            for job in jobs:
                self._reschedule(job, later, polled=False, at=now)
            return
        except InvalidApiKey as exc:
            # The captchas are fine at the provider; our key is not: another engine (or
            # this one with a corrected key) polls them again before their deadlines.
            self._pause(exc)
            for job in jobs:
                self._reschedule(job, now + self.pause_s, polled=False, at=now)
            return
        except PermanentSolverError as exc:
            for job in jobs:
                self._fail(job, exc)
            return
        at = self.clock()
        freed = False
        for job in jobs:
            answer = answers.get(job.captcha_id)
            if isinstance(answer, Answer):
                freed |= self._succeed(job, answer, at)
            elif answer is None and at > job.solve_deadline():
                freed |= self._fail(
                    job, SolveTimeout(f"no answer {job.deadline_s:.0f} s after submit")
                )
            elif answer is None:
                self._reschedule(job, self._next_poll(job, at), polled=True, at=at)
            elif isinstance(answer, CaptchaUnsolvable) and job.resubmits < 1:
                self.stats.add("resubmits_unsolvable")
                freed |= self._requeue(job, "polling", at, counter="resubmits")
            else:
                freed |= self._fail(job, answer)
        if freed:
            self._acquire_and_submit()

    def _get_answers(self, jobs: Sequence[Job]) -> dict[str, Answer | SolverError | None]:
        ids = [job.captcha_id for job in jobs]
        if len(ids) > 1 and self.batch:
            try:
                got = self.solver.get_many(ids)
                self.stats.add("poll_requests")
                solve_observer().polled()
                return got
            except (ClientError, TransientSolverError) as exc:
                if self.settings.batch_poll == "on" or isinstance(exc, TransientSolverError):
                    raise
                log.warning(
                    "engine %s: the provider refused a batch poll (%s); polling one by one",
                    self.name,
                    exc.code,
                )
                self.batch = False
        out: dict[str, Answer | SolverError | None] = {}
        for captcha_id in ids:
            self.stats.add("poll_requests")
            solve_observer().polled()
            try:
                out[captcha_id] = self.solver.get(captcha_id)
            except (CaptchaUnsolvable, ClientError) as exc:
                out[captcha_id] = exc
        return out

    def _on_tick(self, t: float) -> float:
        """Batched, poll times snap up to a grid of the poll interval, shared by every
        engine: captchas come due together and one request polls them all."""
        if not self.batch:
            return t
        return math.ceil(t / self.interval) * self.interval

    def _next_poll(self, job: Job, at: float) -> float:
        """When to poll again a captcha that was not ready at ``at``."""
        if self.batch:
            # The tick after the one this poll belonged to (``at`` is a little past
            # it, by the call's duration), not the one after that.
            return self._on_tick(at + self.interval / 2)
        # One request per captcha: poll less often, and stretch past the ban threshold.
        interval = 3 * self.interval
        return at + (interval * 2 if job.polls + 1 >= MAX_POLLS_PER_CAPTCHA else interval)

    # -- state changes --------------------------------------------------------------------

    def _succeed(self, job: Job, answer: Answer, at: float) -> bool:
        result = solve_result(job, answer.solution, collected_at=at)
        fields = {"collected_at": at, "result": json.dumps(result)}
        if not self._finish(job, "done", job.captcha_id, fields):
            return False
        self.stats.add("solved")
        self.stats.add("polls_of_solved", job.polls + 1)
        solve_observer().solved(job.type, "fill" if job.pool else "api",
                                seconds=result["solve_seconds"], polls=job.polls + 1)  # fmt: skip
        if job.submitted_at is not None:
            start = job.submitted_at
            not_ready_at = job.last_poll_at - start if job.last_poll_at else None
            self.learner.observe(job.type, not_ready_at=not_ready_at, ready_at=at - start)
        if job.pool:
            # A fill: the token goes to its pool and to no caller (single use).
            self.pool.put(job.pool, captcha_id=job.captcha_id, token=str(answer.solution),
                          expires_at=result["expires_at"] or at, task_id=job.task_id)  # fmt: skip
            self.stats.add("pooled")
        else:
            self.completer.succeed(job, result)
        self._reported(job.task_id)
        return True

    def _fail(self, job: Job, error: CaptchaTasksError) -> bool:
        fields = {"error": error.code or type(error).__name__,
                  "error_type": type(error).__name__, "error_message": error.message}  # fmt: skip
        if not self._finish(job, "failed", "", fields):
            return False
        self.stats.add(f"failed:{error.code}")
        solve_observer().failed(job.type, "fill" if job.pool else "api", error)
        if job.pool:
            log.warning("engine %s: a pool fill failed: %s", self.name, error)
            self.pool.fill_ended(job.pool, job.task_id)
        else:
            self.completer.fail(job, error)
        self._reported(job.task_id)
        return True

    def _finish(self, job: Job, state: str, captcha_id: str, fields: dict[str, Any]) -> bool:
        """End ``job`` (exactly once); it stays claimed until its outcome is reported."""
        args: list[Any] = [job.task_id, captcha_id, state, self.clock() + self.claim_s]
        for name, value in fields.items():
            args += [name, value]
        keys = [self.keys.job(job.task_id), self.keys.due, self.keys.budget, self.keys.wake]
        return bool(run(self.redis, "finish", keys, args))

    def _reported(self, task_id: str) -> None:
        pipe = self.redis.pipeline(transaction=False)
        pipe.hset(self.keys.job(task_id), "reported", 1)
        pipe.zrem(self.keys.due, task_id)
        pipe.execute()

    def _report_again(self, job: Job, fields: dict[str, str]) -> None:
        """A job that ended but whose engine died before telling Celery: tell it now
        from the stored outcome (callbacks may run twice then, as with any redelivered
        Celery task; the result is never lost)."""
        if (
            fields.get("reported")
            or job.pool
            or not (fields.get("result") or fields.get("error_type"))
        ):
            self.redis.zrem(self.keys.due, job.task_id)
            return
        if job.state == "done":
            self.completer.succeed(job, json.loads(fields["result"]))
        else:
            cls = getattr(errors, fields.get("error_type", ""), None)
            if not (isinstance(cls, type) and issubclass(cls, CaptchaTasksError)):
                cls = SolverError
            self.completer.fail(job, cls(fields.get("error_message", ""), code=fields.get("error")))
        self.stats.add("reported_after_crash")
        log.warning("engine %s: reported %s, which a stopped engine had ended (%s)",
                    self.name, job.task_id, job.state)  # fmt: skip
        self._reported(job.task_id)

    def _requeue(self, job: Job, expected: str, not_before: float, *, counter: str) -> bool:
        done = run(
            self.redis,
            "requeue",
            [self.keys.job(job.task_id), self.keys.due, self.keys.budget, self.keys.waiting,
             self.keys.wake],
            [job.task_id, expected, job.captcha_id if expected == "polling" else "",
             not_before, STRUCTURE_TTL, counter],
        )  # fmt: skip
        return bool(done)

    def _reschedule(self, job: Job, next_at: float, *, polled: bool, at: float) -> None:
        run(
            self.redis,
            "reschedule",
            [self.keys.job(job.task_id), self.keys.due],
            [job.task_id, job.captcha_id, next_at, 1 if polled else 0,
             at if polled else (job.last_poll_at or "")],
        )  # fmt: skip
