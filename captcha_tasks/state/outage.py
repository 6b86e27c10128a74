"""One report per Redis outage, however many parts of a process meet it.

While Redis is away every part of a worker that uses it retries on its own (the
solve engine's loop and calls, the proxy lease heartbeat, Celery's consumer): each of
them tells :data:`REDIS_OUTAGE` instead of logging. The first failure logs one warning
(what failed, naming the URLs' variables to check); the next ones are only counted
(DEBUG); the first success after them logs one line saying Redis is back and how long
it was away. Retrying stays each part's own business: only the telling is shared.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ..redaction import mask_urls_in

__all__ = ["REDIS_OUTAGE", "RedisOutage"]

log = logging.getLogger(__name__)

#: Seconds an outage lasts at least: successes sooner do not end it (the next ones do).
SETTLE = 1.0


class RedisOutage:
    """The outage state of one process (thread-safe)."""

    def __init__(
        self, logger: logging.Logger = log, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = logger
        self.clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._failures = 0
        #: Outages reported since the process started (tests, metrics).
        self.outages = 0

    @property
    def ongoing(self) -> bool:
        return self._since is not None

    def failed(self, who: str, exc: BaseException | str) -> None:
        """``who`` could not reach Redis (``exc``): warned about once per outage."""
        with self._lock:
            first = self._since is None
            if first:
                self._since = self.clock()
                self._failures = 0
                self.outages += 1
            self._failures += 1
        error = mask_urls_in(str(exc)).rstrip(".")
        if first:
            self.log.warning(
                "Redis unavailable (%s: %s); retrying until it is back, reported once "
                "(check CAPTCHA_TASKS_REDIS_URL, or the BROKER_URL / RESULT_BACKEND / "
                "STATE_URL that overrides it)",
                who,
                error,
            )
        else:
            self.log.debug("Redis still unavailable (%s: %s)", who, error)

    def ok(self) -> None:
        """A call to Redis succeeded: the end of the outage, if one was on for at least
        :data:`SETTLE` seconds (a Redis shutting down still answers the connections it
        has for a moment after refusing new ones: no "back" between two failures)."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since = self._since
            if since is None or self.clock() - since < SETTLE:
                return
            self._since = None
            failures = self._failures
        if since is not None:
            self.log.info(
                "Redis is back after %.1f s (%d failed attempt(s) meanwhile)",
                self.clock() - since,
                failures,
            )


#: This process's reporter.
REDIS_OUTAGE = RedisOutage()
