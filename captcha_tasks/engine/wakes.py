"""Wake-ups pushed to Redis (an admission, a thread freed by another engine), turned
into kicks of an engine's loop.

The loop sleeps by its own clock (an ``Event`` wait), never in a blocking Redis
command's timeout: redis-server checks those at its ``hz`` tick (100 ms by default),
so on an idle server a 10 ms ``BLPOP`` returns up to 100 ms late, and every timed
poll with it. A listener thread blocks in Redis instead and kicks the loop when a
wake-up comes; it pops them only while the loop sleeps with no call of its own in
flight (a busy loop looks at Redis every ``LOOK_EVERY`` or so anyway, and the wake-ups it
leaves go to an idle engine).
"""

from __future__ import annotations

import threading

import redis

from .queue import SolveQueue

__all__ = ["WAKE_WAIT", "WakeListener"]

#: Seconds the listener blocks in Redis at a time (about how long a stop may wait for
#: it; a wake-up itself is seen at once).
WAKE_WAIT = 0.25


class WakeListener:
    """One engine's listener: :meth:`sleep` is the loop's idle wait, :meth:`take` tells
    whether a wake-up came since the last look."""

    def __init__(
        self, queue: SolveQueue, kick: threading.Event, stop: threading.Event, name: str
    ) -> None:
        self.queue = queue
        self._kick = kick
        self._stop = stop
        self._woken = threading.Event()  # popped a wake-up the loop has not taken
        self._listening = threading.Event()  # the loop sleeps with no call in flight
        self._thread = threading.Thread(target=self._run, name=f"{name}-wake", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout: float) -> None:
        """Wait for the thread once the engine's stop is set (in a wait of at most
        :data:`WAKE_WAIT`)."""
        if self._thread.is_alive():
            self._thread.join(min(timeout, WAKE_WAIT + 1.0))

    @property
    def woken(self) -> bool:
        return self._woken.is_set()

    def take(self) -> bool:
        """True, once, if a wake-up came since the last take."""
        if not self._woken.is_set():
            return False
        self._woken.clear()
        return True

    def sleep(self, seconds: float) -> None:
        """The loop's wait with no call in flight: ``seconds`` at most, cut short by a
        kick (a call of its own, or a wake-up popped meanwhile)."""
        self._listening.set()
        try:
            self._kick.wait(seconds)
        finally:
            self._listening.clear()

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            if not self._listening.wait(WAKE_WAIT):
                continue
            try:
                woken = self.queue.wait_for_wake(WAKE_WAIT)
                backoff = 0.1
            except redis.RedisError:
                # The loop logs Redis being away; this thread only waits it out.
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            if woken:
                self._woken.set()
                self._kick.set()
