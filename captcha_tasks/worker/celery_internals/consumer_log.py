"""Celery's consumer's reports of a lost broker, handed to one outage report.

Celery's consumer logs each failed reconnection (an ERROR, every 2-16 s), the lost
connection (a WARNING), and "Connected to" when it is back. A worker of captcha_tasks
reports an outage of Redis once for all its parts (:data:`~captcha_tasks.state.outage.
REDIS_OUTAGE`: one warning when it begins, one line when it ends), so a filter on the
consumer's loggers hands those lines there instead; the retries themselves are
Celery's, unchanged. Celery has no hook for connection events but these log lines (no
upstream issue: would need a signal on connection loss and recovery).

This relies on the assumption ``celery-consumer-log`` (:mod:`.contracts`): the lines
start with Celery's ``CONNECTION_RETRY`` and ``CONNECTION_ERROR`` texts, and the
connection step logs "Connected to". The filter reads the formatted message, so it
holds for Celery 5.5 and 5.6 (the text as the record's format) and 5.7 (the text as
its first argument). Where it does not hold, no filter is installed and Celery's own
lines stay as Celery logs them, which the worker says once.
"""

from __future__ import annotations

import logging

from ...state.outage import REDIS_OUTAGE
from .contracts import holds

__all__ = ["CONSUMER_LOGGERS", "ConsumerOutageFilter", "install_consumer_filter"]

#: Celery's consumer's logger and its connection step's.
CONSUMER_LOGGERS = ("celery.worker.consumer.consumer", "celery.worker.consumer.connection")

LOST = "consumer: Connection to broker lost"
CANNOT_CONNECT = "consumer: Cannot connect to"
CONNECTED = "Connected to"


class ConsumerOutageFilter(logging.Filter):
    """Hands Celery's consumer's reports of a lost broker to ``REDIS_OUTAGE`` (one
    warning per outage for the whole worker) instead of logging each retry."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record that does not format is not one of these
            return True
        if message.startswith(CANNOT_CONNECT):
            args = record.args if isinstance(record.args, tuple) else ()
            REDIS_OUTAGE.failed("the consumer", str(args[1]) if len(args) > 1 else message)
            return False
        if message.startswith(LOST):
            REDIS_OUTAGE.failed("the consumer", _exception(record) or "connection lost")
            return False
        if message.startswith(CONNECTED) and REDIS_OUTAGE.ongoing:
            REDIS_OUTAGE.ok()  # says that Redis is back, once
            return False
        return True


def _exception(record: logging.LogRecord) -> BaseException | None:
    """The exception a record carries: its ``exc_info`` (Celery 5.5, 5.6) or an argument
    (Celery 5.7 logs it as ``%r``)."""
    if record.exc_info and record.exc_info[1] is not None:
        return record.exc_info[1]
    args = record.args if isinstance(record.args, tuple) else ()
    return next((a for a in args if isinstance(a, BaseException)), None)


def install_consumer_filter() -> None:
    """Once per process, where ``celery-consumer-log`` holds."""
    if not holds("celery-consumer-log"):
        return
    for name in CONSUMER_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, ConsumerOutageFilter) for f in logger.filters):
            logger.addFilter(ConsumerOutageFilter())
