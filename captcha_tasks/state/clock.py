"""Clocks: Redis's, for every time compared across workers, and the host's.

Claims, thread leases, deadlines, poll times, learned ready times, cookie stamps, token
expiries and lock deadlines are written by one worker and compared by another (often
inside a Lua script, against a ``now`` its caller passes). Measured by each host's own
clock, a host whose clock is 30 s ahead would take every live claim for expired,
drop every thread lease, fail every captcha as past its deadline and win every cookie
race. So they are all measured by one clock, Redis's: a :class:`RedisClock` reads
``TIME`` (the middle of the round trip), carries it forward with the monotonic clock
(which no NTP step moves) and reads it again every :data:`RESYNC` seconds in the
background; it never blocks a caller but for its very first reading. One per client
(:func:`clock_of`), so one per process for the shared-state connection.

:func:`local_time` is the host's wall clock, for what only this host compares (a
heartbeat file its probe reads, durations shown) and before Redis ever answered. Every
read of it in the package goes through this one function, so a test can move one
process's clock: it adds ``CAPTCHA_TASKS_TEST_CLOCK_OFFSET`` seconds (read once per
process), a **test aid** that simulates a host whose clock is off (the fault suite's
clock-skew row runs a worker 30 s ahead). It is not a setting: leave it unset anywhere
else.
"""

from __future__ import annotations

import functools
import logging
import math
import os
import threading
import time
from collections.abc import Callable

import redis

__all__ = ["RESYNC", "TEST_CLOCK_OFFSET_ENV", "RedisClock", "clock_of", "local_time"]

log = logging.getLogger(__name__)

#: Seconds added to this process's wall clock: a test aid (clock-skew tests), never a setting.
TEST_CLOCK_OFFSET_ENV = "CAPTCHA_TASKS_TEST_CLOCK_OFFSET"
#: Seconds between two readings of Redis's clock (the monotonic clock drifts by
#: microseconds in that time; a Redis that failed over to another host is followed).
RESYNC = 30.0
#: A reading whose round trip took longer is kept only if there is no other (its
#: error is up to half the round trip).
MAX_ROUND_TRIP = 0.5
#: Seconds before a reading that failed is tried again.
RETRY = 1.0


@functools.cache
def _test_offset() -> float:
    raw = os.environ.get(TEST_CLOCK_OFFSET_ENV, "").strip()
    return float(raw) if raw else 0.0


def local_time() -> float:
    """Seconds since the epoch by this host's clock (shifted by the test offset, if set)."""
    return time.time() + _test_offset()


class RedisClock:
    """``clock()``: seconds since the epoch by Redis's clock (``TIME``), without a round
    trip per call. Until the first reading succeeds it answers ``fallback()`` (the host's
    clock). ``monotonic``: the clock that carries a reading forward. ``wait_first``:
    the first call reads Redis's clock itself (False: in the background too, for an
    event loop that must never wait on a blocking client)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        resync: float = RESYNC,
        fallback: Callable[[], float] = local_time,
        monotonic: Callable[[], float] = time.monotonic,
        wait_first: bool = True,
    ) -> None:
        self.client = client
        self.wait_first = wait_first
        self.resync = resync
        self._fallback = fallback
        self._monotonic = monotonic
        #: (Redis's time, the monotonic time it was read at) of the last good reading.
        self._anchor: tuple[float, float] | None = None
        self._next = -math.inf
        self._lock = threading.Lock()
        self._reading = False
        self._pid = os.getpid()

    def __call__(self) -> float:
        now = self._monotonic()
        if now >= self._next:
            self._read_due(now)
        anchor = self._anchor
        if anchor is None:
            return self._fallback()
        return anchor[0] + (now - anchor[1])

    def offset(self) -> float:
        """How far the host's clock is ahead of Redis's, in seconds (behind: negative)."""
        return local_time() - self()

    @property
    def synced(self) -> bool:
        """Whether Redis's clock was read at least once."""
        return self._anchor is not None

    def _read_due(self, now: float) -> None:
        if os.getpid() != self._pid:  # a forked child: the parent's reader is not ours
            self._lock, self._reading, self._pid = threading.Lock(), False, os.getpid()
        with self._lock:
            if self._reading or now < self._next:
                return
            self._reading = True
            self._next = now + RETRY  # a failed reading is tried again this much later
        if self._anchor is None and self.wait_first:
            self._read()  # the first: the caller is about to use Redis anyway
        else:
            threading.Thread(target=self._read, name="redis-clock", daemon=True).start()

    def _read(self) -> None:
        try:
            self.sync()
        except (redis.RedisError, OSError) as exc:
            log.debug("reading Redis's clock failed: %s", exc)
        finally:
            with self._lock:
                self._reading = False

    def sync(self) -> float:
        """Read Redis's clock now (raises what the client raises); returns
        :meth:`offset`."""
        before = self._monotonic()
        seconds, micros = self.client.time()
        after = self._monotonic()
        trip = after - before
        with self._lock:
            if trip <= MAX_ROUND_TRIP or self._anchor is None:
                self._anchor = (float(seconds) + float(micros) / 1e6, (before + after) / 2)
                self._next = after + self.resync
        return self.offset()


_clocks_lock = threading.Lock()


def clock_of(client: redis.Redis) -> RedisClock:
    """The :class:`RedisClock` of ``client`` (one per client, built on first use)."""
    with _clocks_lock:
        clock: RedisClock | None = client.__dict__.get("_captcha_tasks_clock")
        if clock is None:
            clock = client.__dict__["_captcha_tasks_clock"] = RedisClock(client)
        return clock
