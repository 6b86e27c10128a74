"""Routing by cost per accepted token (``CAPTCHA_TASKS_ROUTING=cost``).

A request's route (:func:`~captcha_tasks.provider.routing.route`: the configured order
filtered by ``_TYPES``, offers, ``provider=`` and ``exclude=``) is reordered at admission
by each provider's expected cost per accepted token for the captcha's type (and its page's
host, where the host is in ``CAPTCHA_TASKS_ACCEPTANCE_HOSTS``), with Thompson sampling:

* per provider, draw an acceptance rate ``θ ~ Beta(1 + accepted, 1 + rejected)`` from the
  verdicts of :class:`~.acceptance.AcceptanceBook` (a provider with none draws from
  ``Beta(1, 1)``, uniform: a new or forgotten provider is tried);
* its expected cost per accepted token is ``price / θ``, ``price`` its cost per solve;
* the route is sorted by that, lowest first (ties keep the configured order).

The engine gives a job to the first provider of its route with a free thread and a usable
breaker (``acquire.lua``), so the order realises "the cheapest per accepted token among
the providers free to take it" and budgets, breakers, failover along the route and pinned
routes are untouched.

**Counts fade.** Within the window each minute's verdicts weigh ``0.5 ** (age /
half_life)``, ``half_life`` a sixth of ``CAPTCHA_TASKS_ACCEPTANCE_WINDOW`` (150 s of
the default 900 s): a provider's old verdicts lose their hold within minutes, so one that
was abandoned for its refusals is drawn again as its record fades, and one that improved
is found again in a few minutes rather than after the whole window.

**Price per solve**: the spend of the provider's judged solves in the window over their
number (what it charged, its own reported cost where it reports one, else its configured
price), or, with none judged, its configured price (``CAPTCHA_TASKS_<NAME>_PRICES``; per
1000 solves, so divided by 1000). A provider with neither is compared at the highest
price known on the route (none known anywhere: the sampled rates alone decide).
"""

from __future__ import annotations

import dataclasses
import decimal
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from urllib.parse import urlsplit

import redis

from ..forksafe import PerProcess
from ..settings import Settings
from .acceptance import AcceptanceBook, Tally

__all__ = ["CostRouter", "Evidence", "evidence", "half_life", "order", "ordered"]

log = logging.getLogger(__name__)

_THOUSAND = decimal.Decimal(1000)
#: The share of the acceptance window that is the verdicts' half-life.
HALF_LIFE_SHARE = 6
#: No sampled rate is taken as exactly 0 (the price over it would be infinite).
_FLOOR = 1e-9


@dataclasses.dataclass(frozen=True)
class Evidence:
    """What a provider is ranked by: its faded ``accepted`` and ``rejected`` counts and
    its ``price`` per solve (USD; None: unknown)."""

    accepted: float = 0.0
    rejected: float = 0.0
    price: decimal.Decimal | None = None


def half_life(settings: Settings) -> float:
    """Seconds after which a verdict weighs half as much."""
    return settings.acceptance_window / HALF_LIFE_SHARE


def evidence(
    minutes: Sequence[tuple[float, Mapping[str, Tally]]],
    prices: Mapping[str, decimal.Decimal | None],
    half_life_s: float,
) -> dict[str, Evidence]:
    """Each provider's :class:`Evidence` from the window's minutes (``(age in seconds,
    {provider: Tally})``, :meth:`~.acceptance.AcceptanceBook.minutes`) and its configured
    price per solve (``prices``; absent or None: not configured)."""
    accepted: dict[str, float] = {}
    rejected: dict[str, float] = {}
    spend: dict[str, decimal.Decimal] = {}
    judged: dict[str, int] = {}
    for age, tallies in minutes:
        weight = 0.5 ** (age / half_life_s) if half_life_s > 0 else 1.0
        for name, tally in tallies.items():
            accepted[name] = accepted.get(name, 0.0) + weight * tally.accepted
            rejected[name] = rejected.get(name, 0.0) + weight * tally.rejected
            spend[name] = spend.get(name, decimal.Decimal(0)) + tally.spend
            judged[name] = judged.get(name, 0) + tally.total
    out: dict[str, Evidence] = {}
    for name in {*prices, *accepted}:
        price = prices.get(name)
        if spend.get(name, 0) > 0 and judged.get(name, 0) > 0:
            price = spend[name] / judged[name]
        out[name] = Evidence(accepted.get(name, 0.0), rejected.get(name, 0.0), price)
    return out


def order(route: Sequence[str], known: Mapping[str, Evidence], rng: random.Random) -> list[str]:
    """``route`` sorted by a draw of each provider's cost per accepted token, lowest
    first (one draw per provider per call: Thompson sampling)."""
    priced = [e.price for name in route if (e := known.get(name)) and e.price is not None]
    fallback = max(priced) if priced else decimal.Decimal(1)
    ranked: list[tuple[float, int, str]] = []
    for index, name in enumerate(route):
        facts = known.get(name, Evidence())
        theta = rng.betavariate(1.0 + facts.accepted, 1.0 + facts.rejected)
        price = facts.price if facts.price is not None else fallback
        ranked.append((float(price) / max(theta, _FLOOR), index, name))
    return [name for _, _, name in sorted(ranked)]


class CostRouter:
    """:func:`order` over the acceptance store, for one process's admissions: each
    type's (and listed host's) minutes are read at most every ``every`` seconds and
    shared meanwhile; every admission draws afresh."""

    def __init__(
        self,
        book: AcceptanceBook,
        settings: Settings,
        *,
        rng: random.Random | None = None,
        every: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.book = book
        self.settings = settings
        self.rng = rng if rng is not None else random.Random()
        self.every = every
        self.clock = clock
        self.half_life = half_life(settings)
        self._lock = threading.Lock()
        self._read: dict[tuple[str, str], tuple[float, dict[str, Evidence]]] = {}

    def prices(self, captcha_type: str) -> dict[str, decimal.Decimal | None]:
        """Each configured provider's configured price per solve of ``captcha_type``."""
        out: dict[str, decimal.Decimal | None] = {}
        for config in self.settings.providers():
            per_thousand = dict(config.prices).get(captcha_type)
            out[config.name] = None if per_thousand is None else per_thousand / _THOUSAND
        return out

    def evidence(self, captcha_type: str, host: str | None = None) -> dict[str, Evidence]:
        """The providers' :class:`Evidence` for ``captcha_type`` (and ``host``, if listed)."""
        key = (captcha_type, self.book.host_key(host))
        now = self.clock()
        with self._lock:
            cached = self._read.get(key)
        if cached is not None and now - cached[0] < self.every:
            return cached[1]
        found = evidence(
            self.book.minutes(captcha_type, host), self.prices(captcha_type), self.half_life
        )
        with self._lock:
            self._read[key] = (now, found)
        return found

    def order(self, route: Sequence[str], captcha_type: str, host: str | None = None) -> list[str]:
        """``route`` by a fresh draw of cost per accepted token (one provider: as is)."""
        if len(route) < 2:
            return list(route)
        known = self.evidence(captcha_type, host)
        with self._lock:  # random.Random's draws from several threads stay well formed
            return order(route, known, self.rng)


_ROUTERS: PerProcess[CostRouter] = PerProcess()


def ordered(
    client: redis.Redis,
    settings: Settings,
    route: Sequence[str],
    captcha_type: str,
    pageurl: object = None,
) -> list[str]:
    """A request's route as admission stores it: as computed under order routing (or
    with one provider on it), else by cost per accepted token (:class:`CostRouter`, one
    per process). The acceptance store unreadable: as computed (the admission that
    follows meets the same Redis and says so)."""
    if settings.routing != "cost" or len(route) < 2:
        return list(route)
    router = _ROUTERS.get(
        (settings.state_url, settings.key_prefix),
        lambda: CostRouter(AcceptanceBook(client, settings), settings),
    )
    host = urlsplit(pageurl).hostname if isinstance(pageurl, str) and pageurl else None
    try:
        return router.order(route, captcha_type, host)
    except redis.RedisError as exc:
        log.warning("cost routing: the acceptance figures could not be read (%s)", exc)
        return list(route)
