"""Celery's "Task ...[id] ignored" line, at DEBUG for the tasks whose ``Ignore`` is not
dropped work.

A solve's admitting execution ends with ``Ignore`` (the engine ends the task later),
and so does a ``fetch_page`` that goes on in another message under its id (replaced by
``solve | submit_challenge``, or parked on a session lock). Those tasks log what
happened themselves at INFO: ``admitted``, ``challenged``, ``parked``, and the engine
the solve's outcome. Celery's tracer logs every ``Ignore`` at INFO as "ignored" through
a log policy chosen by exception type, with no per-task hook; a filter on its logger,
scoped to those task names and to that one line, is the seam that leaves the tracer
alone. Any other task's "ignored" line (a redelivered copy Celery skips, a revoked
task) stays at INFO.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

__all__ = ["QuietIgnored", "quiet_ignored_for"]

#: Celery's task tracer's logger (``celery.app.trace``).
TRACE_LOGGER = "celery.app.trace"


class QuietIgnored(logging.Filter):
    """Lowers Celery's "ignored" record to DEBUG for the task names ``quiet`` accepts."""

    def __init__(self, quiet: Callable[[str], bool]) -> None:
        super().__init__()
        self._quiet = quiet

    def filter(self, record: logging.LogRecord) -> bool:
        data = getattr(record, "data", None)
        if (
            isinstance(data, dict)
            and data.get("description") == "ignored"
            and self._quiet(str(data.get("name", "")))
        ):
            if not logging.getLogger(record.name).isEnabledFor(logging.DEBUG):
                return False
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return True


def quiet_ignored_for(quiet: Callable[[str], bool]) -> QuietIgnored:
    """Install a :class:`QuietIgnored` on Celery's tracer logger (once per process;
    forked pool children inherit it)."""
    logger = logging.getLogger(TRACE_LOGGER)
    for existing in logger.filters:
        if isinstance(existing, QuietIgnored):
            logger.removeFilter(existing)
    found = QuietIgnored(quiet)
    logger.addFilter(found)
    return found
