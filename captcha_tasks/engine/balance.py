"""The provider's balance, checked at most once a minute across the whole cluster.

With ``CAPTCHA_TASKS_BALANCE_FLOOR`` set (it turns the watch on: without it, no worker
checks the balance by itself), every worker runs a :class:`BalanceWatch` thread
beside its engine (the balance is an HTTP call of up to ``CAPTCHA_TASKS_HTTP_TIMEOUT``,
which must hold neither the engine's provider calls nor the consumer's event loop).
Each turn it tries to take the provider's check key (``Keys.balance_check``, ``SET NX``
with a TTL of the interval): the one engine that gets it asks the provider and stores the answer
(``Keys.balance``, with a TTL), so N workers still make one call a minute.

Below ``CAPTCHA_TASKS_BALANCE_FLOOR`` it logs one warning per crossing: the stored
``low`` flag says whether the last check was below already, whichever engine made it.
A failed check is no error for the worker: it keeps the last value, marked ``stale``.
Log lines name the provider (its configured name), never its key.
"""

from __future__ import annotations

import dataclasses
import decimal
import logging
import threading
from collections.abc import Callable

import redis

from ..errors import CaptchaTasksError
from ..provider import Provider
from ..settings import Settings
from ..state.clock import clock_of
from ..state.keys import Keys
from .spend import DEFAULT_PROVIDER

__all__ = ["BALANCE_TTL", "CHECK_INTERVAL_S", "Balance", "BalanceWatch", "read_balance"]

log = logging.getLogger(__name__)

#: Seconds between two balance checks, cluster-wide.
CHECK_INTERVAL_S = 60
#: Seconds a stored balance lives without a check (then status shows none).
BALANCE_TTL = 3_600
#: Seconds between a worker's tries to take the check (a cheap SET NX).
_TRY_EVERY_S = 5.0


@dataclasses.dataclass(frozen=True)
class Balance:
    """A provider's last known balance: ``stale`` when the checks since have failed."""

    usd: decimal.Decimal | None
    checked_at: float | None
    stale: bool

    def below(self, floor: decimal.Decimal | None) -> bool:
        return floor is not None and self.usd is not None and self.usd < floor


def read_balance(client: redis.Redis, keys: Keys, provider: str) -> Balance | None:
    """The stored balance of ``provider``, or None if no check stored one."""
    fields = client.hgetall(keys.balance(provider))
    if not fields:
        return None
    usd = fields.get("usd")
    checked = fields.get("checked_at")
    return Balance(
        usd=decimal.Decimal(str(usd)) if usd else None,
        checked_at=float(checked) if checked else None,
        stale=fields.get("stale") == "1",
    )


class BalanceWatch:
    """Checks one provider's balance when the cluster's check is due (module docstring)."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        provider: Provider,
        *,
        name: str = DEFAULT_PROVIDER,
        interval: float = CHECK_INTERVAL_S,
        clock: Callable[[], float] | None = None,
    ) -> None:
        self.redis = client
        self.keys = Keys(settings.key_prefix)
        self.provider = provider
        self.name = name
        self.floor = settings.provider_config(name).balance_floor
        self.interval = interval
        self.clock = clock or clock_of(client)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> bool:
        """Check the balance if the cluster's check is due and this watch took it."""
        ms = max(1, int(self.interval * 1000))
        if not self.redis.set(self.keys.balance_check(self.name), "1", nx=True, px=ms):
            return False
        self.check()
        return True

    def check(self) -> None:
        """Ask the provider and store what it says (or mark the last value stale)."""
        key = self.keys.balance(self.name)
        try:
            usd = self.provider.balance()
        except Exception as exc:  # any failure: the worker solves on regardless
            code = (exc.code if isinstance(exc, CaptchaTasksError) else None) or type(exc).__name__
            log.info(
                "balance of provider %s: check failed (%s); keeping the last value", self.name, code
            )
            pipe = self.redis.pipeline(transaction=True)
            pipe.hset(key, "stale", "1")
            pipe.expire(key, BALANCE_TTL)
            pipe.execute()
            return
        low = self.floor is not None and usd < self.floor
        was_low = self.redis.hget(key, "low") == "1"
        pipe = self.redis.pipeline(transaction=True)
        pipe.hset(
            key,
            mapping={
                "usd": str(usd),
                "checked_at": repr(self.clock()),
                "stale": "0",
                "low": "1" if low else "0",
            },
        )
        pipe.expire(key, BALANCE_TTL)
        pipe.execute()
        if low and not was_low:
            log.warning(
                "balance of provider %s is %s USD, below the floor of %s USD",
                self.name,
                usd,
                self.floor,
            )
        elif was_low and not low:
            log.info("balance of provider %s is %s USD, no longer below the floor", self.name, usd)

    # -- its thread ------------------------------------------------------------------------

    def start(self) -> BalanceWatch:
        self._thread = threading.Thread(target=self._run, name=f"balance-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except (redis.RedisError, OSError) as exc:
                log.debug("balance of provider %s: Redis unavailable (%s)", self.name, exc)
            except Exception:
                log.exception("balance of provider %s: unexpected error", self.name)
            self._stop.wait(min(_TRY_EVERY_S, self.interval))
