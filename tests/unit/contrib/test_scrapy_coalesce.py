"""One cluster solve in flight per host inside a crawl."""

from __future__ import annotations

import asyncio

import pytest

from captcha_tasks.contrib.scrapy.coalesce import HostSolves


def test_concurrent_challenges_of_a_host_share_one_solve() -> None:
    async def scenario() -> None:
        solves: HostSolves[str] = HostSolves()
        calls: list[str] = []
        gate = asyncio.Event()

        async def solve(host: str) -> str:
            calls.append(host)
            await gate.wait()
            return f"cleared {host}"

        waiters = [asyncio.ensure_future(solves.run("a:80", lambda: solve("a"))) for _ in range(5)]
        other = asyncio.ensure_future(solves.run("b:80", lambda: solve("b")))
        await asyncio.sleep(0)
        assert solves.in_flight("a:80") and solves.in_flight("b:80")
        gate.set()
        assert await asyncio.wait_for(asyncio.gather(*waiters), 5) == ["cleared a"] * 5
        assert await asyncio.wait_for(other, 5) == "cleared b"
        assert sorted(calls) == ["a", "b"] and solves.started == 2
        assert not solves.in_flight("a:80")

    asyncio.run(scenario())


def test_a_failure_reaches_every_waiter_and_the_next_challenge_solves_again() -> None:
    async def scenario() -> None:
        solves: HostSolves[str] = HostSolves()

        async def fail() -> str:
            await asyncio.sleep(0.01)
            raise RuntimeError("ChallengeRejected")

        async def succeed() -> str:
            return "ok"

        waiters = [solves.run("a", fail) for _ in range(3)]
        results = await asyncio.wait_for(asyncio.gather(*waiters, return_exceptions=True), 5)
        assert [type(r) for r in results] == [RuntimeError] * 3
        assert not solves.cleared_since("a", 0.0)  # a failure clears nothing
        assert await solves.run("a", succeed) == "ok"
        assert solves.started == 2

    asyncio.run(scenario())


def test_cleared_since_tells_stale_requests_from_fresh_ones() -> None:
    now = [100.0]
    solves: HostSolves[str] = HostSolves(clock=lambda: now[0])

    async def solve() -> str:
        return "ok"

    assert not solves.cleared_since("a", 50.0)
    asyncio.run(solves.run("a", solve))  # ends at 100
    assert solves.cleared_since("a", 99.0)  # read the jar before: stale cookies
    assert not solves.cleared_since("a", 100.5)  # read after: a new challenge is real
    assert not solves.cleared_since("a", None)
    assert not solves.cleared_since("b", 0.0)


def test_a_cancelled_waiter_leaves_the_solve_to_the_others_and_close_cancels_it() -> None:
    async def scenario() -> None:
        solves: HostSolves[str] = HostSolves()
        gate = asyncio.Event()

        async def solve() -> str:
            await gate.wait()
            return "ok"

        first = asyncio.ensure_future(solves.run("a", solve))
        second = asyncio.ensure_future(solves.run("a", solve))
        await asyncio.sleep(0)
        first.cancel()
        gate.set()
        assert await asyncio.wait_for(second, 5) == "ok"
        with pytest.raises(asyncio.CancelledError):
            await first

        never = asyncio.Event()

        async def hangs() -> str:
            await never.wait()
            return "never"

        stuck = asyncio.ensure_future(solves.run("b", hangs))
        await asyncio.sleep(0)
        await asyncio.wait_for(solves.aclose(), 5)
        assert not solves.in_flight("b")
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(stuck, 5)

    asyncio.run(scenario())
