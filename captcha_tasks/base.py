"""Custom Celery Task base classes.

Per-process resources (the solver client and its HTTP session) are built lazily
on first use in the process that uses them, so prefork children never share a
connection opened before the fork.
"""

from __future__ import annotations

import os

from .errors import ChallengeRejected, InvalidTaskInput, TransientSolverError, UnknownProxy
from .redaction import RedactedTask
from .settings import Settings, get_settings
from .solver import SolverClient

__all__ = ["SolverTask"]


class SolverTask(RedactedTask):
    """A task that talks to the solver provider (arguments shown redacted: see
    :mod:`.redaction`)."""

    abstract = True
    #: Refusals at the edge are normal operation: the worker logs them in one line
    #: ("raised expected"), without a traceback; the caller still gets the error.
    throws = (InvalidTaskInput, UnknownProxy, ChallengeRejected)
    _solver: SolverClient | None = None
    _solver_pid: int | None = None

    @property
    def settings(self) -> Settings:
        return get_settings()

    @property
    def solver(self) -> SolverClient:
        if self._solver is None or self._solver_pid != os.getpid():
            self._solver = SolverClient.from_settings(self.settings)
            self._solver_pid = os.getpid()
        return self._solver

    def retry_transient(self, exc: TransientSolverError) -> Exception:
        """``raise self.retry_transient(exc)``: retry after the error's own back-off
        (scaled by ``CAPTCHA_TASKS_TIME_SCALE``), within the task's ``max_retries``."""
        from .celeryconfig import MAX_COUNTDOWN_SECONDS

        # Capped so a countdown never nears the broker's visibility timeout.
        countdown = min(self.settings.scaled(exc.retry_after or 5.0), MAX_COUNTDOWN_SECONDS)
        result: Exception = self.retry(exc=exc, countdown=countdown)
        return result
