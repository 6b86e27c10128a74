"""The observer fan-out: every event to each observer, the installed one looked up late."""

from __future__ import annotations

import logging

import pytest

from captcha_tasks.engine.observer import (
    INSTALLED,
    EngineStats,
    FanOut,
    NullObserver,
    set_solve_observer,
    solve_observer,
)
from captcha_tasks.errors import (
    CaptchaTasksError,
    CaptchaUnsolvable,
    NoSlotAvailable,
    SubmitUncertain,
)


class Recorder(NullObserver):
    def __init__(self) -> None:
        self.events: list[tuple[object, ...]] = []

    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        self.events.append(("submitted", captcha_type, error))

    def polled(self) -> None:
        self.events.append(("polled",))

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        self.events.append(("solved", captcha_type, source, seconds, polls))

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        self.events.append(("failed", captcha_type, source, error.code))

    def noted(self, event: str, n: int = 1) -> None:
        self.events.append(("noted", event, n))


class Broken(NullObserver):
    def polled(self) -> None:
        raise RuntimeError("metrics backend away")


def test_every_observer_gets_every_event() -> None:
    first, second = Recorder(), Recorder()
    fan = FanOut(first, second)
    unsolvable = CaptchaUnsolvable("no", "ERROR_CAPTCHA_UNSOLVABLE")
    fan.submitted("image")
    fan.polled()
    fan.solved("image", "api", seconds=1.5, polls=2)
    fan.failed("image", "fill", unsolvable)
    fan.noted("paused", 3)
    expected = [
        ("submitted", "image", None),
        ("polled",),
        ("solved", "image", "api", 1.5, 2),
        ("failed", "image", "fill", "ERROR_CAPTCHA_UNSOLVABLE"),
        ("noted", "paused", 3),
    ]
    assert first.events == second.events == expected


def test_an_observer_that_raises_does_not_stop_the_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    after = Recorder()
    fan = FanOut(Broken(), after)
    with caplog.at_level(logging.WARNING, logger="captcha_tasks.engine.observer"):
        fan.polled()
        fan.polled()
    assert after.events == [("polled",), ("polled",)]
    assert len([r for r in caplog.records if "failed to record" in r.getMessage()]) == 1


def test_the_installed_observer_is_looked_up_at_each_event() -> None:
    # The engine builds its fan-out before a worker's metrics step installs Prometheus.
    fan = FanOut(INSTALLED)
    assert isinstance(solve_observer(), NullObserver)
    recorder = Recorder()
    previous = set_solve_observer(recorder)
    try:
        fan.solved("turnstile", "pool")
    finally:
        set_solve_observer(previous)
    fan.solved("turnstile", "pool")  # the no-op again
    assert recorder.events == [("solved", "turnstile", "pool", None, None)]


def test_engine_stats_count_the_engines_events() -> None:
    stats = EngineStats()
    stats.submitted("image")
    stats.submitted("image", SubmitUncertain("maybe", "SUBMIT_OUTCOME_UNKNOWN"))
    stats.submitted("image", NoSlotAvailable("busy", "ERROR_NO_SLOT_AVAILABLE", 5.0))
    stats.polled()
    stats.solved("image", "fill", seconds=2.0, polls=3)
    stats.failed("image", "api", CaptchaUnsolvable("no", "ERROR_CAPTCHA_UNSOLVABLE"))
    stats.noted("paused")
    assert stats.snapshot() == {
        "submitted": 1,
        "submit_uncertain": 1,
        "submit_retry:ERROR_NO_SLOT_AVAILABLE": 1,
        "poll_requests": 1,
        "solved": 1,
        "polls_of_solved": 3,
        "pooled": 1,
        "failed:ERROR_CAPTCHA_UNSOLVABLE": 1,
        "paused": 1,
    }
