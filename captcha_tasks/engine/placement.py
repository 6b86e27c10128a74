"""Where one-by-one polls go: at successive quantiles of the learned ready times.

Without batch reads every poll is a request of its own, so a fixed grid either polls
often (requests) or collects late (delay). The engine learns, per provider and captcha
type, when answers become ready (:class:`.timing.FirstPollLearner`); polls aimed at
quantiles of that distribution find most answers within a few reads and soon after
they are ready.

How many reads a solve may cost is the operator's choice (``CAPTCHA_TASKS_POLL_READS``,
``m``, 2 by default). For ready times spread evenly over their range (the sandbox's
±30 %), the placement with the least mean collection delay at ``m`` reads per solve
on average is :func:`poll_quantiles`: ``k = 3m - 2`` reads whose gaps in quantile
space shrink linearly, ``g_i = 2 (k - i + 1) / (k (k + 1))`` (Lagrange: the delay is
half the sum of the squared gaps, the expected reads ``1 + sum of (1 - q_i)``). Its
mean delay is ``(2k + 1) / (3k (k + 1))`` of the range: 0.150 at ``m = 2`` (quantiles
0.4, 0.7, 0.9, 1.0), 0.089 at 3, 0.064 at 4. No placement does better for that
spread, which bounds what polling can do: ``docs/design/poll-placement.md``. The last
read aims short of the sampled maximum (:data:`LAST_QUANTILE`: it only grows by late
outliers).

The provider's rules (:class:`~captcha_tasks.provider.poll_rules.PollRules`) are applied
by :class:`.timing.PollGrid` on top: a quantile closer to the previous read than the
provider allows moves later, never earlier.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence

from ..settings import Settings

__all__ = [
    "LAST_QUANTILE",
    "POLL_QUANTILES",
    "TAIL_FIRST",
    "TAIL_STEP",
    "ReadyTimes",
    "poll_quantiles",
]

#: The last read aims at this quantile, short of the sampled maximum.
LAST_QUANTILE = 0.97


def poll_quantiles(reads: float) -> tuple[float, ...]:
    """The quantiles of the learned ready times that the polls of one captcha aim at, in
    order, for ``reads`` reads per solve on average (at least 4/3: two reads)."""
    k = max(2, round(3 * reads - 2))
    out: list[float] = []
    reached = 0.0
    for i in range(1, k):  # the k-th read, at 1.0, becomes LAST_QUANTILE
        reached += 2 * (k - i + 1) / (k * (k + 1))
        # Reads at or just before the last one would be wasted: they move to it.
        if reached < LAST_QUANTILE - 0.02:
            out.append(round(reached, 4))
    return (*out, LAST_QUANTILE)


#: The quantiles at the default budget (``Settings.poll_reads``, two reads per solve):
#: (0.4, 0.7, 0.9, 0.97).
POLL_QUANTILES: tuple[float, ...] = poll_quantiles(Settings.poll_reads)
#: Past the last quantile (a captcha slower than nearly all seen), polls keep at most
#: this fraction of the median ready time apart.
TAIL_STEP = 0.25
#: The first read past the last quantile comes this fraction of the spread of ready
#: times after it (most such answers are ready just past it: the last quantile aims
#: short of the sampled maximum); each further one doubles the distance from the last
#: quantile, up to :data:`TAIL_STEP`, so a long tail costs few reads.
TAIL_FIRST = 0.05


def _quantile(ordered: Sequence[float], q: float) -> float:
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclasses.dataclass(frozen=True)
class ReadyTimes:
    """Learned seconds from submit to ready of one captcha type at one provider, and
    the poll offsets they give. ``floor`` and ``ceiling`` bound the targets (a tenth of
    the documented first poll, half the deadline: as the learned first poll is)."""

    samples: tuple[float, ...]
    targets: tuple[float, ...]
    tail: float
    #: The first step past the last target (:data:`TAIL_FIRST` of the spread).
    tail_first: float

    @classmethod
    def of(
        cls,
        samples: Sequence[float],
        *,
        floor: float = 0.0,
        ceiling: float = float("inf"),
        quantiles: Sequence[float] = POLL_QUANTILES,
    ) -> ReadyTimes:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        targets = tuple(min(max(_quantile(ordered, q), floor), ceiling) for q in quantiles)
        tail = max(TAIL_STEP * _quantile(ordered, 0.5), 1e-3)
        # The spread counts as a fifth of the median at least: samples all alike would
        # otherwise put the first reads past the last target a millisecond apart.
        median = _quantile(ordered, 0.5)
        spread = max(ordered[-1] - ordered[0], 0.2 * median)
        tail_first = min(max(TAIL_FIRST * spread, 1e-3), tail)
        return cls(tuple(ordered), targets, tail, tail_first)

    @property
    def first(self) -> float:
        """Seconds after submit of the first poll."""
        return self.targets[0]

    @property
    def nearly_all(self) -> float:
        """Seconds after submit by which nearly every answer has been ready a while: the
        last target and a tail step (where a lost callback's fallback poll goes)."""
        return self.targets[-1] + self.tail

    def next_after(self, elapsed: float, gap: float, reads: int = 0) -> float:
        """Seconds after submit of the next poll of a captcha found not ready ``elapsed``
        seconds after its submit, at least ``gap`` later: the next target, or past the
        last one a tail step later (:data:`TAIL_FIRST`, doubling the distance from the
        last target, at most :data:`TAIL_STEP`).

        ``reads``: how many times it was read so far. Its next read aims at the target
        of that rank at the earliest: targets move as ready times are learned, and a
        captcha read at a target that has since moved later would otherwise be read
        again just after (a read that finds what the last one did)."""
        earliest = elapsed + gap
        i = max(bisect.bisect_right(self.targets, earliest), reads)
        if i < len(self.targets):
            return self.targets[i]
        beyond = max(elapsed - self.targets[-1], 0.0)
        step = min(self.tail_first + beyond, self.tail)
        return elapsed + max(step, gap)
