"""The engine's shared state in Redis: every Lua script it runs, one method each.

Keys and the arguments every call shares (the key prefix, the structures' TTL, the
claim's length) are built here once; the scripts themselves (``state/lua/*.lua``)
say what each step guarantees. Jobs move through the states of
:class:`~captcha_tasks.engine.jobs.Job`:

``waiting`` -(acquire)-> ``submitting`` -(sending)-> ``sending`` -(submitted)->
``polling`` -(finish)-> ``done`` / ``failed``; ``requeue`` sends a job back to
``waiting``, ``reschedule`` moves a polled job's next poll.

Every change of state checks the state it expects, so two engines (one of them past
its claim) can never both move a job: the loser's call returns False. Each claim is a
fencing token too (``claim.lua``): a send, a reschedule or a requeue made for a claim
that another engine has taken over since (an engine cut off from Redis for longer
than its claim, which comes back) is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import redis
from redis.exceptions import NoScriptError

from ..settings import Settings
from ..settings.redis_urls import is_sentinel
from ..state.keys import SPEND_TTL, STRUCTURE_TTL, Keys
from ..state.scripts import run, run_replicated, script
from .jobs import Job
from .own_due import OwnSchedule
from .reader import Reader
from .spend import Spend, minute_of, to_nano

__all__ = ["Claimed", "SolveQueue"]

log = logging.getLogger(__name__)


class Claimed(NamedTuple):
    """A job this engine now holds, with its raw fields (an ended job's stored outcome
    is in them: ``result``, ``error_type``, ``reported``)."""

    job: Job
    fields: dict[str, str]


def _pairs(flat: list[Any]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


class SolveQueue:
    """The waiting queue, the thread budget and the poll schedule of one cluster.

    ``claim_s``: how long a claim on a job (taken to submit or poll) holds; it must
    outlive the longest provider call, so only a dead engine's runs out. ``claimer``:
    the engine's name, recorded with each of its claims and checked as the sender of
    its submits.
    """

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        *,
        claim_s: float,
        provider: str = "",
        claimer: str = "",
    ) -> None:
        self.claimer = claimer
        self.redis = client
        self.keys = Keys(settings.key_prefix)
        # Every configured provider, in order: acquire routes each job to the first of
        # its route that has a free thread and is usable.
        self.providers = settings.providers()
        names = [config.name for config in self.providers]
        #: The provider this queue's engine drives (its "lane"): ``default``'s keys
        #: carry no provider name (:class:`~captcha_tasks.state.keys.Keys`).
        self.provider_name = provider or names[0]
        if self.provider_name not in names:
            raise ValueError(f"no configured provider is named {self.provider_name}")
        self._lane = names.index(self.provider_name) + 1
        #: That provider's configuration; its thread budget, cluster-wide.
        self.config = self.providers[self._lane - 1]
        self.threads = self.config.threads
        self.budget_key = self.keys.provider_budget(self.provider_name)
        self.limit_key = self.keys.provider_limit_of(self.provider_name)
        self.due_key = self.keys.due_of(self.provider_name)
        self._route_keys: list[str] = []
        self._route_args: list[str | int] = [self._lane, len(self.providers)]
        for config in self.providers:
            self._route_keys += [
                self.keys.provider_budget(config.name),
                self.keys.provider_limit_of(config.name),
                self.keys.breaker(config.name),
            ]
            self._route_args += [config.name, config.threads]
        self.claim_s = claim_s
        #: ms a submit's mark waits for a replica (Sentinel only, docs/RELIABILITY.md),
        #: and how long a job whose mark no replica had waits before it is tried again.
        self.replica_wait_ms = (
            int(settings.redis_sentinel_wait * 1000) if is_sentinel(settings.state_url) else 0
        )
        self.replica_hold_s = settings.scaled(5.0)
        self._local = threading.local()
        #: This provider's threads in use cluster-wide, as :meth:`next_work` last saw.
        self.in_flight = 0
        #: The polls this queue's own calls scheduled, as its engine's loop reads them.
        self.scheduled = OwnSchedule()
        #: The engine's part in reading this provider's captchas: while it holds the
        #: lease, an unanswered captcha stays with it between reads (:mod:`.reader`).
        self.reader: Reader | None = None

    def route_without(self, job: Job) -> str:
        """``job``'s route without this provider: where it may go next ("" if nowhere)."""
        names = job.route.split(",") if job.route else [c.name for c in self.providers]
        return ",".join(name for name in names if name != self.provider_name)

    # -- taking work -----------------------------------------------------------------

    def acquire(self, now: float, n: int) -> list[Claimed]:
        """Take up to ``n`` free threads of this provider's budget for the oldest
        waiting jobs routed to it (no more than the budget in force allows) and claim
        them for their submit."""
        taken = run(
            self.redis,
            "acquire",
            [self.keys.waiting, self.due_key, *self._route_keys],
            [
                now,
                n,
                now + self.claim_s,
                self.keys.job_prefix,
                STRUCTURE_TTL,
                *self._route_args,
                self.claimer,
            ],
        )
        return self._claimed(taken)

    @staticmethod
    def _claimed(raw: list[Any]) -> list[Claimed]:
        """``{id1, {field, value, ...}, ...}`` as a script returns jobs with their fields."""
        out = []
        for task_id, flat in zip(raw[::2], raw[1::2], strict=True):
            fields = _pairs(flat)
            out.append(Claimed(Job.from_fields(task_id, fields), fields))
        return out

    def claim(self, now: float, n: int) -> list[Claimed]:
        """Claim up to ``n`` jobs whose next poll (or whose claim) is due: no other
        engine takes them until the claim runs out."""
        until = now + self.claim_s
        raw = run(
            self.redis, "claim", [self.due_key], [now, until, n, self.keys.job_prefix, self.claimer]
        )
        claimed = self._claimed(raw)
        if self.reader is None:
            return claimed
        # The reader keeps what it reads under the score this claim gave its entry.
        return [Claimed(dataclasses.replace(job, entry_score=until), f) for job, f in claimed]

    def release_claim(self, task_id: str, now: float) -> None:
        """Give a claimed job back at once (this engine has no thread for it after all)."""
        self.redis.zadd(self.due_key, {task_id: now}, xx=True)
        self.scheduled.add(now)

    def forget(self, task_id: str) -> None:
        """Drop a stale entry of the poll schedule (its job moved on)."""
        self.redis.zrem(self.due_key, task_id)

    # -- a job's steps -----------------------------------------------------------------

    def sending(self, job: Job, now: float, sender: str) -> bool:
        """Mark ``job`` ``sending`` right before its submit (its claim renewed for the
        call); False if it is no longer the caller's to send (its claim was taken over).

        With Redis Sentinel, also False (the job queued again) when no replica has the
        mark within ``CAPTCHA_TASKS_REDIS_SENTINEL_WAIT``: a failover now would forget
        it, and the promoted replica's copy of the job could be sent a second time. And
        False (queued again) when the call itself failed (:meth:`_take_back`)."""
        keys = [self.keys.job(job.task_id), self.due_key]
        args = [job.task_id, now + self.claim_s, now, sender, STRUCTURE_TTL, job.claim]
        try:
            if not self.replica_wait_ms:
                return bool(run(self.redis, "sending", keys, args))
            marked, replicas = run_replicated(
                self.redis, "sending", keys, args, timeout_ms=self.replica_wait_ms
            )
        except redis.RedisError:
            self._take_back(job, now)
            return False
        if marked and not replicas:
            log.warning(
                "%s: its sending mark is not on a replica after %d ms: not sent, queued again",
                job.task_id,
                self.replica_wait_ms,
            )
            self.requeue(job, "sending", now + self.replica_hold_s)
            return False
        return bool(marked)

    def _take_back(self, job: Job, now: float) -> None:
        """The mark's call failed (its answer lost; a master SIGKILLed during the WAIT,
        the mark already on the replica promoted in its place): marked or not, nothing
        was sent. Left ``sending``, the job would end ``SubmitUncertain`` once its claim
        ran out, so it is queued again as soon as Redis answers, while the claim holds
        (a job the mark never reached is still ``submitting``: the next engine sends
        it). Raises the last error if Redis stays away that long."""
        give_up = time.monotonic() + self.claim_s - 1.0
        delay = 0.1
        while True:
            try:
                self.requeue(job, "sending", now + self.replica_hold_s)
                return
            except redis.RedisError:
                if time.monotonic() + delay >= give_up:
                    raise
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def submitted(self, job: Job, captcha_id: str, at: float, first_poll: float) -> bool:
        """Store the captcha id of a job just sent, and when to poll it first; False if
        the job ended meanwhile. A resubmitted job's reads and last empty poll start
        afresh with the new captcha (the earlier ones move to ``earlier_polls``)."""
        keys = [self.keys.job(job.task_id), self.due_key]
        args = [job.task_id, captcha_id, at, first_poll, STRUCTURE_TTL, self.claimer]
        recorded = bool(run(self.redis, "submitted", keys, args))
        self.scheduled.add(first_poll)
        return recorded

    def reschedule(
        self, job: Job, next_at: float, *, polled: bool, at: float, reads: int | None = None
    ) -> bool:
        """Poll ``job`` again at ``next_at``; ``polled``: a poll found no answer ``at``,
        else no poll told anything; ``reads``: reads to count (default: 1 if ``polled``).
        False if the job moved on."""
        count = (1 if polled else 0) if reads is None else reads
        if self.reader is not None:
            read = dataclasses.replace(
                job,
                polls=job.polls + count,
                unsaved_polls=job.unsaved_polls + count,
                last_poll_at=at if polled else job.last_poll_at,
            )
            if self.reader.keep(read, next_at):  # its loop reads it at next_at
                return True
        last_poll_at = at if polled else (job.last_poll_at or "")
        # Reads its reader kept unsaved are written with it where this one goes to Redis.
        saved = count + job.unsaved_polls
        args = [job.task_id, job.captcha_id, next_at, saved, last_poll_at, job.claim]
        deferred: list[Any] | None = getattr(self._local, "deferred", None)
        if deferred is not None:
            deferred += args
            return True
        return bool(self._reschedule_all(args)[0])

    @contextlib.contextmanager
    def batched(self) -> Iterator[None]:
        """The reschedules made inside (this thread's) go to Redis in one script call at
        the end: a batch poll's unanswered captchas. Inside, :meth:`reschedule` returns
        True whatever the script says."""
        deferred: list[Any] = []
        self._local.deferred = deferred
        try:
            yield
        finally:
            self._local.deferred = None
            if deferred:
                self._reschedule_all(deferred)

    def _reschedule_all(self, args: list[Any]) -> list[int]:
        """``reschedule.lua`` for the jobs of ``args`` (six values each)."""
        moved = list(run(self.redis, "reschedule", [self.due_key], [self.keys.job_prefix, *args]))
        self.scheduled.add(*{float(at) for at in args[2::6]})
        return moved

    def _pipelined(self, name: str, calls: list[tuple[list[str], list[Any]]]) -> list[Any]:
        """Run script ``name`` once per ``(keys, args)`` of ``calls`` in one round trip;
        each call's result. A call that failed raises (after every call has run)."""
        if len(calls) == 1:
            return [run(self.redis, name, *calls[0])]
        sha = script(self.redis, name).sha
        pipe = self.redis.pipeline(transaction=False)
        for keys, args in calls:
            pipe.evalsha(sha, len(keys), *keys, *args)
        results = pipe.execute(raise_on_error=False)
        for i, (call, result) in enumerate(zip(calls, results, strict=True)):
            if isinstance(result, NoScriptError):  # a restarted Redis: loaded by run
                results[i] = run(self.redis, name, *call)
            elif isinstance(result, Exception):
                raise result
        return list(results)

    def requeue(
        self, job: Job, expected: str, not_before: float, *, counter: str = "", route: str = ""
    ) -> bool:
        """Give ``job``'s thread back and queue it again from ``not_before``, if it is
        still in state ``expected`` (and, polling, at the same captcha id); ``counter``:
        a job field to increment (``resubmits``, ``key_refusals``); ``route``: the
        providers it may take next (default: its route stays).

        A polled job comes back only after the read that found its captcha unsolvable:
        that read counts among the solve's polls (``submitted`` keeps them). A job being
        sent is its sender's to requeue; any other needs the caller's claim."""
        polling = expected == "polling"
        captcha_id = job.captcha_id if polling else ""
        keys = [self.keys.job(job.task_id), self.due_key, self.budget_key]
        keys += [self.keys.waiting, self.keys.wake]
        args = [job.task_id, expected, captcha_id, not_before, STRUCTURE_TTL, counter]
        sending = expected == "sending"
        args += [
            1 + job.unsaved_polls if polling else 0,
            route,
            "" if sending else job.claim,
            self.claimer if sending else "",
        ]
        requeued = bool(run(self.redis, "requeue", keys, args))
        if requeued:
            self._moved_on([job.task_id])
        return requeued

    def finish(
        self,
        job: Job,
        state: str,
        fields: dict[str, Any],
        now: float,
        *,
        captcha_id: str = "",
        spend: Spend | None = None,
        expected: str = "",
    ) -> bool:
        """End ``job`` in ``state`` (``done`` / ``failed``) with ``fields``, exactly
        once: True for the one caller that ended it. ``captcha_id``: only if the job
        is still at that captcha. It stays claimed until :meth:`reported`. ``spend``:
        a solve to count in its provider's spend bucket, in the same script.
        ``expected``: only if the job is still in that state under the caller's claim
        (a send given up on: not if its sender recorded the captcha since)."""
        call = self._finish_call(job, state, fields, now, captcha_id, spend, expected)
        ended = bool(run(self.redis, "finish", *call))
        if ended:
            self._moved_on([job.task_id])
        return ended

    def finish_many(
        self,
        ends: Sequence[tuple[Job, str, dict[str, Any], Spend | None]],
        now: float,
        *,
        wake: bool = True,
    ) -> list[bool]:
        """:meth:`finish` for solved jobs (``(job, state, fields, spend)``, each at its
        captcha id) in one round trip: whether each was this caller's to end.
        ``wake=False``: the caller takes the freed threads for waiting jobs itself, so
        no idle engine is woken for them."""
        calls = [
            self._finish_call(job, state, fields, now, job.captcha_id, spend, wake=wake)
            for job, state, fields, spend in ends
        ]
        ended = [bool(result) for result in (self._pipelined("finish", calls) if calls else [])]
        if self.reader is not None:
            self._moved_on([job.task_id for (job, *_), won in zip(ends, ended, strict=True) if won])
        return ended

    def _moved_on(self, task_ids: Sequence[str]) -> None:
        """Jobs this engine ended or requeued: its reader reads them no more."""
        if self.reader is not None and task_ids:
            self.reader.forget(task_ids)

    def _finish_call(
        self,
        job: Job,
        state: str,
        fields: dict[str, Any],
        now: float,
        captcha_id: str,
        spend: Spend | None,
        expected: str = "",
        *,
        wake: bool = True,
    ) -> tuple[list[str], list[Any]]:
        args: list[Any] = [job.task_id, captcha_id, state, now + self.claim_s]
        keys = [
            self.keys.job(job.task_id),
            self.due_key,
            self.budget_key,
            self.keys.wake,
            self.keys.waiting,
        ]
        if spend is None:
            args += ["", 0, 0]
        else:
            keys.append(self.keys.spend(spend.provider, minute_of(spend.at)))
            args += [spend.captcha_type, to_nano(spend.cost), SPEND_TTL]
        args += [expected, job.claim if expected else "", 1 if wake else 0]
        for name, value in fields.items():
            args += [name, value]
        return keys, args

    def job_fields(self, task_id: str) -> dict[str, str]:
        """A job's fields as they are now ({} when there is no such job)."""
        fields: dict[str, str] = self.redis.hgetall(self.keys.job(task_id))  # type: ignore[assignment]
        return fields

    def revoke_unsent(
        self, job: Job, fields: dict[str, Any], now: float, *, waiting_only: bool = False
    ) -> str:
        """End ``job``, which no provider has been sent, with ``fields`` (``revoke.lua``):
        out of the waiting queue, its thread freed if it took one of this lane's. The
        state it was revoked from (``waiting``, ``submitting``), or ``""`` when it was not
        this call's to end (ended, being sent, at the provider, another lane's; taken for
        a submit, with ``waiting_only``)."""
        args: list[Any] = [job.task_id, now + self.claim_s, "waiting" if waiting_only else ""]
        for name, value in fields.items():
            args += [name, value]
        keys = [self.keys.job(job.task_id), self.keys.waiting, self.due_key, self.budget_key]
        return str(run(self.redis, "revoke", keys, args) or "")

    def reported(self, task_id: str) -> None:
        """An ended job's outcome reached its caller: nobody needs to report it again."""
        self.reported_many([task_id])

    def reported_many(self, task_ids: Sequence[str]) -> None:
        """:meth:`reported` for several jobs, in one round trip."""
        if not task_ids:
            return
        pipe = self.redis.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hset(self.keys.job(task_id), "reported", 1)
        pipe.zrem(self.due_key, *task_ids)
        pipe.execute()

    def provider_limit(self, ttl_ms: int) -> int:
        """After a "no free slot" answer: the budget in force drops to the captchas
        the provider holds for us now, for ``ttl_ms``. Returns that limit."""
        keys = [self.limit_key, self.budget_key]
        return int(run(self.redis, "provider_limit", keys, [ttl_ms]))

    # -- waiting for work --------------------------------------------------------------

    def next_work(self, now: float) -> tuple[float, float]:
        """When the next poll comes due, and when the oldest waiting job does (each at
        most a second from now). Waiting jobs count only while the budget has a free
        thread: else a freed thread pushes a wake-up."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrange(self.due_key, 0, 0, withscores=True)
        pipe.zrange(self.keys.waiting, 0, 0, withscores=True)
        pipe.zcount(self.budget_key, now, "+inf")
        due, waiting, held = pipe.execute()
        self.in_flight = int(held)
        later = now + 1.0
        poll_at = min([float(score) for _, score in due] + [later])
        waiting_at = later
        if int(held) < self.threads:
            waiting_at = min([float(score) for _, score in waiting] + [later])
        return poll_at, waiting_at

    def wait_for_wake(self, timeout: float) -> bool:
        """Block until an admission or another engine pushes a wake-up, or ``timeout``;
        True if one came."""
        return self.redis.blpop([self.keys.wake], timeout=timeout) is not None
