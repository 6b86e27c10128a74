"""``python -m tests.support.aio_caller COUNT PAGEURL``: one event loop awaits COUNT
reCAPTCHA v2 solves at once through :mod:`captcha_tasks.aio`, then collects the same
results with ``.get()``, and prints one JSON line: the most OS threads the process had
while it waited, how long the awaits took, and whether both ways gave the same results.

A process of its own so that the count of threads is the caller's alone (the test
process serves the sandbox from threads)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from typing import Any

from captcha_tasks import aio

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"


def _threads() -> int:
    return len(os.listdir("/proc/self/task"))


async def _sample(peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], _threads())
        await asyncio.sleep(0.005)


async def main(count: int, pageurl: str) -> dict[str, Any]:
    peak, stop = [_threads()], asyncio.Event()
    sampler = asyncio.ensure_future(_sample(peak, stop))
    started = time.monotonic()
    sent = [
        aio.send("captcha_tasks.solve_recaptcha_v2", SITEKEY, f"{pageurl}?n={i}")
        for i in range(count)
    ]
    awaited = await asyncio.gather(*(aio.result(r, timeout=300) for r in sent))
    elapsed = time.monotonic() - started
    stop.set()
    await sampler
    by_get = [r.get(timeout=30) for r in sent]
    return {
        "count": len(awaited),
        "peak_threads": peak[0],
        "seconds": round(elapsed, 2),
        "same_as_get": awaited == by_get,
        "distinct_solutions": len({a["solution"] for a in awaited}),
        "captcha_ids": len({a["captcha_id"] for a in awaited}),
    }


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(int(sys.argv[1]), sys.argv[2]))), flush=True)
