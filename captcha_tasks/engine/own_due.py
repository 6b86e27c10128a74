"""The polls an engine's own calls scheduled, kept in memory beside Redis's schedule.

Each call that ends (a submit, a poll) moves what is due in Redis. Rather than look at
Redis after every one of them to learn when its next poll comes due, the engine's loop
keeps what its own calls scheduled, which it knows without asking: :class:`OwnSchedule`
holds those times (one per call: a batch's unanswered captchas share their time). An entry
may be stale (another engine polled that captcha, or it ended): it costs one claim that
finds nothing. What only Redis knows (other engines' polls, claims that ran out) the
loop still looks for, at most every :data:`~captcha_tasks.engine.loop.LOOK_EVERY` s.
"""

from __future__ import annotations

import heapq
import threading

__all__ = ["OwnSchedule"]

#: Entries kept at most: past that they are forgotten (the next look finds their polls).
MAX_ENTRIES = 10_000


class OwnSchedule:
    """Times at which polls were scheduled here: thread-safe, soonest first."""

    def __init__(self) -> None:
        self._times: list[float] = []
        self._lock = threading.Lock()

    def add(self, *times: float) -> None:
        """Polls were scheduled at ``times`` (call once they are in Redis)."""
        with self._lock:
            if len(self._times) + len(times) > MAX_ENTRIES:
                self._times.clear()  # a safety valve only: the next look sees them all
            for at in times:
                heapq.heappush(self._times, at)

    def next_after(self, claimed_at: float | None = None) -> float:
        """The soonest time still ahead (inf if none). ``claimed_at``: a claim at that
        time took everything due then, so the times up to it are forgotten."""
        with self._lock:
            if claimed_at is not None:
                while self._times and self._times[0] <= claimed_at:
                    heapq.heappop(self._times)
            return self._times[0] if self._times else float("inf")
