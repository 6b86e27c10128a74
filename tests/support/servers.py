"""The test servers' life cycle, written once: serve from a daemon thread between
``start()`` and ``stop()``, or for the length of a ``with`` block.

A subclass says how it serves (:meth:`BackgroundServer._serve`, run in the thread
until it returns) and how that loop is made to return (:meth:`BackgroundServer._shutdown`);
:meth:`BackgroundServer._cleanup` runs once the thread ended (close what is left, check
that nothing outlived the stop)::

    class Echo(BackgroundServer):
        thread_name = "echo"

        def _serve(self) -> None: ...      # accept until the listener is closed
        def _shutdown(self) -> None: ...   # close the listener
"""

from __future__ import annotations

import threading
from types import TracebackType

from typing_extensions import Self

__all__ = ["BackgroundServer"]


class BackgroundServer:
    #: The serving thread's name (in thread dumps and leak reports).
    thread_name = "test-server"
    #: Seconds :meth:`stop` waits for the serving thread.
    join_timeout = 5.0

    def __init__(self) -> None:
        self._thread = threading.Thread(target=self._serve, name=self.thread_name, daemon=True)

    def _serve(self) -> None:
        raise NotImplementedError

    def _shutdown(self) -> None:
        raise NotImplementedError

    def _cleanup(self) -> None:
        """After the serving thread ended (or ``join_timeout`` passed)."""

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._shutdown()
        self._thread.join(timeout=self.join_timeout)
        self._cleanup()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
