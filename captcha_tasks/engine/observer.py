"""What the engine and the solve tasks report, and who listens: one interface, many observers.

The engine reports every event once, to a :class:`FanOut`: its own counters
(:class:`EngineStats`, for tests and benchmarks) and the process's installed observer
(:func:`solve_observer`: a no-op until a worker enables metrics and installs
:class:`~captcha_tasks.monitor.metrics.PrometheusObserver`). Solve tasks in prefork
children report tokens served from a pool to the installed observer alone.

``source`` is ``api`` (solved for a caller), ``fill`` (solved for a token pool) or
``pool`` (served from a pool).
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from ..errors import CaptchaTasksError, SubmitUncertain, TransientSolverError

__all__ = [
    "INSTALLED",
    "EngineStats",
    "FanOut",
    "NullObserver",
    "SolveObserver",
    "set_solve_observer",
    "solve_observer",
]

log = logging.getLogger(__name__)


class SolveObserver(Protocol):
    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        """One submit to the provider: accepted (``error`` None) or refused."""

    def polled(self) -> None:
        """One poll request to the provider (a batch of captcha ids counts once)."""

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        """A request got its answer: ``seconds`` from submit, after ``polls`` polls."""

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        """A request ended with ``error``."""

    def noted(self, event: str, n: int = 1) -> None:
        """Something the engine did that is no solve's outcome: a retry, a pause, a
        crash recovered (``paused``, ``resubmits_after_crash``, ``send_skipped``, ...)."""


class NullObserver:
    """Records nothing (metrics off); a base for observers that want a few events."""

    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        pass

    def polled(self) -> None:
        pass

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        pass

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        pass

    def noted(self, event: str, n: int = 1) -> None:
        pass


_observer: SolveObserver = NullObserver()


def solve_observer() -> SolveObserver:
    """This process's observer (prefork children inherit the main process's)."""
    return _observer


def set_solve_observer(observer: SolveObserver | None) -> SolveObserver:
    """Install ``observer`` (``None``: the no-op) for this process; returns the previous."""
    global _observer
    previous, _observer = _observer, observer if observer is not None else NullObserver()
    return previous


class _Installed:
    """Whatever observer is installed when an event happens: the engine may start before
    the worker's metrics step installs Prometheus, and must not keep the no-op."""

    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        _observer.submitted(captcha_type, error)

    def polled(self) -> None:
        _observer.polled()

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        _observer.solved(captcha_type, source, seconds=seconds, polls=polls)

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        _observer.failed(captcha_type, source, error)

    def noted(self, event: str, n: int = 1) -> None:
        _observer.noted(event, n)


#: The process's installed observer, looked up at each event.
INSTALLED: SolveObserver = _Installed()


class FanOut:
    """Every event to each observer in turn. An observer that raises is logged (once)
    and skipped: instrumentation must never break a solve."""

    def __init__(self, *observers: SolveObserver) -> None:
        self.observers = observers
        self._warned: set[int] = set()

    def _each(self, what: str, call: str, *args: object, **kwargs: object) -> None:
        for observer in self.observers:
            try:
                getattr(observer, call)(*args, **kwargs)
            except Exception:
                if id(observer) not in self._warned:
                    self._warned.add(id(observer))
                    log.warning(
                        "observer %r failed to record %s (not logged again)",
                        observer,
                        what,
                        exc_info=True,
                    )

    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        self._each("a submit", "submitted", captcha_type, error)

    def polled(self) -> None:
        self._each("a poll", "polled")

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        self._each("a solve", "solved", captcha_type, source, seconds=seconds, polls=polls)

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        self._each("a failure", "failed", captcha_type, source, error)

    def noted(self, event: str, n: int = 1) -> None:
        self._each(event, "noted", event, n)


class EngineStats:
    """One engine's counters, by name (for tests, benchmarks and ``stats`` commands)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: dict[str, int] = {}

    def add(self, name: str, n: int = 1) -> None:
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + n

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.counts)

    # -- as an observer -------------------------------------------------------------------

    def submitted(self, captcha_type: str, error: CaptchaTasksError | None = None) -> None:
        if error is None:
            self.add("submitted")
        elif isinstance(error, SubmitUncertain):
            self.add("submit_uncertain")
        elif isinstance(error, TransientSolverError):
            self.add(f"submit_retry:{error.code}")

    def polled(self) -> None:
        self.add("poll_requests")

    def solved(
        self,
        captcha_type: str,
        source: str,
        *,
        seconds: float | None = None,
        polls: int | None = None,
    ) -> None:
        self.add("solved")
        if polls is not None:
            self.add("polls_of_solved", polls)
        if source == "fill":
            self.add("pooled")

    def failed(self, captcha_type: str, source: str, error: CaptchaTasksError) -> None:
        self.add(f"failed:{error.code}")

    def noted(self, event: str, n: int = 1) -> None:
        self.add(event, n)
