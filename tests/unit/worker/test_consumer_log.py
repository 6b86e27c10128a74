"""Celery's consumer's lines about a lost broker reach the worker's one outage report,
in the form each supported Celery logs them (celery_internals.consumer_log)."""

from __future__ import annotations

import logging

import pytest
from celery.worker.consumer.consumer import CONNECTION_ERROR, CONNECTION_RETRY

from captcha_tasks.state.outage import RedisOutage
from captcha_tasks.worker.celery_internals import consumer_log
from tests.support.clock import ManualClock

LOGGER = "celery.worker.consumer.consumer"


def _record(
    msg: str, args: tuple[object, ...], exc: BaseException | None = None
) -> logging.LogRecord:
    info = (type(exc), exc, None) if exc is not None else None
    return logging.LogRecord(LOGGER, logging.WARNING, __file__, 1, msg, args, info)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def outage(monkeypatch: pytest.MonkeyPatch, clock: ManualClock) -> RedisOutage:
    fresh = RedisOutage(clock=clock)
    monkeypatch.setattr(consumer_log, "REDIS_OUTAGE", fresh)
    return fresh


@pytest.mark.parametrize(
    "lost",
    [
        # Celery 5.5 and 5.6: the text is the format, the exception its exc_info.
        _record(CONNECTION_RETRY, (), ConnectionError("Error 111")),
        # Celery 5.7: warn('%s (%r)', CONNECTION_RETRY, exc).
        _record("%s (%r)", (CONNECTION_RETRY, ConnectionError("Error 111"))),
    ],
    ids=["celery-5.5-5.6", "celery-5.7"],
)
def test_a_lost_broker_is_one_outage_and_connected_ends_it(
    outage: RedisOutage,
    clock: ManualClock,
    lost: logging.LogRecord,
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet = consumer_log.ConsumerOutageFilter()
    retry = _record(CONNECTION_ERROR, ("redis://h:6379//", "Error 111", "Trying again in 2s"))
    with caplog.at_level(logging.DEBUG):
        assert quiet.filter(lost) is False
        assert quiet.filter(retry) is False
    assert outage.ongoing and outage.outages == 1
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "Error 111" in warned[0]
    clock.now = 5.0  # past the outage's settle time
    back = _record("Connected to %s", ("redis://h:6379//",))
    assert quiet.filter(back) is False
    assert not outage.ongoing
    # Once Redis is back, "Connected to" and any other line pass through.
    assert quiet.filter(_record("Connected to %s", ("redis://h:6379//",))) is True
    assert quiet.filter(_record("something else %s", ("x",))) is True
