"""The pause of an engine whose key the provider refused.

A refused key is most likely this worker's own configuration (a bad release
mid-rollout), not the request's: the engine steps aside for :data:`KEY_REFUSED_PAUSE`
and lets the fleet's other engines take the work, then resumes once the provider takes
its key again (one balance call). Each paused engine marks itself in
``{prefix}key_refused:{engine}``; when no live worker is left whose key is not refused,
nobody can submit or poll, so waiting and polling jobs fail at once with the provider's
refusal instead of sitting out their deadlines.

Which workers are alive is the fleet's knowledge: the engine is given a
:data:`LiveWorkers` query (in a worker,
:func:`captcha_tasks.fleet.heartbeat.live_workers`) rather than reading beats itself.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

import redis

from ..errors import CaptchaTasksError, InvalidApiKey, SolverError
from ..provider import Provider
from ..settings import Settings
from ..settings.providers import DEFAULT_PROVIDER
from ..state.keys import Keys
from .jobs import Job
from .observer import SolveObserver
from .queue import SolveQueue

__all__ = ["KEY_REFUSED_PAUSE", "KeyRefusal", "LiveWorkers"]

log = logging.getLogger(__name__)

#: Seconds (scaled) an engine whose key the provider refused stays out of the work.
KEY_REFUSED_PAUSE = 30.0
#: Jobs ended per turn when every key is refused (bounded: a turn stays short).
FAIL_BATCH = 50
FAIL_ROUNDS = 20

#: The names of the workers whose liveness beat is current (this one's included).
LiveWorkers = Callable[[], Sequence[str]]


class KeyRefusal:
    """One engine's refusal state: paused or not, until when, and why."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        name: str,
        *,
        live_workers: LiveWorkers,
        observer: SolveObserver,
        clock: Callable[[], float],
        provider: str = DEFAULT_PROVIDER,
    ) -> None:
        self.redis = client
        self.keys = Keys(settings.key_prefix)
        self.name = name
        # Marks are counted per provider: one provider's refused key says nothing of
        # another's (several providers: one engine each per worker).
        self._prefix = self.keys.key_refused_prefix_of(provider)
        self._mark = f"{self._prefix}{name}"
        self.live_workers = live_workers
        self.observer = observer
        self.clock = clock
        self.pause_s = settings.scaled(KEY_REFUSED_PAUSE)
        self._mark_ttl = max(1, math.ceil(2 * self.pause_s + settings.heartbeat_interval))
        self.paused_until = 0.0
        self.refusal: InvalidApiKey | None = None

    @property
    def paused(self) -> bool:
        """Refused and not yet accepted again: take no new work."""
        return bool(self.paused_until)

    def pause(self, exc: InvalidApiKey, *, said: bool = False) -> None:
        """The provider refused the key: step aside (again) for a pause. Said once per
        refusal (``said``: the caller has said it), not once per pause: a key that stays
        refused is asked about again every pause, quietly."""
        if self.refusal is None and not said:
            log.error(
                "engine %s: the provider refused this worker's key (%s); it takes no "
                "new work until the provider accepts the key again (asked every %.1f s)",
                self.name,
                exc.code,
                self.pause_s,
            )
        elif self.clock() >= self.paused_until:
            log.debug("engine %s: the key is still refused (%s)", self.name, exc.code)
        self.observer.noted("paused")
        self.paused_until = self.clock() + self.pause_s
        self.refusal = exc
        self.redis.set(self._mark, exc.code or "refused", ex=self._mark_ttl)

    def holds(self, provider: Provider) -> bool:
        """Whether the pause holds now: during it, and after it while the provider
        still refuses the key (asked once per pause, with a balance call)."""
        if not self.paused:
            return False
        if self.clock() < self.paused_until:
            return True
        try:
            provider.balance()
        except InvalidApiKey as exc:
            self.pause(exc)
            return True
        except SolverError:
            pass  # other trouble is for the calls themselves to meet and handle
        log.info("engine %s: the provider accepts this worker's key again", self.name)
        self.paused_until = 0.0
        self.refusal = None
        self.redis.delete(self._mark)
        return False

    def others_alive(self) -> bool:
        """Whether another worker beats whose key the provider has not refused (as far
        as the ``key_refused`` marks say). Counts, not names: engines are named after
        their worker but marks and beats are not matched one to one."""
        beats = len(self.live_workers())
        refused = sum(1 for _ in self.redis.scan_iter(match=f"{self._prefix}*", count=100))
        mine = 1 if self.paused else 0
        return beats - 1 > refused - mine

    def fail_all_if_alone(
        self,
        queue: SolveQueue,
        fail: Callable[[Job, CaptchaTasksError], bool],
        report_again: Callable[[Job, dict[str, str]], None],
        hand_on: Callable[[Job], bool] | None = None,
    ) -> int:
        """Paused, and no other live worker has a key the provider takes: nobody can
        submit to this provider or poll it. A job not yet sent goes to the next
        provider of its route (``hand_on``, True if it did); the others, and those
        whose route has no other provider, end now with the refusal (``fail``); ended
        ones a stopped engine left are reported (``report_again``). Returns the jobs
        failed."""
        if self.refusal is None or self.others_alive():
            return 0
        error = self.refusal
        ended = moved = 0
        for _ in range(FAIL_ROUNDS):
            now = self.clock()
            found = queue.acquire(now, FAIL_BATCH) + queue.claim(now, FAIL_BATCH)
            if not found:
                break
            for job, fields in found:
                if job.state in ("done", "failed"):
                    report_again(job, fields)
                elif job.state == "submitting" and hand_on is not None and hand_on(job):
                    moved += 1
                elif fail(job, error):
                    ended += 1
        if moved:
            log.warning(
                "engine %s: every live worker's key is refused; moved %d job(s) to the "
                "next provider of their route",
                self.name,
                moved,
            )
        if ended:
            self.observer.noted("failed_every_key_refused", ended)
            log.error(
                "engine %s: every live worker's key is refused; failed %d job(s) with %s",
                self.name,
                ended,
                error.code,
            )
        return ended

    def forget(self) -> None:
        """On stop: take this engine's mark away (else it expires on its own)."""
        if self.refusal is not None:
            self.redis.delete(self._mark)
