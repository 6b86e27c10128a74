"""Submitting a job: the one provider call that must happen at most once.

A job is marked ``sending`` in Redis right before its call; what the call's outcome
proves decides what follows (:meth:`Submitter.submit`): an accepted captcha is
recorded for polling; a submit that surely never reached the provider is queued
again; one whose outcome is unknown fails with
:class:`~captcha_tasks.errors.SubmitUncertain`, never sent again; a provider that
refuses it for reasons of its own (balance, key) hands it to the next provider of its
route, which is then its first submit anywhere.
"""

from __future__ import annotations

import logging
import time

import redis

from .. import tracing
from ..errors import (
    CaptchaTasksError,
    InsufficientFunds,
    InvalidApiKey,
    NoSlotAvailable,
    SolveTimeout,
    SubmitUncertain,
    TransientSolverError,
    UnknownProxy,
)
from ..provider import Captcha, Provider, Proxy
from .callbacks import callback_url_for, fallback_wait
from .jobs import Job
from .parts import EngineParts

__all__ = ["PROVIDER_LIMIT_TTL", "Submitter"]

log = logging.getLogger(__name__)

#: Seconds (scaled) the provider's limit learned from a "no free slot" answer holds
#: before the whole configured budget is tried again.
PROVIDER_LIMIT_TTL = 60.0


class Submitter:
    """The submits of one engine (``provider`` may be replaced): ``client`` finds a job's
    proxy; ``claim_s``: how long the engine's claim on a job holds, the bound for storing
    its captcha id."""

    def __init__(
        self, parts: EngineParts, provider: Provider, client: redis.Redis, *, claim_s: float
    ) -> None:
        self.parts = parts
        self.provider = provider
        self.redis = client
        self.claim_s = claim_s

    def submit(self, job: Job) -> None:
        """Send ``job`` (claimed by this engine) to the provider, once."""
        prepared = self._prepare(job)
        if prepared is None:
            return
        captcha, proxy = prepared
        callback_url = callback_url_for(self.parts.settings, job, self.parts.queue.provider_name)
        sending_at = self.parts.clock()
        if not self.parts.queue.sending(job, sending_at, self.parts.name):
            # Ended meanwhile, or another engine took it over after our claim ran out.
            self.parts.observer.noted("send_skipped")
            log.info(
                "engine %s: not sending %s: no longer ours (ended, or taken over "
                "after our claim ran out)",
                self.parts.name,
                job.task_id,
            )
            return
        # Spans are in this host's time; the wait's length is in Redis's clock.
        waited_until = time.time()
        failed: CaptchaTasksError | None = None
        captcha_id = ""
        with tracing.span(
            "captcha_tasks.submit",
            parent=job.trace,
            kind="client",
            http=True,
            attributes={
                "captcha_tasks.type": job.type,
                "captcha_tasks.provider": self.parts.queue.provider_name,
                "captcha_tasks.protocol": self.parts.queue.config.protocol,
                "captcha_tasks.attempt": job.submits + 1,
                "captcha_tasks.callback": bool(callback_url) or None,
            },
        ) as span:
            try:
                pushed = {"callback_url": callback_url} if callback_url else {}
                # Its submit time, as every read's: when the request went, not when its
                # answer was read (late, on a busy worker).
                sent_at = self.parts.clock()
                captcha_id = self.provider.submit(captcha, proxy=proxy, **pushed)
            except CaptchaTasksError as exc:
                failed = exc
                tracing.set_error(span, exc)
            else:
                if span is not None:
                    span.set_attribute("captcha_tasks.captcha_id", captcha_id)
        if job.submits == 0:
            # The wait for a thread of the provider's budget (a first submit's: from its
            # admission), the submit's sibling in the solve's trace; made after the
            # request, which it would otherwise hold up.
            tracing.emit(
                "captcha_tasks.wait_for_thread",
                parent=job.trace,
                start=waited_until - max(0.0, sending_at - job.enqueued_at),
                end=waited_until,
                attributes={"captcha_tasks.provider": self.parts.queue.provider_name},
            )
        if failed is not None:
            self.parts.observer.submitted(job.type, failed)
            self._submit_failed(job, failed)
        else:
            self.parts.observer.submitted(job.type)
            self.parts.breaker.ok()
            at = self.parts.clock()
            wait = self.parts.learner.first_poll(job.type)
            learned = self.parts.learner.ready_times(job.type)
            ready = learned if self.parts.grid.learns else None
            if callback_url:  # the answer comes to us: the poll is a late fallback
                wait = fallback_wait(
                    self.parts.settings,
                    job.type,
                    wait,
                    provider=self.provider,
                    captcha_id=captcha_id,
                    ready=learned,
                )
                ready = None
            first = max(self.parts.grid.first_poll(sent_at, wait, ready), at)
            if not self._record_submitted(
                job, captcha_id, sent_at, first, sending_at + self.claim_s
            ):
                self.parts.observer.noted("submitted_after_end")

    def _prepare(self, job: Job) -> tuple[Captcha, Proxy | None] | None:
        """The captcha and proxy to send; None if the job failed instead."""
        now = self.parts.clock()
        if now > job.queue_deadline:
            waited = now - job.enqueued_at
            self.parts.finisher.fail(job, SolveTimeout(f"no free thread within {waited:.0f} s"))
            return None
        try:
            return job.captcha(), self._proxy_for(job)
        except CaptchaTasksError as exc:
            self.parts.finisher.fail(job, exc)
            return None

    def _submit_failed(self, job: Job, exc: CaptchaTasksError) -> None:
        if isinstance(exc, SubmitUncertain):
            # The provider may have accepted (and billed) it: sending it again could
            # pay twice, here or at another provider. The task fails with that error;
            # the caller may retry it.
            log.warning("engine %s: %s: %s", self.parts.name, job.task_id, exc)
            self.parts.finisher.fail(job, exc)
        elif isinstance(exc, TransientSolverError):
            self._submit_retry(job, exc)
        elif isinstance(exc, InvalidApiKey):
            # This worker's key is refused: likely its own configuration (a bad release
            # mid-rollout), not the request's. Step aside and let another engine try it;
            # a second refusal is the key's: the provider is left out (several
            # providers), else the job fails with the provider's code.
            self.parts.refusal.pause(exc)
            if job.key_refusals < 1 and self.parts.refusal.others_alive():
                self.parts.queue.requeue(job, "sending", self.parts.clock(), counter="key_refusals")
            else:
                self._fail_over(job, exc, f"key refused ({exc.code})")
        elif isinstance(exc, InsufficientFunds):
            self._fail_over(job, exc, "zero balance")
        else:
            self.parts.finisher.fail(job, exc)

    def _submit_retry(self, job: Job, exc: TransientSolverError) -> None:
        """A submit that surely was not processed (no connection, a gateway's 5xx, a
        provider code): queued again, at once if that opened the breaker (another
        provider takes it), else after the error's back-off."""
        opened = False
        if not isinstance(exc, NoSlotAvailable):  # a full provider is not a failing one
            opened = self.parts.breaker.failed(exc.code or type(exc).__name__)
        delay = 0.0 if opened else self.parts.settings.scaled(exc.retry_after or 5.0)
        self.parts.retries.retrying("a submit", exc)
        self.parts.queue.requeue(job, "sending", self.parts.clock() + delay)
        if isinstance(exc, NoSlotAvailable):
            # The provider holds fewer captchas of ours than the budget allows:
            # submit no more than it holds until the limit is forgotten, instead of
            # asking again and again (a retry storm of "no slot" answers).
            limit = self.parts.queue.provider_limit(
                int(self.parts.settings.scaled(PROVIDER_LIMIT_TTL) * 1000)
            )
            self.parts.observer.noted("provider_limit_learned")
            log.info(
                "engine %s: the provider has no free slot; budget now %s of %d",
                self.parts.name,
                limit,
                self.parts.queue.threads,
            )

    def _fail_over(self, job: Job, exc: CaptchaTasksError, reason: str) -> None:
        """The provider refused the submit for a reason of its own (its balance, its
        key): the job goes to the next provider of its route (:meth:`hand_on`), else it
        fails with the provider's error."""
        if not self.hand_on(job, reason, expected="sending"):
            self.parts.finisher.fail(job, exc)

    def hand_on(
        self, job: Job, reason: str, *, expected: str = "submitting", say: bool = True
    ) -> bool:
        """Give ``job``, which this provider never accepted, to the next provider of its
        route: the breaker opens and the job is queued for the rest of its route at once
        (its first submit anywhere). False, changing nothing, when its route has no
        other provider (or one provider is configured: no breaker). ``expected``: the
        job's state under this engine's claim; ``say``: log it (the caller may count)."""
        rest = self.parts.queue.route_without(job)
        if not (self.parts.breaker.enabled and rest):
            return False
        self.parts.breaker.trip(reason)
        self.parts.observer.noted("failed_over")
        if say:
            log.warning(
                "engine %s: %s: %s; moving it to %s",
                self.parts.name,
                job.task_id,
                reason,
                rest.split(",")[0],
            )
        self.parts.queue.requeue(job, expected, self.parts.clock(), route=rest)
        return True

    def _record_submitted(
        self, job: Job, captcha_id: str, at: float, first: float, claim_until: float
    ) -> bool:
        """Store the captcha id of a job just submitted. Redis may be away for a moment
        (a restart): retry while this engine's claim on the job holds, since once the id
        is lost the job can only end ``SubmitUncertain``. (Bounded by the claim's
        deadline, not a count of attempts: hence no redis-py ``Retry`` here.)"""
        delay = 0.1
        while True:
            try:
                return self.parts.queue.submitted(job, captcha_id, at, first)
            except redis.RedisError as exc:
                if self.parts.clock() + delay >= claim_until - 1.0:
                    raise
                log.warning(
                    "engine %s: storing captcha %s of %s: Redis unavailable (%s); retrying",
                    self.parts.name,
                    captcha_id,
                    job.task_id,
                    exc,
                )
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _proxy_for(self, job: Job) -> Proxy | None:
        if not job.proxy_id:
            return None
        from ..session.proxies import ProxyPool

        try:
            return ProxyPool(self.redis, self.parts.settings).get(job.proxy_id)
        except UnknownProxy:
            # Removed from the pool since: solving without it beats failing the page.
            log.warning(
                "engine %s: proxy %s is gone; submitting without", self.parts.name, job.proxy_id
            )
            return None
