"""One cluster solve in flight per host inside a crawl; every challenged response of
that host awaits the same one.

Without it, the 16 responses a crawl has in flight when a site starts challenging would
send 16 ``fetch_page`` tasks; the cluster would still spend one solve (its session lock),
but 15 tasks would park, wake and fetch the page for nothing. The cluster's lock
coalesces across processes; this coalesces inside one, before anything is sent.

:meth:`HostSolves.cleared_since` answers the other half: a response challenged because
its request went out *before* the last solve of its host finished needs no new solve,
only a re-issue with the cookies that solve left.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

__all__ = ["HostSolves"]

T = TypeVar("T")


class HostSolves(Generic[T]):
    """Single flight per host: :meth:`run` starts ``solve()`` unless one is running for
    the host, and every caller awaits that one. A caller that is cancelled (its download
    was) leaves the solve running for the others."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._running: dict[str, asyncio.Future[T]] = {}
        self._cleared: dict[str, float] = {}
        #: Solves started (not joined): what a crawl's stats count.
        self.started = 0

    def in_flight(self, host: str) -> bool:
        return host in self._running

    def cleared_since(self, host: str, moment: float | None) -> bool:
        """Whether a solve of ``host`` succeeded after ``moment`` (this clock's seconds;
        None: unknown, so no)."""
        cleared = self._cleared.get(host)
        return moment is not None and cleared is not None and cleared > moment

    async def run(self, host: str, solve: Callable[[], Awaitable[T]]) -> T:
        future = self._running.get(host)
        if future is None:
            future = asyncio.ensure_future(solve())
            self.started += 1
            self._running[host] = future
            future.add_done_callback(lambda done: self._finished(host, done))
        return await asyncio.shield(future)

    def _finished(self, host: str, future: asyncio.Future[T]) -> None:
        if self._running.get(host) is future:
            del self._running[host]
        if future.cancelled():
            return
        if future.exception() is None:  # also marks a failure as retrieved: no warning
            self._cleared[host] = self._clock()

    async def aclose(self) -> None:
        """Cancel the solves still running (the crawl is closing) and wait for them."""
        running = list(self._running.values())
        for future in running:
            future.cancel()
        await asyncio.gather(*running, return_exceptions=True)
