"""A clock a test moves by hand, for code that takes its clock as an argument."""

from __future__ import annotations

__all__ = ["ManualClock"]


class ManualClock:
    """Called, it answers ``now``; ``sleep`` moves it on (for code that sleeps on it)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
