"""Whether sites accept the tokens providers solve: counted per provider, type and host.

What a scraping team pays for is a token the site accepts, not a solve. Every place
that sees a site's verdict on a token records it here under the solve's task id:
``fetch_page`` (the page served, or challenged again; the Scrapy middleware's tokens are
submitted by it), the Playwright helper, ``report_solution(task_id, correct=...)`` and
:func:`captcha_tasks.feedback`.

**Counted once per solve.** The first verdict on a task id is the one counted (a mark,
``Keys.feedback``, set atomically with the counters by ``acceptance.lua``); a later one,
from the same place or another, is ignored and answered with the verdict that was
counted. Its provider is told about a solve once too (:meth:`claim_report`): whoever
claims the report sends it, nobody else.

**What is counted.** Accepted and rejected tokens and the cost of their solves, per
configured provider name and captcha type, in per-minute buckets (``Keys.acceptance``)
read over ``CAPTCHA_TASKS_ACCEPTANCE_WINDOW``; also per site host for the hosts in
``CAPTCHA_TASKS_ACCEPTANCE_HOSTS`` (others count only in the per-type figures, so the
number of counters stays bounded). Only solves the engine finished are counted: a
pooled token's solve is a fill, which names no caller (the pool keeps no task id per
token for the caller to give).

**Reading** (:meth:`AcceptanceBook.window`): ``{provider: Tally}`` for a type (and a
host, if listed), each tally's ``rate`` the share accepted and ``cost_per_accepted``
its spend over its accepted tokens.
"""

from __future__ import annotations

import dataclasses
import decimal
import json
import math
import time
from collections.abc import Callable
from typing import Literal
from urllib.parse import urlsplit

import redis

from ..errors import UnknownSolve
from ..settings import Settings
from ..state.keys import ACCEPTANCE_MARGIN, ACCEPTANCE_TOTALS_TTL, FEEDBACK_TTL, Keys
from ..state.scripts import run
from .spend import from_nano, minute_of, to_nano

__all__ = [
    "OTHER",
    "AcceptanceBook",
    "AcceptanceRates",
    "Recorded",
    "SolveFacts",
    "Tally",
    "Verdict",
]

Verdict = Literal["accepted", "rejected"]
_CODE: dict[Verdict, str] = {"accepted": "a", "rejected": "r"}
_VERDICT: dict[str, Verdict] = {"a": "accepted", "r": "rejected"}
#: The ``host`` of the figures that count every host (the per-type ones).
_ALL_HOSTS = ""
#: The ``host`` label of the running totals for every host not listed.
OTHER = "other"
#: Field separator: provider names, types and hosts never contain it.
_SEP = "|"


@dataclasses.dataclass(frozen=True)
class Tally:
    """A provider's verdicts over the window: ``accepted`` and ``rejected`` tokens and
    the ``spend`` (USD) of their solves."""

    accepted: int = 0
    rejected: int = 0
    spend: decimal.Decimal = decimal.Decimal(0)

    @property
    def total(self) -> int:
        return self.accepted + self.rejected

    @property
    def rate(self) -> float | None:
        """The share of tokens the sites accepted (None: no verdict yet)."""
        return self.accepted / self.total if self.total else None

    @property
    def cost_per_accepted(self) -> decimal.Decimal | None:
        """USD spent per accepted token (None: none accepted yet)."""
        return self.spend / self.accepted if self.accepted else None

    def plus(self, other: Tally) -> Tally:
        return Tally(
            self.accepted + other.accepted, self.rejected + other.rejected, self.spend + other.spend
        )


@dataclasses.dataclass(frozen=True)
class SolveFacts:
    """What a verdict is counted under: the solve's provider (its configured name), its
    captcha type, its cost (USD; None: unknown) and the host of its page ("" if none)."""

    task_id: str
    provider: str
    captcha_type: str
    cost: decimal.Decimal | None
    host: str
    captcha_id: str


@dataclasses.dataclass(frozen=True)
class Recorded:
    """The outcome of :meth:`AcceptanceBook.record`: ``counted`` (this call's verdict is
    the one counted) and ``verdict`` (the one counted, by this call or an earlier one)."""

    facts: SolveFacts
    counted: bool
    verdict: Verdict


def _host_of(pageurl: object) -> str:
    if not isinstance(pageurl, str) or not pageurl:
        return ""
    return (urlsplit(pageurl).hostname or "").lower()


class AcceptanceBook:
    """The acceptance store: record verdicts, read the figures over the window."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.redis = client
        self.settings = settings
        self.keys = Keys(settings.key_prefix)
        self.clock = clock
        self.hosts = frozenset(settings.acceptance_hosts)

    # -- writing -----------------------------------------------------------------------

    def facts(self, task_id: str) -> SolveFacts:
        """The finished solve ``task_id`` (:class:`~captcha_tasks.errors.UnknownSolve`
        if its job is unknown, not done, or gone past the report window)."""
        if not isinstance(task_id, str) or not task_id or len(task_id) > 64:
            raise UnknownSolve("feedback: task_id must be a solve task's id")
        state, raw, captcha = self.redis.hmget(self.keys.job(task_id), "state", "result", "captcha")
        if state != "done" or not raw:
            raise UnknownSolve(
                f"feedback: no solved captcha is known for task {task_id} (unknown, not "
                "solved, failed, a pooled token, or older than CAPTCHA_TASKS_REPORT_WINDOW)"
            )
        result = json.loads(raw)
        try:
            pageurl = json.loads(captcha or "{}").get("fields", {}).get("pageurl")
        except ValueError:
            pageurl = None
        cost = result.get("cost")
        return SolveFacts(
            task_id=task_id,
            provider=str(result.get("provider") or ""),
            captcha_type=str(result.get("type") or ""),
            cost=decimal.Decimal(cost) if cost else None,
            host=_host_of(pageurl),
            captcha_id=str(result.get("captcha_id") or ""),
        )

    def record(self, task_id: str, *, accepted: bool, host: str | None = None) -> Recorded:
        """Count the site's verdict on ``task_id``'s token, unless one was counted
        already. ``host``: the site that judged it (default: the solve's page's)."""
        facts = self.facts(task_id)
        if host is not None:
            facts = dataclasses.replace(facts, host=host.lower())
        verdict: Verdict = "accepted" if accepted else "rejected"
        now = self.clock()
        mine = _SEP.join((facts.provider, facts.captcha_type, _ALL_HOSTS, ""))
        theirs = ""
        if facts.host in self.hosts:
            theirs = _SEP.join((facts.provider, facts.captcha_type, facts.host, ""))
        labelled = facts.host if theirs else OTHER
        got = run(
            self.redis,
            "acceptance",
            [
                self.keys.feedback(task_id),
                self.keys.acceptance(minute_of(now)),
                self.keys.acceptance_totals,
            ],
            [
                _CODE[verdict],
                FEEDBACK_TTL,
                int(self.settings.acceptance_window) + ACCEPTANCE_MARGIN,
                to_nano(facts.cost),
                mine,
                theirs,
                _SEP.join((facts.provider, facts.captcha_type, labelled, "")),
                ACCEPTANCE_TOTALS_TTL,
            ],
        )
        if got == 1:
            return Recorded(facts, True, verdict)
        return Recorded(facts, False, _VERDICT.get(str(got), verdict))

    def claim_report(self, task_id: str, report: str) -> str | None:
        """Claim telling ``task_id``'s provider ``report`` (``good``/``bad``): None if this
        caller is the one to tell it (the first claim), else what the first claim told."""
        mark = self.keys.feedback(task_id)
        pipe = self.redis.pipeline()
        pipe.hsetnx(mark, "reported", report)
        pipe.hget(mark, "reported")
        pipe.expire(mark, FEEDBACK_TTL)
        claimed, told, _ = pipe.execute()
        return None if claimed else str(told)

    def release_report(self, task_id: str) -> None:
        """Give a claim back (telling the provider failed; a retry claims it again)."""
        self.redis.hdel(self.keys.feedback(task_id), "reported")

    # -- reading -----------------------------------------------------------------------

    def totals(self) -> dict[tuple[str, str, str], tuple[int, int]]:
        """Every verdict counted so far: ``(provider, type, host or "other") ->
        (accepted, rejected)`` (the Prometheus counters)."""
        out: dict[tuple[str, str, str], tuple[int, int]] = {}
        for field, value in self.redis.hgetall(self.keys.acceptance_totals).items():
            parts = str(field).split(_SEP)
            if len(parts) != 4 or parts[3] not in ("a", "r"):
                continue
            key = (parts[0], parts[1], parts[2])
            accepted, rejected = out.get(key, (0, 0))
            if parts[3] == "a":
                out[key] = (accepted + int(value), rejected)
            else:
                out[key] = (accepted, rejected + int(value))
        return out

    def _buckets(self, now: float | None) -> list[dict[str, str]]:
        now = self.clock() if now is None else now
        last = minute_of(now)
        minutes = max(1, math.ceil(self.settings.acceptance_window / 60))
        pipe = self.redis.pipeline(transaction=False)
        for minute in range(last - minutes + 1, last + 1):
            pipe.hgetall(self.keys.acceptance(minute))
        return list(pipe.execute())

    def figures(self, now: float | None = None) -> dict[tuple[str, str, str], Tally]:
        """Every tally over the window: ``(provider, type, host) -> Tally``, ``host`` ""
        for the per-type figures (all hosts), else a listed host's own."""
        return _tallies(self._buckets(now))

    def minutes(
        self, captcha_type: str, host: str | None = None, *, now: float | None = None
    ) -> list[tuple[float, dict[str, Tally]]]:
        """:meth:`window`'s tallies minute by minute: ``(age, {provider: Tally})`` per
        minute of the window, ``age`` the seconds from the middle of that minute to
        ``now`` (at least 0), oldest first."""
        now = self.clock() if now is None else now
        wanted = self.host_key(host)
        last = minute_of(now)
        buckets = self._buckets(now)
        first = last - len(buckets) + 1
        out: list[tuple[float, dict[str, Tally]]] = []
        for minute, bucket in zip(range(first, last + 1), buckets, strict=True):
            tallies = {
                provider: tally
                for (provider, kind, at), tally in _tallies([bucket]).items()
                if kind == captcha_type and at == wanted
            }
            out.append((max(0.0, now - (minute * 60 + 30)), tallies))
        return out

    def host_key(self, host: str | None) -> str:
        return host.lower() if host and host.lower() in self.hosts else _ALL_HOSTS

    def window(
        self, captcha_type: str, host: str | None = None, *, now: float | None = None
    ) -> dict[str, Tally]:
        """``{provider name: Tally}`` for ``captcha_type`` over the window: of ``host``
        if it is one of ``CAPTCHA_TASKS_ACCEPTANCE_HOSTS``, else of every host. A provider
        with no verdict in the window is absent."""
        wanted = self.host_key(host)
        return {
            provider: tally
            for (provider, kind, at), tally in self.figures(now).items()
            if kind == captcha_type and at == wanted
        }

    def rate(self, provider: str, captcha_type: str, *, now: float | None = None) -> float | None:
        """The share of ``provider``'s ``captcha_type`` tokens accepted over the window."""
        tally = self.window(captcha_type, now=now).get(provider)
        return None if tally is None else tally.rate


def _tallies(buckets: list[dict[str, str]]) -> dict[tuple[str, str, str], Tally]:
    """The buckets' counts summed: ``(provider, type, host) -> Tally``."""
    counts: dict[tuple[str, str, str, str], int] = {}
    for bucket in buckets:
        for field, value in bucket.items():
            parts = str(field).split(_SEP)
            if len(parts) == 4:
                key = (parts[0], parts[1], parts[2], parts[3])
                counts[key] = counts.get(key, 0) + int(value)
    out: dict[tuple[str, str, str], Tally] = {}
    for provider, kind, host in sorted({k[:3] for k in counts}):
        out[(provider, kind, host)] = Tally(
            counts.get((provider, kind, host, "a"), 0),
            counts.get((provider, kind, host, "r"), 0),
            from_nano(counts.get((provider, kind, host, "c"), 0)),
        )
    return out


class AcceptanceRates:
    """The acceptance rates results carry, read at most every ``every`` seconds (one
    window's read serves every provider and type meanwhile)."""

    def __init__(self, book: AcceptanceBook, every: float = 10.0) -> None:
        self.book = book
        self.every = every
        self._read_at = -math.inf
        self._figures: dict[tuple[str, str, str], Tally] = {}

    def rate(self, provider: str, captcha_type: str, now: float) -> float | None:
        """``provider``'s acceptance rate for ``captcha_type`` (None: no verdict, or the
        store could not be read: a result never fails for it)."""
        if now - self._read_at >= self.every:
            try:
                self._figures = self.book.figures(now)
            except redis.RedisError:
                return None
            self._read_at = now
        tally = self._figures.get((provider, captcha_type, _ALL_HOSTS))
        if tally is None or tally.rate is None:
            return None
        return round(tally.rate, 4)
