"""A provider's circuit breaker, shared by every engine of the cluster.

With several providers configured, one that runs dry, refuses its key or stops
answering is taken out of the routes for a cool-down, so waiting requests go to the
next provider at once instead of failing or waiting on it:

- **closed**: usable. :data:`FAILURES_TO_OPEN` transient failures in a row (5xx,
  connection errors, timeouts; any engine's submits and polls) open it; an accepted
  submit ends the run of failures.
- **open** for a cool-down (:data:`COOLDOWN`, scaled by the time scale, doubling to
  :data:`MAX_COOLDOWN` while it keeps failing its probes): ``acquire.lua`` routes no
  job to it. Zero balance or a key refused twice open it at once.
- **half_open** after the cool-down: ``acquire.lua`` gives it one job, its probe; the
  probe's accepted submit closes it, a failure opens it again.

Captchas already at the provider stay with it whatever its breaker says (they are
billed there): their polls go on. All state is in ``provider:{name}:breaker``
(``breaker.lua``); with one provider there is nothing to fail over to, and the
breaker is off (:attr:`Breaker.enabled`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import redis

from ..settings import Settings
from ..state.keys import BREAKER_TTL, Keys
from ..state.scripts import run

__all__ = ["COOLDOWN", "FAILURES_TO_OPEN", "MAX_COOLDOWN", "SLOW_FACTOR", "Breaker"]

log = logging.getLogger(__name__)

#: Transient failures in a row (cluster-wide) that open a closed breaker.
FAILURES_TO_OPEN = 5
#: An answer this many times slower than the provider's learned ready time is "slow";
#: FAILURES_TO_OPEN slow answers in a row (cluster-wide) open the breaker.
SLOW_FACTOR = 3.0
#: Seconds (scaled) of the first cool-down, and the longest one.
COOLDOWN = 60.0
MAX_COOLDOWN = 600.0


class Breaker:
    """The breaker of provider ``name``, as one engine uses it."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        name: str,
        *,
        clock: Callable[[], float],
    ) -> None:
        self.redis = client
        self.name = name
        self.key = Keys(settings.key_prefix).breaker(name)
        self.clock = clock
        self.cooldown = settings.scaled(COOLDOWN)
        self.max_cooldown = settings.scaled(MAX_COOLDOWN)
        #: Off with one provider: a breaker would only hold its jobs back.
        self.enabled = len(settings.providers()) > 1
        self._slow_seen = False  # this engine counted a slow answer: a fast one resets

    def ok(self) -> None:
        """The provider accepted a submit: closes a half-open breaker."""
        self._call("ok", "")

    def failed(self, reason: str) -> bool:
        """A transient failure; True if it opened the breaker."""
        return self._call("fail", reason)

    def trip(self, reason: str) -> bool:
        """Open at once (zero balance, a refused key); True if this call opened it."""
        return self._call("trip", reason)

    def answered(self, seconds: float, typical: float | None) -> None:
        """A captcha was answered ``seconds`` after its submit; ``typical``: the
        provider's learned ready time of its type (None: not learned yet)."""
        if not self.enabled or typical is None or typical <= 0:
            return
        if seconds > SLOW_FACTOR * typical:
            self._slow_seen = True
            self._call(
                "slow",
                f"answers over {SLOW_FACTOR:g}x slower than learned "
                f"({seconds:.1f} s, typically {typical:.1f} s)",
            )
        elif self._slow_seen:
            self._slow_seen = False
            self._call("fast", "")

    def _call(self, op: str, reason: str) -> bool:
        if not self.enabled:
            return False
        args = [
            op,
            self.clock(),
            FAILURES_TO_OPEN,
            self.cooldown,
            self.max_cooldown,
            reason[:200],
            BREAKER_TTL,
        ]
        answer = run(self.redis, "breaker", [self.key], args)
        state, cooldown, changed = answer[:3]
        if int(changed):
            if state == "open":
                log.warning(
                    "provider %s: breaker open for %.1f s: %s",
                    self.name,
                    float(cooldown),
                    answer[3],
                )
            else:
                log.warning("provider %s: breaker %s", self.name, state)
        return bool(int(changed)) and state == "open"
