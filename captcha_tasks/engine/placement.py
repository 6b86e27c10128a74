"""Where one-by-one polls go: at successive quantiles of the learned ready times.

Without batch reads every poll is a request of its own, so a fixed grid either polls
often (requests) or collects late (delay). The engine learns, per provider and captcha
type, when answers become ready (:class:`.timing.FirstPollLearner`); polls aimed at
the quantiles :data:`POLL_QUANTILES` of that distribution find most answers within two
reads and soon after they are ready. Uniform ready times (the sandbox's, ±30 %) make
the best 2-read placement about (0.4, 0.7, 0.9, 1.0): the quantiles here, with the last
short of the sampled maximum (it only grows by late outliers).

The provider's rules (:class:`~captcha_tasks.provider.poll_rules.PollRules`) are applied
by :class:`.timing.PollGrid` on top: a quantile closer to the previous read than the
provider allows moves later, never earlier.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Sequence

__all__ = ["POLL_QUANTILES", "TAIL_STEP", "ReadyTimes"]

#: The quantiles of the learned ready times the polls of one captcha aim at, in order.
POLL_QUANTILES: tuple[float, ...] = (0.4, 0.7, 0.9, 0.97)
#: Past the last quantile (a captcha slower than nearly all seen), polls keep this
#: fraction of the median ready time apart: rare, so a coarse step costs little.
TAIL_STEP = 0.25


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

    @classmethod
    def of(
        cls, samples: Sequence[float], *, floor: float = 0.0, ceiling: float = float("inf")
    ) -> ReadyTimes:
        if not samples:
            raise ValueError("no samples")
        ordered = sorted(samples)
        targets = tuple(min(max(_quantile(ordered, q), floor), ceiling) for q in POLL_QUANTILES)
        tail = max(TAIL_STEP * _quantile(ordered, 0.5), 1e-3)
        return cls(tuple(ordered), targets, tail)

    @property
    def first(self) -> float:
        """Seconds after submit of the first poll."""
        return self.targets[0]

    @property
    def nearly_all(self) -> float:
        """Seconds after submit by which nearly every answer has been ready a while: the
        last target and a tail step (where a lost callback's fallback poll goes)."""
        return self.targets[-1] + self.tail

    def next_after(self, elapsed: float, gap: float) -> float:
        """Seconds after submit of the next poll of a captcha found not ready ``elapsed``
        seconds after its submit, at least ``gap`` later: the next target, or past the
        last one a tail step later."""
        earliest = elapsed + gap
        i = bisect.bisect_right(self.targets, earliest)
        if i < len(self.targets):
            return self.targets[i]
        return elapsed + max(self.tail, gap)
