"""What an engine's provider calls act on: the parts its :class:`~.submit.Submitter` and
:class:`~.poll.Poller` share, built once by the engine (:class:`~.loop.Engine`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..settings import Settings
from .breaker import Breaker
from .finish import Finisher
from .observer import SolveObserver
from .queue import SolveQueue
from .refusal import KeyRefusal
from .retries import RetryLog
from .timing import FirstPollLearner, PollGrid

__all__ = ["EngineParts"]


@dataclasses.dataclass(frozen=True, kw_only=True)
class EngineParts:
    """One engine's parts that its submits and polls share: the jobs' state in Redis
    (``queue``), ending a job once (``finisher``), the pause after a refused key
    (``refusal``), the provider's circuit breaker (``breaker``), when captchas are read
    (``grid``, ``learner``), and where what happened is told (``observer``, ``retries``;
    ``name`` in log lines), all timed by ``clock``."""

    settings: Settings
    queue: SolveQueue
    finisher: Finisher
    refusal: KeyRefusal
    breaker: Breaker
    grid: PollGrid
    learner: FirstPollLearner
    observer: SolveObserver
    retries: RetryLog
    name: str
    clock: Callable[[], float]
