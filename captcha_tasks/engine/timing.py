"""Solver timings: documented defaults, the time scale, and first-poll learning.

All defaults are production seconds; :meth:`Settings.scaled` applies
``CAPTCHA_TASKS_TIME_SCALE``. The first poll of a captcha type is learned from
recent solves (a low quantile of when answers became ready, cluster-wide), so a
captcha is collected soon after the provider finishes it without polling early
for nothing. Polled one by one, every later poll is placed by the same samples too
(:mod:`.placement`).
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections.abc import Sequence

import redis

from ..provider import CAPTCHA_CLASSES, Provider
from ..provider.poll_rules import CLASSIC_RULES, PollRules
from ..settings import Settings
from ..settings.providers import DEFAULT_PROVIDER
from ..state.keys import STRUCTURE_TTL, Keys
from .placement import ReadyTimes, poll_quantiles

__all__ = [
    "DEADLINE",
    "FIRST_POLL",
    "POLL_INTERVAL",
    "READ_MARGIN",
    "SAMPLES_FLUSH_EVERY",
    "TOKEN_TTL",
    "FirstPollLearner",
    "PollGrid",
    "quantile",
]

#: Each kind's :class:`~captcha_tasks.provider.Timing`, by kind: the wait before its
#: first poll until enough solves were seen to learn it, the seconds from submit until it
#: is given up as SolveTimeout, and how long its token stays valid at the target site
#: (single use; only the kinds a source gives one for).
FIRST_POLL: dict[str, float] = {k: c.timing.first_poll for k, c in CAPTCHA_CLASSES.items()}
DEADLINE: dict[str, float] = {k: c.timing.deadline for k, c in CAPTCHA_CLASSES.items()}
TOKEN_TTL: dict[str, float] = {
    kind: cls.timing.token_ttl
    for kind, cls in CAPTCHA_CLASSES.items()
    if cls.timing.token_ttl is not None
}
#: Seconds between polls once a captcha is due. Polls of every due captcha go out
#: together in one ``res.php?action=get&ids=...`` request when the provider takes it,
#: so a short interval costs few requests; one by one, the interval is tripled.
POLL_INTERVAL = 1.0
#: Batched, captchas in flight up to which the poll interval stays the configured one;
#: past twice as many it halves, and again at each doubling (:meth:`PollGrid.note_load`).
LOAD_FULL = 25
#: The least share of the configured interval that many captchas in flight bring it to.
#: Every captcha due is claimed and rescheduled at each tick: at a quarter (T=200,
#: ~17 reads per captcha) the engine spends 1.2 ms more CPU per solve than at a half
#: (~9) for 0.02 s less collection delay (docs/design/cost-per-solve.md).
MIN_INTERVAL_FRACTION = 0.5
#: The first poll aims at this quantile of recent ready times: early enough that a
#: captcha rarely waits for its collection, late enough that most first polls hit.
LEARN_QUANTILE = 0.2
#: Batched, a captcha read before it is ready costs no request of its own (it joins a
#: read made anyway): the first poll aims this early.
BATCH_LEARN_QUANTILE = 0.05
LEARN_WINDOW = 256
LEARN_MIN_SAMPLES = 8
#: Seconds a learner holds the samples it observed before writing them to Redis: a
#: worker writes its samples at most once a second, in one round trip, not per solve.
SAMPLES_FLUSH_EVERY = 1.0
#: Reads of one captcha keep this multiple of the provider's least interval apart:
#: engines on several hosts poll the same captcha by their own clocks.
READ_MARGIN = 1.2


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


class FirstPollLearner:
    """When to poll a new captcha first, per type, learned cluster-wide in Redis
    (per provider: each one's timings are its own), and the ready times that place
    later one-by-one polls (:meth:`ready_times`).

    A solve tells that its answer became ready between the last poll that found none
    and the one that found it. The sample is drawn uniformly from that interval (when
    the very first poll already found the answer, from the later half of its wait):
    polls placed at quantiles of midpoints would drift (every sample of a poll
    interval at one point), whereas the draws' distribution matches the true one at
    the poll times, where it counts.
    """

    def __init__(
        self,
        settings: Settings,
        client: redis.Redis,
        *,
        refresh: float = 1.0,
        provider: str = DEFAULT_PROVIDER,
        rng: random.Random | None = None,
        flush_every: float = SAMPLES_FLUSH_EVERY,
    ) -> None:
        self.settings = settings
        self.rng = rng or random.Random()
        self.client = client
        self.keys = Keys(settings.key_prefix)
        self.provider = provider  # each provider's timings are its own
        self.refresh = refresh
        #: Seconds the samples observed here are held before they are written.
        self.flush_every = flush_every
        self._cache: dict[str, tuple[float, float | None, ReadyTimes | None, float]] = {}
        self._lock = threading.Lock()
        #: Samples observed and not yet written, by type; when they last were written.
        self._pending: dict[str, list[str]] = {}
        self._flushed_at = float("-inf")
        #: The quantile of ready times the first poll aims at (batched polls: lower).
        self.first_quantile = LEARN_QUANTILE
        self._quantiles = poll_quantiles(settings.poll_reads)

    def default(self, captcha_type: str) -> float:
        return self.settings.scaled(FIRST_POLL.get(captcha_type, 10.0))

    def first_poll(self, captcha_type: str) -> float:
        """Seconds after submit to poll first."""
        return self._read(captcha_type)[0]

    def learned(self, captcha_type: str) -> float | None:
        """The provider's typical ready time of ``captcha_type`` as learned (None until
        enough solves were seen), unbounded: what "far slower than usual" compares to."""
        return self._read(captcha_type)[1]

    def ready_times(self, captcha_type: str) -> ReadyTimes | None:
        """The learned ready times of ``captcha_type`` and the poll offsets they give
        (None until enough solves were seen: polls then follow the documented defaults)."""
        return self._read(captcha_type)[2]

    def _read(self, captcha_type: str) -> tuple[float, float | None, ReadyTimes | None]:
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(captcha_type)
            if cached and now - cached[3] < self.refresh:
                return cached[:3]
        # This worker's own samples first, in the same round trip: it learns from them too.
        pipe = self.client.pipeline(transaction=False)
        self._write_pending(pipe)
        pipe.lrange(self.keys.timing(captcha_type, self.provider), 0, LEARN_WINDOW - 1)
        samples = [float(v) for v in pipe.execute()[-1]]
        value = self.default(captcha_type)
        learned = ready = None
        if len(samples) >= LEARN_MIN_SAMPLES:
            learned = quantile(samples, LEARN_QUANTILE)
            # Never below a tenth of the default nor beyond half the deadline.
            floor = value / 10
            ceiling = self.settings.scaled(DEADLINE.get(captcha_type, 120.0)) / 2
            first = (
                learned
                if self.first_quantile == LEARN_QUANTILE
                else quantile(samples, self.first_quantile)
            )
            value = min(max(first, floor), ceiling)
            ready = ReadyTimes.of(samples, floor=floor, ceiling=ceiling, quantiles=self._quantiles)
        with self._lock:
            self._cache[captcha_type] = (value, learned, ready, now)
        return value, learned, ready

    def observe(
        self,
        captcha_type: str,
        *,
        not_ready_at: float | None,
        ready_at: float,
        exact: bool = False,
    ) -> None:
        """Record one solve: seconds after submit of the last empty poll (None if the
        first poll answered) and of the poll that answered; ``exact``: the answer came
        when it was ready (pushed by the provider), at ``ready_at``.

        The sample is held here and written with the others of the last
        :attr:`flush_every` seconds (:meth:`flush_if_due`), or before this learner next
        reads the samples from Redis: a solve costs no write of its own.

        With callbacks on, only exact solves are learned: a read that found the answer
        is a lost callback's fallback, made once nearly every answer has been ready a
        while, and tells only that it was ready by then. Stored as a sample it would
        pull the learned ready times later, the next fallbacks later with them, and so
        on (20 % of callbacks dropped: fallbacks 3-6 s after 2 s solves)."""
        if exact:
            not_ready_at = ready_at
        elif self.settings.callback_url:
            return
        low = 0.5 * ready_at if not_ready_at is None else not_ready_at
        sample = low + self.rng.random() * (ready_at - low)
        with self._lock:
            held = self._pending.setdefault(captcha_type, [])
            held.append(f"{sample:.4f}")
            del held[:-LEARN_WINDOW]  # only the newest are kept in Redis anyway
        self.flush_if_due()

    def flush_if_due(self) -> None:
        """:meth:`flush`, if the last write is :attr:`flush_every` seconds old."""
        with self._lock:
            if not self._pending or time.monotonic() - self._flushed_at < self.flush_every:
                return
        self.flush()

    def flush(self) -> None:
        """Write the samples observed here and not yet written, in one round trip (as at
        a worker's stop)."""
        pipe = self.client.pipeline(transaction=False)
        self._write_pending(pipe)
        pipe.execute()

    def _write_pending(self, pipe: redis.client.Pipeline) -> None:
        """Queue on ``pipe`` the writes of the samples held: newest first in each type's
        list, which keeps the :data:`LEARN_WINDOW` newest. Trimming is not atomic with
        the push: a read between them sees a few more than the window, which is harmless.
        Samples whose write fails are lost: they are a sample."""
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = self._pending, {}
            self._flushed_at = time.monotonic()
        for captcha_type, samples in pending.items():
            key = self.keys.timing(captcha_type, self.provider)
            pipe.lpush(key, *samples)
            pipe.ltrim(key, 0, LEARN_WINDOW - 1)
            pipe.expire(key, STRUCTURE_TTL)


class PollGrid:
    """When to poll a captcha. Batched, poll times snap up to a grid of the poll
    interval, shared by every engine: captchas come due together and one request polls
    them all. One by one, polls are rarer and stretch past the provider's ban threshold.

    Whatever the interval, the provider's :class:`PollRules` hold: two reads of one
    captcha are at least ``min_gap`` apart (its ``min_interval``, scaled like every
    timing and with :data:`READ_MARGIN` for clock skew between engines), and a result
    kept only for a while after it is ready is read again before it is dropped.

    ``batch`` may turn off for good (a provider that refuses batch reads); ``rules``
    follow the engine's provider. One by one, polls go where the learned ready times
    say (:class:`.placement.ReadyTimes`, passed in as ``ready``; without one, as
    learned too little, the grid's steps).
    """

    def __init__(
        self,
        interval: float,
        *,
        batch: bool,
        rules: PollRules = CLASSIC_RULES,
        scale: float = 1.0,
    ) -> None:
        #: The interval with few captchas in flight (``CAPTCHA_TASKS_POLL_INTERVAL``, scaled).
        self.base_interval = interval
        #: The interval in force: shorter while many captchas are in flight.
        self.interval = interval
        self.batch = batch
        self.rules = rules
        self.scale = scale

    def note_load(self, in_flight: int) -> None:
        """``in_flight`` captchas of this provider are out, cluster-wide.

        Batched, one request reads up to 50 of them, so the interval shrinks as they
        grow: halved for each doubling past :data:`LOAD_FULL`, down to
        :data:`MIN_INTERVAL_FRACTION` of the configured one. Each request then still
        reads many captchas (a solve costs a bounded share of requests, whatever the
        load) while each is collected sooner after it is ready. Every engine sees the
        same count and halving keeps the grids nested, so the engines' ticks stay
        aligned and one request per tick reads all that is due."""
        if not self.batch:  # one by one (perhaps since a refused batch): the configured one
            self.interval = self.base_interval
            return
        fraction = 1.0
        while fraction > MIN_INTERVAL_FRACTION and in_flight >= 2 * LOAD_FULL / fraction:
            fraction /= 2
        self.interval = max(self.base_interval * fraction, self.min_gap)

    @classmethod
    def for_provider(cls, settings: Settings, provider: Provider) -> PollGrid:
        """The grid of ``settings``' interval and time scale, with ``provider``'s rules;
        batched where the provider reads many at once and ``batch_poll`` allows it."""
        batch = settings.batch_poll != "off" and provider.batch_reads
        interval = settings.scaled(settings.poll_interval)
        return cls(
            interval,
            batch=batch,
            rules=provider.poll_rules,
            scale=settings.time_scale,
        )

    @property
    def learns(self) -> bool:
        """Whether polls go where the learned ready times say (one by one)."""
        return not self.batch

    @property
    def first_gap(self) -> float:
        """Least seconds from a captcha's submit to its first read."""
        return self.rules.first_read_after * self.scale * READ_MARGIN

    @property
    def min_gap(self) -> float:
        """Least seconds between two reads of one captcha."""
        return self.rules.min_interval * self.scale * READ_MARGIN

    @property
    def max_gap(self) -> float | None:
        """Most seconds between two reads, where a solved result is dropped soon after."""
        rules = self.rules
        if rules.retention is None or rules.retained_from != "ready":
            return None
        return max(rules.retention * self.scale / 2, self.min_gap)

    def on_tick(self, t: float) -> float:
        """``t``, snapped up to the grid when batched."""
        if not self.batch:
            return t
        return math.ceil(t / self.interval) * self.interval

    def first_poll(self, at: float, wait: float, ready: ReadyTimes | None = None) -> float:
        """When to poll first a captcha submitted ``at``, ``wait`` seconds later by choice
        (or, where the grid :attr:`learns`, at ``ready``'s first target)."""
        if ready is not None and self.learns:
            wait = ready.first
        gap, end = self.max_gap, self.retention_end(at)
        if gap is not None:
            wait = min(wait, gap)
        if end is not None:
            wait = min(wait, max(end - at - self.min_gap, 0.0))
        return self.on_tick(at + max(wait, self.first_gap))

    def next_poll(
        self,
        polls: int,
        at: float,
        *,
        since: float | None = None,
        ready: ReadyTimes | None = None,
    ) -> float:
        """When to poll again a captcha polled ``polls`` times before, not ready ``at``
        (submitted ``since``; ``ready``: its type's learned ready times)."""
        if self.batch:
            # The tick after the one this poll belonged to (``at`` is a little past
            # it, by the call's duration), not the one after that.
            return self.on_tick(at + max(self.interval / 2, self.min_gap))
        if ready is not None and since is not None and self.learns:
            step = since + ready.next_after(at - since, self.min_gap, reads=polls + 1) - at
        else:
            step = 3 * self.interval
        calls = self.rules.calls_per_captcha
        if calls is not None and polls + 1 >= calls:
            step *= 2
        gap = self.max_gap
        if gap is not None:
            step = min(step, gap)
        return at + max(step, self.min_gap)

    def back_off(self, polls: int, at: float) -> float:
        """When to poll again a captcha whose read ``at`` was refused as too soon."""
        return self.next_poll(polls, at) + self.min_gap

    def read_limit(self, reads: int) -> str | None:
        """Why a captcha read ``reads`` times may not be read again (None: it may)."""
        cap = self.rules.max_reads
        if cap is None or reads < cap:
            return None
        return f"{self.rules.provider} answers {cap} reads of one task, then loses it"

    def retention_end(self, submitted_at: float) -> float | None:
        """When the provider drops a result counted from its submit (None: no such rule)."""
        rules = self.rules
        if rules.retention is None or rules.retained_from != "submit":
            return None
        return submitted_at + rules.retention * self.scale
