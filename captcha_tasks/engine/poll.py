"""Polling claimed captchas: one provider request for a batch where the provider reads
many at once, else one per captcha; then each job ends, waits for its next poll, or goes
back to the queue (an unsolvable captcha's one resubmit). An answer the provider pushes
(a callback, :mod:`.callbacks`) is acted on as a poll's (:meth:`Poller.pushed`).

The provider's read rules (:class:`~captcha_tasks.provider.poll_rules.PollRules`, through
:class:`.timing.PollGrid`) hold throughout: a read refused as too soon is "not ready,
slow down", and a captcha is given up (``SolveTimeout`` naming the rule) before a read
the provider would answer with a lost task: past its read cap or its retention."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from .. import tracing
from ..errors import (
    CaptchaUnsolvable,
    ClientError,
    InvalidApiKey,
    PermanentSolverError,
    RateLimited,
    SolveTimeout,
    TransientSolverError,
)
from ..provider import Answer, Polled, Provider
from ..settings import Provider as Dialect
from .jobs import Job
from .parts import EngineParts

__all__ = ["Poller"]

log = logging.getLogger(__name__)

#: A job's reads by one engine: one span, its reads as arrays of its attributes.
_READS = tracing.SpanOfSteps("captcha_tasks.reads")


class Poller:
    """Polls for one engine (``provider`` may be replaced)."""

    def __init__(
        self,
        parts: EngineParts,
        provider: Provider,
        *,
        on_freed: Callable[[], None] | None = None,
    ) -> None:
        self.parts = parts
        self.provider = provider
        #: Called as soon as a poll's answers freed threads (the engine: take the next
        #: waiting jobs for them); None: :meth:`poll`'s result says so instead.
        self.on_freed = on_freed

    def poll(self, jobs: Sequence[Job]) -> bool:
        """Poll ``jobs`` (claimed by this engine); True if any of them freed its thread
        that :attr:`on_freed` was not told of."""
        now = self.parts.clock()
        freed = False
        readable = []
        for job in jobs:
            # One the provider would refuse (read too often, dropped): not read again.
            stop = self._rules_stop(job, now, reads=job.polls, next_at=now)
            if stop is None:
                readable.append(job)
            else:
                freed |= self.parts.finisher.fail(job, SolveTimeout(stop))
        if not readable:
            return freed
        started = time.time()  # the read spans' times: this host's clock, as every span's
        read_at = self.parts.clock()  # what ready times are learned from: the send time
        try:
            answers = self._get_answers(readable)
        except (TransientSolverError, PermanentSolverError) as exc:
            self._traced(readable, (started, time.time()), {}, exc)
            return self._failed(readable, exc, now) or freed
        at = self.parts.clock()
        read = (started, time.time())
        solved: list[tuple[Job, Answer]] = []
        others: list[tuple[Job, Polled]] = []
        for job in readable:
            answer = answers.get(job.captcha_id)
            if isinstance(answer, Answer):
                solved.append((job, answer))
            else:
                others.append((job, answer))
        # The answered ones first, in one round trip: their threads are free at the
        # provider already, and the next captchas go out before their results are stored.
        ended = self.parts.finisher.succeed_many(solved, at, then=self.on_freed, read_at=read_at)
        freed |= bool(ended) and self.on_freed is None
        with self.parts.queue.batched():  # the unanswered ones' reschedules: one round trip
            for job, answer in others:
                freed |= self._found(job, answer, at, read_at=read_at)
        # The spans after the refill: making them would hold the freed threads.
        self._traced(readable, read, answers, None)
        return freed

    def _traced(
        self,
        jobs: Sequence[Job],
        read: tuple[float, float],
        answers: Mapping[str, Polled],
        error: Exception | None,
    ) -> None:
        """Each job's read in its trace, a step of one ``captcha_tasks.reads`` span per job
        and engine (:class:`~captcha_tasks.tracing.SpanOfSteps`): when it ended, how many
        captchas its request asked for (``captcha_tasks.batch_sizes``: ``jobs``, batched,
        or one), and the last one's answer (``captcha_tasks.answer``). ``read``: when its
        request started and ended, in this host's clock, as every span's."""
        if not tracing.enabled():
            return
        started, end = read
        for job in jobs:
            found = answers.get(job.captcha_id) if error is None else error
            if isinstance(found, Answer):
                answer = "ready"
            elif found is None:
                answer = "not_ready"
            else:
                answer = getattr(found, "code", None) or type(found).__name__
            _READS.step(
                job.task_id,
                job.trace,
                start=started,
                end=end,
                attributes={
                    "captcha_tasks.provider": self.parts.queue.provider_name,
                    "captcha_tasks.captcha_id": job.captcha_id,
                    "captcha_tasks.answer": answer,
                },
                figures={"captcha_tasks.batch_sizes": len(jobs)},
                # The last read here: answered, or an error that ends or moves the job.
                final=found is not None,
                error=error,
            )

    @property
    def protocol(self) -> Dialect:
        """The protocol the provider speaks, its pushed answers too."""
        return self.parts.queue.config.protocol

    def pushed(self, job: Job, answer: Polled, at: float) -> str:
        """Act on what the provider pushed for ``job`` at ``at`` (a callback) as on what a
        poll found, but for no answer yet: its fallback poll stays as it is. Returns what
        followed, in a few words."""
        if answer is None:
            return "still working"
        if isinstance(answer, Answer):
            # The callback comes when the answer is ready: an exact sample of when.
            won = self.parts.finisher.succeed_many(
                [(job, answer)], at, then=self.on_freed, exact=True
            )
            self.parts.observer.noted("callback_solved" if won else "callback_late")
            return "solved" if won else "already ended"
        if isinstance(answer, CaptchaUnsolvable) and job.resubmits < 1:
            return "resubmitting" if self._resubmit(job, at) else "already ended"
        self.parts.finisher.fail(job, answer)
        return f"failed ({answer.code})"

    def _found(self, job: Job, answer: Polled, at: float, *, read_at: float) -> bool:
        """Act on what a poll sent at ``read_at`` found for ``job`` (by ``at``); True if
        that freed its thread."""
        if isinstance(answer, Answer):
            return self.parts.finisher.succeed(job, answer, at, read_at=read_at)
        if answer is None or self._too_fast(answer):
            return self._not_ready(job, at, too_fast=answer is not None, read_at=read_at)
        if isinstance(answer, CaptchaUnsolvable) and job.resubmits < 1:
            return self._resubmit(job, at)
        return self.parts.finisher.fail(job, answer)

    def _resubmit(self, job: Job, at: float) -> bool:
        """An unsolvable captcha is not billed: one more try, at the next provider of its
        route if it has one (this one just failed it), else here. False if it had ended."""
        self.parts.observer.noted("resubmits_unsolvable")
        rest = self.parts.queue.route_without(job) if self._failing_over else ""
        return self.parts.queue.requeue(job, "polling", at, counter="resubmits", route=rest)

    @property
    def _failing_over(self) -> bool:
        return self.parts.breaker.enabled

    def _too_fast(self, answer: Polled) -> bool:
        """A read refused for coming too soon after the last one: not ready yet, slow down."""
        code = self.parts.grid.rules.too_fast_code
        return code is not None and isinstance(answer, RateLimited) and answer.code == code

    def _not_ready(self, job: Job, at: float, *, too_fast: bool, read_at: float) -> bool:
        """No answer yet (by a read sent at ``read_at``): poll again later, or give up
        (deadline, the provider's rules)."""
        if too_fast:
            self.parts.observer.noted("poll_too_fast")
            next_at = self.parts.grid.back_off(job.polls, at)
        else:
            # One by one, the learned ready times of its type place it (engine.placement).
            ready = self.parts.learner.ready_times(job.type) if self.parts.grid.learns else None
            next_at = self.parts.grid.next_poll(job.polls, at, since=job.submitted_at, ready=ready)
        reads = job.polls + 1
        stop = _past_deadline(job, at, f" ({reads} reads)")
        if stop is None:
            stop = self._rules_stop(job, at, reads=reads, next_at=next_at)
        if stop is not None:
            return self.parts.finisher.fail(job, SolveTimeout(stop))
        # A refused read counts toward the provider's cap but tells nothing of the answer.
        self.parts.queue.reschedule(job, next_at, polled=not too_fast, at=read_at, reads=1)
        return False

    def _rules_stop(self, job: Job, at: float, *, reads: int, next_at: float) -> str | None:
        """Why ``job``, read ``reads`` times, may not be read again at ``next_at`` under the
        provider's rules (None: it may)."""
        limit = self.parts.grid.read_limit(reads)
        if limit is not None:
            return f"no answer after {reads} reads: {limit}"
        end = self.parts.grid.retention_end(job.submitted_at or job.enqueued_at)
        if end is not None and next_at > end:
            kept = end - (job.submitted_at or job.enqueued_at)
            return (
                f"no answer before {self.parts.grid.rules.provider} drops the task "
                f"({kept:.0f} s after its creation; {reads} reads)"
            )
        return None

    def _failed(
        self, jobs: Sequence[Job], exc: TransientSolverError | PermanentSolverError, now: float
    ) -> bool:
        """The poll request itself failed (sent ``now``): every job of it waits, or fails;
        True if that freed a thread. A job past its deadline fails with SolveTimeout, as
        one whose read found no answer does: reads that keep failing end it in time."""
        freed = False
        if isinstance(exc, TransientSolverError):
            self.parts.observer.noted(f"poll_retry:{exc.code}")
            # The captchas stay here whatever the breaker decides.
            self.parts.breaker.failed(exc.code or type(exc).__name__)
            self.parts.retries.retrying("a poll", exc)
            delay = max(
                self.parts.settings.scaled(exc.retry_after or 5.0), self.parts.grid.interval
            )
            # Counted from the answer too: the provider may have seen the read late.
            later = self.parts.grid.on_tick(
                max(now + delay, self.parts.clock() + self.parts.grid.min_gap)
            )
            # Where reads are capped, a failed one may have counted at the provider.
            reads = 1 if self.parts.grid.rules.max_reads is not None else 0
            at = self.parts.clock()
            with self.parts.queue.batched():
                why = f": its last reads failed ({exc.code or type(exc).__name__}: {exc})"
                for job in jobs:
                    stop = _past_deadline(job, at, why)
                    if stop is not None:
                        freed |= self.parts.finisher.fail(job, SolveTimeout(stop))
                    else:
                        self.parts.queue.reschedule(job, later, polled=False, at=now, reads=reads)
        elif isinstance(exc, InvalidApiKey):
            # The captchas are fine at the provider; our key is not: another engine (or
            # this one with a corrected key) polls them again before their deadlines.
            self.parts.refusal.pause(exc)
            for job in jobs:
                self.parts.queue.reschedule(
                    job, now + self.parts.refusal.pause_s, polled=False, at=now
                )
        else:
            for job in jobs:
                freed |= self.parts.finisher.fail(job, exc)
        return freed

    def _get_answers(self, jobs: Sequence[Job]) -> Mapping[str, Polled]:
        rules = self.parts.grid.rules
        lonely = {job.captcha_id for job in jobs if rules.reads_alone(job.type, job.captcha)}
        ids = [job.captcha_id for job in jobs if job.captcha_id not in lonely]
        alone = [job.captcha_id for job in jobs if job.captcha_id in lonely]
        if len(ids) > 1 and self.parts.grid.batch:
            try:
                got = dict(self.provider.get_many(ids))
                self.parts.observer.polled()
            except (ClientError, TransientSolverError) as exc:
                if self.parts.settings.batch_poll == "on" or isinstance(exc, TransientSolverError):
                    raise
                # "auto": a provider that refuses batch reads is polled one by one.
                log.warning(
                    "engine %s: the provider refused a batch poll (%s); polling one by one",
                    self.parts.name,
                    exc.code,
                )
                self.parts.grid.batch = False
            else:
                return {**got, **self._one_by_one(alone)}
        return self._one_by_one(ids + alone)

    def _one_by_one(self, ids: Sequence[str]) -> dict[str, Polled]:
        out: dict[str, Polled] = {}
        for captcha_id in ids:
            self.parts.observer.polled()
            try:
                out[captcha_id] = self.provider.get(captcha_id)
            except (CaptchaUnsolvable, ClientError) as exc:
                out[captcha_id] = exc
            except RateLimited as exc:
                if not self._too_fast(exc):
                    raise
                out[captcha_id] = exc
        return out


def _past_deadline(job: Job, at: float, why: str) -> str | None:
    """Why ``job`` is given up ``at`` (``why``: what its reads found), if its deadline has
    passed; None while it has not."""
    if at <= job.solve_deadline():
        return None
    return f"no answer {job.deadline_s:.0f} s after submit{why}"
