"""The client of ``captcha-tasks bench pages``: enqueues one run's pages, then exits.

Each run of the benchmark has its own Redis, and ``captcha_tasks.app`` takes its
broker and backend from the environment once per process, so the harness runs this
in a child process per run, with the run's environment::

    python -m captcha_tasks.devtools.bench.page_client http://127.0.0.1:PORT 200 [--isolated]

It calls ``fetch_page.delay(f"{base}/page/{i}")`` (``isolated=True`` with
``--isolated``) for i in 0..N-1, as fast as it can, and prints one JSON line on
stdout: ``{"enqueued": {task_id: epoch seconds of its delay() call}, "end": epoch
seconds after the last}``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

__all__ = ["enqueue_pages", "main"]


def enqueue_pages(base: str, count: int, *, isolated: bool) -> dict[str, object]:
    """Enqueue ``count`` page fetches of ``base``/page/<i>; their ids and times."""
    from ...worker.app import app
    from ...worker.page_tasks import fetch_page

    expected = os.environ.get("CAPTCHA_TASKS_REDIS_URL")
    if expected and (app.conf.broker_url != expected or app.conf.result_backend != expected):
        raise SystemExit(
            f"captcha_tasks.app uses {app.conf.broker_url}, not the run's Redis {expected}"
        )
    enqueued: dict[str, float] = {}
    for i in range(count):
        url = f"{base}/page/{i}"
        at = time.time()
        result = fetch_page.delay(url, isolated=True) if isolated else fetch_page.delay(url)
        enqueued[str(result.id)] = at
    return {"enqueued": enqueued, "end": time.time()}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m captcha_tasks.devtools.bench.page_client")
    parser.add_argument("base", help="the demo site's URL, e.g. http://127.0.0.1:8766")
    parser.add_argument("count", type=int, help="pages to enqueue")
    parser.add_argument("--isolated", action="store_true", help="fetch_page(isolated=True)")
    args = parser.parse_args(argv)
    out = enqueue_pages(args.base.rstrip("/"), args.count, isolated=args.isolated)
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
