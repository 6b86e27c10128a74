"""How the developer tools hear SIGINT and SIGTERM while they supervise processes."""

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Iterator
from types import FrameType

__all__ = ["SAME_REQUEST_SECONDS", "StopSignals", "terminate_on_sigterm"]

#: Signals closer together than this are one request to stop: ``make`` passes the SIGTERM
#: it gets on to its child, so one ``kill -TERM -<pgid>`` reaches the supervisor twice
#: within milliseconds. Only a signal that comes later means "hurry".
SAME_REQUEST_SECONDS = 0.5


class StopSignals:
    """SIGINT and SIGTERM as they arrive: the handler only records them.

    A handler that raises does so in whatever the main thread is doing: a second signal
    (``make`` passes SIGTERM on; people press Ctrl-C twice) would land in the stop
    sequence, say in ``proc.wait()`` while Flower stops, and the supervisor would die with
    the worker, the sandbox and Redis still running. So the supervisor looks at
    :attr:`first` between steps and in its wait loops, and the stop sequence asks
    :attr:`hurry`, which a later signal sets, whether to kill what is left at once.
    """

    def __init__(self) -> None:
        self.first: str | None = None
        self.hurry = False
        self._first_at = 0.0

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        now = time.monotonic()
        if self.first is None:
            self.first, self._first_at = signal.Signals(signum).name, now
        elif now - self._first_at >= SAME_REQUEST_SECONDS:
            self.hurry = True

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        sigs = (signal.SIGINT, signal.SIGTERM)
        previous = {sig: signal.signal(sig, self._handle) for sig in sigs}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


@contextlib.contextmanager
def terminate_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every ``finally`` stops what it started."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
