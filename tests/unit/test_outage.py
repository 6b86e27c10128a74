"""One report per Redis outage (captcha_tasks.state.outage)."""

from __future__ import annotations

import logging

import pytest

from captcha_tasks.state.outage import SETTLE, RedisOutage
from tests.support.clock import ManualClock


def _said(caplog: pytest.LogCaptureFixture, level: int) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level]


def test_an_outage_is_warned_about_once_and_its_end_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock(100.0)
    outage = RedisOutage(logging.getLogger("test.outage"), clock)
    caplog.set_level(logging.DEBUG, "test.outage")
    outage.ok()  # nothing on: nothing said
    for who in ("engine e", "the consumer", "proxy lease heartbeat of w", "engine e"):
        outage.failed(who, ConnectionError("Error 111 connecting to redis://:pw@h:6379/0."))
        clock.now += 2.0
    assert outage.ongoing
    warned = _said(caplog, logging.WARNING)
    assert len(warned) == 1
    assert "engine e" in warned[0] and "CAPTCHA_TASKS_REDIS_URL" in warned[0]
    assert "pw" not in " ".join(r.getMessage() for r in caplog.records)
    assert len(_said(caplog, logging.DEBUG)) == 3
    outage.ok()
    outage.ok()
    assert _said(caplog, logging.INFO) == [
        "Redis is back after 8.0 s (4 failed attempt(s) meanwhile)"
    ]
    assert not outage.ongoing and outage.outages == 1
    # The next outage is reported again.
    outage.failed("engine e", "refused")
    assert len(_said(caplog, logging.WARNING)) == 2


def test_a_success_right_after_the_first_failure_does_not_end_the_outage(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A Redis shutting down still answers its open connections for a moment.
    clock = ManualClock(100.0)
    outage = RedisOutage(logging.getLogger("test.outage"), clock)
    caplog.set_level(logging.DEBUG, "test.outage")
    outage.failed("the consumer", "refused")
    clock.now += SETTLE / 2
    outage.ok()
    outage.failed("engine e", "refused")
    assert outage.ongoing
    assert _said(caplog, logging.INFO) == []
    assert len(_said(caplog, logging.WARNING)) == 1
    clock.now += SETTLE
    outage.ok()
    assert len(_said(caplog, logging.INFO)) == 1
