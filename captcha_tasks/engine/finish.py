"""Ending a job: store its outcome once, then tell whoever waits for it.

A solved job's answer goes to its caller (the :class:`Completer`: Celery's result
backend, in a worker) or, for a fill job, to its token pool and nobody else. The
outcome is stored in the job's hash before anyone is told (``finish.lua``, exactly
once), so an engine that dies in between leaves it for another engine to report.
"""

from __future__ import annotations

import contextlib
import decimal
import json
import logging
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol, cast

from .. import errors, tracing
from ..errors import CaptchaTasksError, SolverError
from ..provider import CAPTCHA_CLASSES, Answer, CaptchaType
from ..provider.kind import AnswerContext
from .acceptance import AcceptanceRates
from .breaker import Breaker
from .jobs import Job, solve_result
from .observer import SolveObserver
from .pool import TokenPool
from .queue import SolveQueue
from .spend import DEFAULT_PROVIDER, CostSource, Spend, price_of, tell_spent
from .timing import FirstPollLearner

__all__ = ["Completer", "Finisher", "revoked_fields"]

log = logging.getLogger(__name__)


def revoked_fields(reason: str) -> dict[str, Any]:
    """What a revoked job's hash records of its end (it ends ``failed``, ``revoked`` set)."""
    return {"error": "REVOKED", "error_type": "TaskRevoked", "error_message": reason, "revoked": 1}


class Completer(Protocol):
    """Where finished jobs go (the Celery result backend, in a worker)."""

    def succeed(self, job: Job, result: dict[str, Any]) -> None: ...

    def fail(self, job: Job, error: CaptchaTasksError) -> None: ...

    def revoke(self, job: Job, reason: str) -> None: ...


class _Solved(NamedTuple):
    """A solve about to be ended: what its end stores and what follows it."""

    job: Job
    answer: Answer
    result: dict[str, Any]
    fields: dict[str, Any]
    spend: Spend
    cost_source: CostSource | None


def _grid_shape(job: Job) -> tuple[int, int] | None:
    """A grid job's (rows, cols), which its answer's tiles are checked against."""
    if job.type != "grid":
        return None
    captcha = job.captcha()
    return captcha.rows, captcha.cols  # type: ignore[attr-defined]  # a Grid


def _source(job: Job) -> str:
    return "fill" if job.pool else "api"


class Finisher:
    """Ends the jobs of one engine (its name is in its log lines)."""

    def __init__(
        self,
        queue: SolveQueue,
        completer: Completer,
        pool: TokenPool,
        learner: FirstPollLearner,
        observer: SolveObserver,
        *,
        name: str,
        clock: Callable[[], float],
        provider: str = "",
        prices: Iterable[tuple[str, decimal.Decimal]] = (),
        provider_name: str = DEFAULT_PROVIDER,
        breaker: Breaker | None = None,
        acceptance: AcceptanceRates | None = None,
    ) -> None:
        self.breaker = breaker
        self.acceptance = acceptance
        self.queue = queue
        self.completer = completer
        self.provider = provider  # its protocol: results carry it as ``protocol``
        self.provider_name = provider_name  # its name in results, spend keys and metrics
        self.prices = dict(prices)
        self.pool = pool
        self.learner = learner
        self.observer = observer
        self.name = name
        self.clock = clock

    def succeed(self, job: Job, answer: Answer, at: float, *, read_at: float | None = None) -> bool:
        """``job`` got ``answer`` at ``at`` (by a read sent at ``read_at``); False if it
        had ended already."""
        return bool(self.succeed_many([(job, answer)], at, read_at=read_at))

    def succeed_many(
        self,
        answered: Sequence[tuple[Job, Answer]],
        at: float,
        *,
        then: Callable[[], None] | None = None,
        exact: bool = False,
        read_at: float | None = None,
    ) -> int:
        """End every job of ``answered`` with its answer, got at ``at``: one round trip
        ends them all and frees their threads; ``then`` (if any of them was still this
        caller's to end) runs right after, before the results are stored and their
        callers told, so a freed thread takes its next captcha without waiting for that.
        ``exact``: the answers came when they were ready (pushed by the provider), so
        each is an exact sample of its ready time, not a read that found it late.
        ``read_at``: when the read that found them was sent (``at`` if not given), what
        their ready times are learned from, as every read's and submit's send time is.
        Returns how many this caller ended (the others had ended already)."""
        if not answered:
            return 0
        solved = [self._solved(job, answer, at) for job, answer in answered]
        now = self.clock()
        ends = [(s.job, "done", s.fields, s.spend) for s in solved]
        # With ``then`` (the engine's refill) this caller takes the freed threads itself.
        ended = self.queue.finish_many(ends, now, wake=then is None)
        won = [s for s, ok in zip(solved, ended, strict=True) if ok]
        if won and then is not None:
            try:
                then()
            except Exception as exc:  # the results go out all the same; the loop refills
                log.warning("engine %s: taking the freed threads failed: %s", self.name, exc)
        # Their events reach the broker together where the completer batches them.
        events = getattr(self.completer, "batched", contextlib.nullcontext)
        with events():
            for s in won:
                # Its span after the refill: making spans would hold the freed threads.
                self._traced(s.job, result=s.result)
                self._tell_solved(s, at, exact=exact, read_at=read_at)
        self.queue.reported_many([s.job.task_id for s in won])
        return len(won)

    def _solved(self, job: Job, answer: Answer, at: float) -> _Solved:
        cost, cost_source = price_of(job.type, answer.cost, self.prices)
        user_agent, proxy_id = answer.user_agent, None
        kind = CAPTCHA_CLASSES.get(cast(CaptchaType, job.type))
        if kind is not None and kind.solve_call is not None and kind.solve_call.proxy == "required":
            # Solved through the proxy the kind requires: its cookie is good only for the
            # identity it was solved as, the user agent and the proxy the provider was given.
            user_agent = getattr(job.captcha(), "user_agent", None) or user_agent
            proxy_id = job.proxy_id or None
        context = AnswerContext(_grid_shape(job), user_agent)
        solution = answer.solution if kind is None else kind.shape_answer(answer.solution, context)
        result = solve_result(
            job,
            solution,
            collected_at=at,
            provider=self.provider_name,
            protocol=self.provider,
            cost=cost,
            cost_source=cost_source,
            user_agent=user_agent,
            proxy_id=proxy_id,
        )
        if self.acceptance is not None:
            result["acceptance"] = self.acceptance.rate(self.provider_name, job.type, at)
        fields = {"collected_at": at, "result": json.dumps(result)}
        spend = Spend(self.provider_name, job.type, at, cost)
        return _Solved(job, answer, result, fields, spend, cost_source)

    def _tell_solved(
        self, solved: _Solved, at: float, *, exact: bool = False, read_at: float | None = None
    ) -> None:
        """What follows a solve this caller ended at ``at``: spend, stats, learning (its
        ready time: by ``read_at``, when the read that found it was sent), and the token
        to its pool or the result to its caller (reported by the caller after)."""
        job, answer, result = solved.job, solved.answer, solved.result
        tell_spent(solved.spend, solved.cost_source)
        self.observer.solved(
            job.type, _source(job), seconds=result["solve_seconds"], polls=result["polls"]
        )
        if job.submitted_at is not None:
            # Every time here is a request's send time (the submit's, the reads'): a
            # busy worker reads answers late, not its requests' times.
            start, found = job.submitted_at, at if read_at is None else read_at
            not_ready_at = job.last_poll_at - start if job.last_poll_at else None
            self.learner.observe(
                job.type, not_ready_at=not_ready_at, ready_at=found - start, exact=exact
            )
            if self.breaker is not None:  # far slower than it learned: a sick provider
                self.breaker.answered(found - start, self.learner.learned(job.type))
        if job.pool:
            # A fill: the token goes to its pool and to no caller (single use).
            self.pool.put(
                job.pool,
                captcha_id=job.captcha_id,
                token=str(answer.solution),
                expires_at=result["expires_at"] or at,
                task_id=job.task_id,
            )
        else:
            with tracing.attached(job.trace):  # its log line carries the trace id
                self.completer.succeed(job, result)

    def _traced(
        self,
        job: Job,
        *,
        result: dict[str, Any] | None = None,
        error: CaptchaTasksError | None = None,
    ) -> None:
        """The outcome's span in the job's trace: solved (provider, cost, reads) or the
        typed error."""
        if not tracing.enabled():
            return
        attributes: dict[str, Any] = {
            "captcha_tasks.type": job.type,
            "captcha_tasks.provider": self.provider_name,
            "captcha_tasks.outcome": "solved" if error is None else "failed",
            "captcha_tasks.submits": job.submits,
            "messaging.message.id": job.task_id,
        }
        if result is not None:
            attributes["captcha_tasks.reads"] = result.get("polls")
            attributes["captcha_tasks.cost"] = result.get("cost")
            attributes["captcha_tasks.pool"] = bool(job.pool) or None
        at = time.time()  # this host's clock, as every span's
        tracing.emit(
            "captcha_tasks.result",
            parent=job.trace,
            start=at,
            end=at,
            attributes=attributes,
            error=error,
        )

    def fail(self, job: Job, error: CaptchaTasksError, *, expected: str = "") -> bool:
        """``job`` ends with ``error``; False if it had ended already. A polled job's
        error is its captcha's: it ends nothing if the job moved to another captcha
        meanwhile. ``expected``: only if it is still in that state under this claim."""
        fields = {
            "error": error.code or type(error).__name__,
            "error_type": type(error).__name__,
            "error_message": error.message,
        }
        captcha_id = job.captcha_id if job.state == "polling" else ""
        if not self.queue.finish(
            job, "failed", fields, self.clock(), captcha_id=captcha_id, expected=expected
        ):
            return False
        self.observer.failed(job.type, _source(job), error)
        self._traced(job, error=error)
        if job.pool:
            log.warning("engine %s: a pool fill failed: %s", self.name, error)
            self.pool.fill_ended(job.pool, job.task_id)
        else:
            with tracing.attached(job.trace):
                self.completer.fail(job, error)
        self.queue.reported(job.task_id)
        return True

    def revoke(self, job: Job, reason: str) -> str:
        """End ``job`` as revoked (Celery's ``revoke``): its caller's ``get()`` raises
        ``TaskRevokedError``. One no provider was sent (``waiting``, ``submitting``)
        leaves the queue and spends nothing; one at the provider (``polling``: this
        lane's) is read no more, and its captcha, billed at submit, is counted in the
        spend. Returns the state it was revoked from, ``""`` if it was not this engine's
        to end now (ended already; being sent, or another lane's at the provider)."""
        now = self.clock()
        fields = revoked_fields(reason)
        if job.state == "polling":
            if job.provider != self.provider_name:
                return ""
            cost, source = price_of(job.type, None, self.prices)
            spend = Spend(self.provider_name, job.type, now, cost)
            ended = self.queue.finish(
                job, "failed", fields, now, captcha_id=job.captcha_id, spend=spend
            )
            if ended:
                tell_spent(spend, source)
            was = "polling" if ended else ""
        elif job.state == "submitting" and job.provider != self.provider_name:
            return ""
        else:
            was = self.queue.revoke_unsent(job, fields, now)
        if not was:
            return ""
        self.observer.noted("revoked")
        if job.pool:
            self.pool.fill_ended(job.pool, job.task_id)
        else:
            self.completer.revoke(job, reason)
        self.queue.reported(job.task_id)
        return was

    def report_again(self, job: Job, fields: dict[str, str]) -> None:
        """A job that ended but whose engine died before telling Celery: tell it now
        from the stored outcome (callbacks may run twice then, as with any redelivered
        Celery task; the result is never lost)."""
        if (
            fields.get("reported")
            or job.pool
            or not (fields.get("result") or fields.get("error_type"))
        ):
            self.queue.forget(job.task_id)
            return
        if job.state == "done":
            self.completer.succeed(job, json.loads(fields["result"]))
        elif fields.get("revoked"):
            self.completer.revoke(job, fields.get("error_message", "revoked"))
        else:
            cls = getattr(errors, fields.get("error_type", ""), None)
            if not (isinstance(cls, type) and issubclass(cls, CaptchaTasksError)):
                cls = SolverError
            self.completer.fail(job, cls(fields.get("error_message", ""), code=fields.get("error")))
        self.observer.noted("reported_after_crash")
        log.warning(
            "engine %s: reported %s, which a stopped engine had ended (%s)",
            self.name,
            job.task_id,
            job.state,
        )
        self.queue.reported(job.task_id)
