"""Polling claimed captchas: one provider request for a batch where the provider reads
many at once, else one per captcha; then each job ends, waits for its next poll, or goes
back to the queue (an unsolvable captcha's one resubmit)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from ..errors import (
    CaptchaUnsolvable,
    ClientError,
    InvalidApiKey,
    PermanentSolverError,
    SolveTimeout,
    TransientSolverError,
)
from ..provider import Answer, Polled, Provider
from ..settings import Settings
from .finish import Finisher
from .jobs import Job
from .observer import SolveObserver
from .queue import SolveQueue
from .refusal import KeyRefusal
from .retries import RetryLog
from .timing import PollGrid

__all__ = ["Poller"]

log = logging.getLogger(__name__)


class Poller:
    """Polls for one engine (its parts are the engine's; ``provider`` may be replaced)."""

    def __init__(
        self,
        settings: Settings,
        provider: Provider,
        queue: SolveQueue,
        finisher: Finisher,
        refusal: KeyRefusal,
        grid: PollGrid,
        *,
        observer: SolveObserver,
        retries: RetryLog,
        name: str,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.provider = provider
        self.queue = queue
        self.finisher = finisher
        self.refusal = refusal
        self.grid = grid
        self.observer = observer
        self.retries = retries
        self.name = name
        self.clock = clock

    def poll(self, jobs: Sequence[Job]) -> bool:
        """Poll ``jobs`` (claimed by this engine); True if any of them freed its thread."""
        now = self.clock()
        try:
            answers = self._get_answers(jobs)
        except (TransientSolverError, PermanentSolverError) as exc:
            self._failed(jobs, exc, now)
            return False
        at = self.clock()
        freed = False
        for job in jobs:
            freed |= self._found(job, answers.get(job.captcha_id), at)
        return freed

    def _found(self, job: Job, answer: Polled, at: float) -> bool:
        """Act on what a poll found for ``job``; True if that freed its thread."""
        if isinstance(answer, Answer):
            return self.finisher.succeed(job, answer, at)
        if answer is None and at > job.solve_deadline():
            timeout = SolveTimeout(f"no answer {job.deadline_s:.0f} s after submit")
            return self.finisher.fail(job, timeout)
        if answer is None:
            self.queue.reschedule(job, self.grid.next_poll(job.polls, at), polled=True, at=at)
            return False
        if isinstance(answer, CaptchaUnsolvable) and job.resubmits < 1:
            self.observer.noted("resubmits_unsolvable")
            return self.queue.requeue(job, "polling", at, counter="resubmits")
        return self.finisher.fail(job, answer)

    def _failed(
        self, jobs: Sequence[Job], exc: TransientSolverError | PermanentSolverError, now: float
    ) -> None:
        """The poll request itself failed: every job of it waits, or fails."""
        if isinstance(exc, TransientSolverError):
            self.observer.noted(f"poll_retry:{exc.code}")
            self.retries.retrying("a poll", exc)
            delay = max(self.settings.scaled(exc.retry_after or 5.0), self.grid.interval)
            later = self.grid.on_tick(now + delay)
            for job in jobs:
                self.queue.reschedule(job, later, polled=False, at=now)
        elif isinstance(exc, InvalidApiKey):
            # The captchas are fine at the provider; our key is not: another engine (or
            # this one with a corrected key) polls them again before their deadlines.
            self.refusal.pause(exc)
            for job in jobs:
                self.queue.reschedule(job, now + self.refusal.pause_s, polled=False, at=now)
        else:
            for job in jobs:
                self.finisher.fail(job, exc)

    def _get_answers(self, jobs: Sequence[Job]) -> Mapping[str, Polled]:
        ids = [job.captcha_id for job in jobs]
        if len(ids) > 1 and self.grid.batch:
            try:
                got = self.provider.get_many(ids)
                self.observer.polled()
                return got
            except (ClientError, TransientSolverError) as exc:
                if self.settings.batch_poll == "on" or isinstance(exc, TransientSolverError):
                    raise
                # "auto": a provider that refuses batch reads is polled one by one.
                log.warning("engine %s: the provider refused a batch poll (%s); polling one "
                            "by one", self.name, exc.code)  # fmt: skip
                self.grid.batch = False
        out: dict[str, Polled] = {}
        for captcha_id in ids:
            self.observer.polled()
            try:
                out[captcha_id] = self.provider.get(captcha_id)
            except (CaptchaUnsolvable, ClientError) as exc:
                out[captcha_id] = exc
        return out
