"""Saying that provider calls are being retried, without flooding the log."""

from __future__ import annotations

import logging
import math
import threading
import time

from ..errors import TransientSolverError

__all__ = ["RETRY_LOG_INTERVAL", "RetryLog"]

#: Seconds (not scaled) between two log lines about retried provider calls of one engine.
RETRY_LOG_INTERVAL = 10.0


class RetryLog:
    """At most one line per :data:`RETRY_LOG_INTERVAL` for one engine's retried calls: a
    provider that is away must be seen in the log, and a burst of 502s must not flood it."""

    def __init__(self, logger: logging.Logger, name: str) -> None:
        self.logger = logger
        self.name = name
        self._lock = threading.Lock()
        self._logged_at = -math.inf
        self._unlogged = 0

    def retrying(self, what: str, exc: TransientSolverError) -> None:
        now = time.monotonic()
        with self._lock:
            if now - self._logged_at < RETRY_LOG_INTERVAL:
                self._unlogged += 1
                return
            unlogged, self._logged_at, self._unlogged = self._unlogged, now, 0
        more = f" ({unlogged} more since the last line)" if unlogged else ""
        self.logger.warning("engine %s: %s failed, retrying: %s%s", self.name, what, exc, more)
