"""What solves cost: the figure a result carries, and the spend counted in Redis.

**A result's cost** (:func:`price_of`): the provider's own figure where it sends one
(``cost_source`` ``provider``), else the configured price per 1000 of the type /
1000 (``CAPTCHA_TASKS_PRICES``, ``configured``), else none. Decimal throughout.

**Spend** is counted per provider (by its configured name, :data:`DEFAULT_PROVIDER`
while there is one), per type and per minute in Redis (``Keys.spend``, written by
``finish.lua`` together with the job's end): in nano-USD, integers that add up
exactly. The last hour is the sum of the last 60 buckets (:class:`SpendLedger`).

**Observers**: the worker's metrics step installs one (:func:`set_spend_observer`)
to count spend and solves by provider into Prometheus; the engine calls it once per
solve it ended.
"""

from __future__ import annotations

import dataclasses
import decimal
import logging
from collections.abc import Mapping
from typing import Literal, Protocol

import redis

from ..settings.providers import DEFAULT_PROVIDER
from ..state.keys import Keys

__all__ = [
    "DEFAULT_PROVIDER",
    "MINUTES_PER_HOUR",
    "CostSource",
    "Spend",
    "SpendLedger",
    "SpendObserver",
    "from_nano",
    "minute_of",
    "price_of",
    "set_spend_observer",
    "tell_spent",
    "to_nano",
    "total",
    "usd_text",
]

log = logging.getLogger(__name__)

MINUTES_PER_HOUR = 60
_NANO = decimal.Decimal("1e-9")
_THOUSAND = decimal.Decimal(1000)

CostSource = Literal["provider", "configured"]


#: A configured provider: its name (metrics, status, keys), its protocol (the
#: ``CAPTCHA_TASKS_PROVIDER`` value results name), its thread budget, key, types, prices.
def price_of(
    captcha_type: str,
    provider_cost: decimal.Decimal | None,
    prices: Mapping[str, decimal.Decimal],
) -> tuple[decimal.Decimal | None, CostSource | None]:
    """The cost of one solve of ``captcha_type`` and where the figure comes from."""
    if provider_cost is not None:
        return provider_cost, "provider"
    per_thousand = prices.get(captcha_type)
    if per_thousand is None:
        return None, None
    return per_thousand / _THOUSAND, "configured"


def to_nano(cost: decimal.Decimal | None) -> int:
    """USD -> whole nano-USD (finer figures round half-even; none is 0)."""
    if cost is None:
        return 0
    return int((cost / _NANO).to_integral_value(rounding=decimal.ROUND_HALF_EVEN))


def from_nano(nano: int) -> decimal.Decimal:
    """Nano-USD -> USD, without trailing zeros (``2990000`` -> ``0.00299``)."""
    return decimal.Decimal(nano).scaleb(-9).normalize() if nano else decimal.Decimal(0)


def minute_of(at: float) -> int:
    """The spend bucket of epoch second ``at``."""
    return int(at // 60)


@dataclasses.dataclass(frozen=True)
class Spend:
    """One solve to count: who solved it, its type, when, and its cost (None: unknown)."""

    provider: str
    captcha_type: str
    at: float
    cost: decimal.Decimal | None


class SpendLedger:
    """Reads the per-minute spend buckets of providers."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self.redis = client
        self.keys = keys

    def last_hour(self, provider: str, now: float) -> dict[str, tuple[decimal.Decimal, int]]:
        """``type -> (USD, solves)`` over the 60 minutes up to ``now`` (this minute too)."""
        last = minute_of(now)
        pipe = self.redis.pipeline(transaction=False)
        for minute in range(last - MINUTES_PER_HOUR + 1, last + 1):
            pipe.hgetall(self.keys.spend(provider, minute))
        nano: dict[str, int] = {}
        solves: dict[str, int] = {}
        for bucket in pipe.execute():
            for field, value in bucket.items():
                kind, _, captcha_type = str(field).partition(":")
                into = nano if kind == "cost" else solves if kind == "solves" else None
                if into is not None:
                    into[captcha_type] = into.get(captcha_type, 0) + int(value)
        return {t: (from_nano(nano.get(t, 0)), solves.get(t, 0)) for t in sorted({*nano, *solves})}

    def total_last_hour(self, provider: str, now: float) -> decimal.Decimal:
        """USD spent by ``provider`` over the last hour, all types."""
        return total(self.last_hour(provider, now))


def total(by_type: Mapping[str, tuple[decimal.Decimal, int]]) -> decimal.Decimal:
    """The USD of :meth:`SpendLedger.last_hour`'s types together."""
    return sum((usd for usd, _ in by_type.values()), decimal.Decimal(0))


def usd_text(usd: decimal.Decimal) -> str:
    """An amount as plain digits without trailing zeros: ``0.01000`` -> ``0.01``."""
    return format(usd.normalize(), "f") if usd else "0"


# -- observers -------------------------------------------------------------------------


class SpendObserver(Protocol):
    def spent(
        self,
        provider: str,
        captcha_type: str,
        cost: decimal.Decimal | None,
        source: CostSource | None,
    ) -> None:
        """``provider`` solved one captcha of ``captcha_type`` costing ``cost``."""


class _Nobody:
    def spent(
        self,
        provider: str,
        captcha_type: str,
        cost: decimal.Decimal | None,
        source: CostSource | None,
    ) -> None:
        pass


_observer: SpendObserver = _Nobody()


def set_spend_observer(observer: SpendObserver | None) -> SpendObserver:
    """Install ``observer`` (``None``: the no-op); returns the previous one."""
    global _observer
    previous, _observer = _observer, observer if observer is not None else _Nobody()
    return previous


def tell_spent(spend: Spend, source: CostSource | None) -> None:
    """Tell the installed observer; instrumentation never breaks a solve."""
    try:
        _observer.spent(spend.provider, spend.captcha_type, spend.cost, source)
    except Exception:
        log.debug("spend observer failed", exc_info=True)
