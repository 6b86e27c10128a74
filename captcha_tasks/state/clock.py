"""Clocks: the host's, and (for everything compared across workers) Redis's.

:func:`local_time` is the host's wall clock. Every read of it in the package goes
through this one function, so a test can move one process's clock: it adds
``CAPTCHA_TASKS_TEST_CLOCK_OFFSET`` seconds (read once per process), a **test aid**
that simulates a host whose clock is off (the fault suite's clock-skew row runs a
worker 30 s ahead). It is not a setting: leave it unset anywhere else.
"""

from __future__ import annotations

import functools
import os
import time

__all__ = ["TEST_CLOCK_OFFSET_ENV", "local_time"]

#: Seconds added to this process's wall clock: a test aid (clock-skew tests), never a setting.
TEST_CLOCK_OFFSET_ENV = "CAPTCHA_TASKS_TEST_CLOCK_OFFSET"


@functools.cache
def _test_offset() -> float:
    raw = os.environ.get(TEST_CLOCK_OFFSET_ENV, "").strip()
    return float(raw) if raw else 0.0


def local_time() -> float:
    """Seconds since the epoch by this host's clock (shifted by the test offset, if set)."""
    return time.time() + _test_offset()
