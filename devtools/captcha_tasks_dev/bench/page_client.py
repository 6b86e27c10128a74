"""The client of ``captcha-tasks-dev bench pages``: enqueues one run's pages, then exits.

Each run of the benchmark has its own Redis, and ``captcha_tasks.app`` takes its
broker and backend from the environment once per process, so the harness runs this
in a child process per run, with the run's environment::

    python -m captcha_tasks_dev.bench.page_client http://127.0.0.1:PORT 200 [--isolated]

It calls ``fetch_page.delay(f"{base}/page/{i}")`` (``isolated=True`` with
``--isolated``) for i in 0..N-1, as fast as it can, and prints one JSON line on
stdout: ``{"enqueued": {task_id: epoch seconds of its delay() call}, "end": epoch
seconds after the last}``.

With ``--get SECONDS`` it then collects the results the way a caller writes it,
``[r.get(timeout=SECONDS) for r in results]``, right after enqueueing, and adds
``"gets": {task_id: [epoch start, epoch end] of its get()}`` (``null`` for a get()
that raised): the harness compares them with when each result was stored.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

__all__ = ["enqueue_pages", "main"]


def enqueue_pages(
    base: str, count: int, *, isolated: bool, get_timeout: float | None = None
) -> dict[str, object]:
    """Enqueue ``count`` page fetches of ``base``/page/<i>; their ids and times (and, with
    ``get_timeout``, when each ``get()`` of a loop over them started and returned)."""
    from captcha_tasks.worker.app import app
    from captcha_tasks.worker.page_tasks import fetch_page

    expected = os.environ.get("CAPTCHA_TASKS_REDIS_URL")
    if expected and (app.conf.broker_url != expected or app.conf.result_backend != expected):
        raise SystemExit(
            f"captcha_tasks.app uses {app.conf.broker_url}, not the run's Redis {expected}"
        )
    enqueued: dict[str, float] = {}
    results = []
    for i in range(count):
        url = f"{base}/page/{i}"
        at = time.time()
        result = fetch_page.delay(url, isolated=True) if isolated else fetch_page.delay(url)
        enqueued[str(result.id)] = at
        results.append(result)
    out: dict[str, object] = {"enqueued": enqueued, "end": time.time()}
    if get_timeout is not None:
        gets: dict[str, list[float] | None] = {}
        for result in results:
            started = time.time()
            try:
                result.get(timeout=get_timeout, propagate=False)
            except Exception:  # a timeout: the harness counts the page as unfinished
                gets[str(result.id)] = None
                continue
            gets[str(result.id)] = [started, time.time()]
        out["gets"] = gets
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m captcha_tasks_dev.bench.page_client")
    parser.add_argument("base", help="the demo site's URL, e.g. http://127.0.0.1:8766")
    parser.add_argument("count", type=int, help="pages to enqueue")
    parser.add_argument("--isolated", action="store_true", help="fetch_page(isolated=True)")
    parser.add_argument(
        "--get",
        type=float,
        default=None,
        metavar="SECONDS",
        help="then [r.get(timeout=SECONDS) for r in results]",
    )
    args = parser.parse_args(argv)
    out = enqueue_pages(
        args.base.rstrip("/"), args.count, isolated=args.isolated, get_timeout=args.get
    )
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
