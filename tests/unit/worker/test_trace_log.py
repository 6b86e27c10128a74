"""Celery's "ignored" line goes to DEBUG for the tasks that log their own Ignore, and
only for them."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from celery.app.trace import LOG_IGNORED

from captcha_tasks.worker.celery_internals.tracer import (
    TRACE_LOGGER,
    QuietIgnored,
    quiet_ignored_for,
)

QUIET = {"captcha_tasks.solve_image", "captcha_tasks.fetch_page"}


def _record(name: str, description: str) -> logging.LogRecord:
    """The record Celery's tracer logs for a task's end (its ``_log_error``)."""
    data = {"id": "t-1", "name": name, "description": description}
    record = logging.LogRecord(
        TRACE_LOGGER, logging.INFO, __file__, 1, LOG_IGNORED.strip(), (data,), None
    )
    record.data = data
    return record


@pytest.fixture
def trace_logger() -> Iterator[logging.Logger]:
    logger = logging.getLogger(TRACE_LOGGER)
    kept, level = list(logger.filters), logger.level
    yield logger
    logger.filters[:] = kept
    logger.setLevel(level)


def test_a_quiet_tasks_ignored_line_is_debug_and_others_stay(trace_logger: logging.Logger) -> None:
    quiet = QuietIgnored(QUIET.__contains__)
    trace_logger.setLevel(logging.DEBUG)
    solve = _record("captcha_tasks.solve_image", "ignored")
    assert quiet.filter(solve) and solve.levelno == logging.DEBUG
    assert solve.getMessage() == "Task captcha_tasks.solve_image[t-1] ignored"
    other = _record("myapp.task", "ignored")
    assert quiet.filter(other) and other.levelno == logging.INFO
    rejected = _record("captcha_tasks.solve_image", "rejected")
    assert quiet.filter(rejected) and rejected.levelno == logging.INFO
    plain = logging.LogRecord(TRACE_LOGGER, logging.INFO, __file__, 1, "no data", (), None)
    assert quiet.filter(plain) and plain.levelno == logging.INFO


def test_at_info_the_quiet_line_is_dropped(
    trace_logger: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    quiet_ignored_for(QUIET.__contains__)
    quiet_ignored_for(QUIET.__contains__)  # installed twice: one filter
    assert sum(isinstance(f, QuietIgnored) for f in trace_logger.filters) == 1
    with caplog.at_level(logging.INFO, logger=TRACE_LOGGER):
        for name in ("captcha_tasks.fetch_page", "myapp.task"):
            data = {"id": "t-1", "name": name, "description": "ignored"}
            trace_logger.info(LOG_IGNORED, data, extra={"data": data})
    assert [r.getMessage() for r in caplog.records] == ["Task myapp.task[t-1] ignored"]
