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
task) stays at INFO. The filter reads the record's ``data`` (the tracer's fields); a
record without it passes unchanged.

Two more touches of Celery's tracer, each with its assumption (:mod:`.contracts`):

- ``celery-log-success``: Celery logs every task's return value at INFO; a solve's is a
  single-use token. The success line becomes ``LOG_SUCCESS`` without it. Where that
  module global is gone, a filter on the tracer's logger blanks ``return_value`` in
  every record that carries one (no upstream issue: would need a setting).
- ``celery-exception-info``: the tracer records how every execution ended through the
  module global ``ExceptionInfo``, ``Ignore`` too, formatting and pickling its whole
  traceback; for a solve's admitting execution that would be most of its cost.
  :class:`IgnoreInfo` keeps ``Ignore``'s record short. Where the global is gone, the
  tracer keeps its own record (slower, the same outcome).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[import-untyped]
from celery.exceptions import Ignore

from .contracts import holds

__all__ = [
    "HiddenReturnValue",
    "IgnoreInfo",
    "QuietIgnored",
    "install_tracer_hooks",
    "quiet_ignored_for",
]

#: Celery's success line without the return value.
LOG_SUCCESS = "Task %(name)s[%(id)s] succeeded in %(runtime)ss"

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


class HiddenReturnValue(logging.Filter):
    """Blanks ``return_value`` in the tracer's records (where ``LOG_SUCCESS`` cannot be
    changed): results are for the backend, not for log files."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, dict) and "return_value" in record.args:
            record.args = {**record.args, "return_value": "(not logged)"}
        return True


class IgnoreInfo(ExceptionInfo):  # type: ignore[misc]
    """billiard's ``ExceptionInfo``, but for ``Ignore``: control flow, never logged with a
    traceback, whose record keeps the exception and drops the frames (each frame's code
    copied with all its positions, twice, then pickled: ~40 kB to the main process,
    which only acknowledges the message). Every other exception is recorded in full."""

    def __init__(self, exc_info: Any = None, internal: bool = False) -> None:
        kind, exception, tb = exc_info or sys.exc_info()
        if not isinstance(exception, Ignore):
            super().__init__((kind, exception, tb), internal)
            return
        self.type, self.tb, self.internal = kind, None, internal
        self.traceback = f"{type(exception).__name__}: {exception}\n"
        self.exception = ExceptionWithTraceback(exception, self.traceback)


def install_tracer_hooks(quiet: Callable[[str], bool]) -> None:
    """Set up Celery's tracer for a worker of captcha_tasks (once per process; forked
    pool children inherit it): no return values in its log, a short record of
    ``Ignore``, and the "ignored" line at DEBUG for the task names ``quiet`` accepts."""
    from celery.app import trace

    logger = logging.getLogger(TRACE_LOGGER)
    if holds("celery-log-success"):
        trace.LOG_SUCCESS = LOG_SUCCESS
    elif not any(isinstance(f, HiddenReturnValue) for f in logger.filters):
        logger.addFilter(HiddenReturnValue())
    if holds("celery-exception-info"):
        trace.ExceptionInfo = IgnoreInfo
    quiet_ignored_for(quiet)
