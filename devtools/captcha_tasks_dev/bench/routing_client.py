"""The client of ``captcha-tasks-dev bench routing``: fetches one run's pages, a few at a time.

A scraper with ``--in-flight K`` pages open at once: it sends
``fetch_page.delay(f"{base}/page/{i}", isolated=True)`` for the first K pages and a new
one each time one ends, so later pages are routed by what the earlier ones taught.
With ``--change-at P`` it posts ``--change-body`` (JSON) to ``--change-url`` just
before sending page P (the sandbox's ``/admin/config``: the site changes its mind
mid-run). Run in a child process with the run's environment (the app reads its Redis
once per process)::

    python -m captcha_tasks_dev.bench.routing_client http://127.0.0.1:PORT 400 \\
        --in-flight 16 --change-at 400 --change-url URL --change-body JSON

Prints one JSON line: ``{"pages": [{"i", "task_id", "sent", "ended", "status",
"attempts", "error"}...], "changed_at": epoch seconds or null}``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["fetch_pages", "main"]


def fetch_pages(
    base: str,
    count: int,
    *,
    in_flight: int,
    timeout: float,
    change_at: int | None = None,
    change_url: str = "",
    change_body: str = "{}",
) -> dict[str, Any]:
    """Fetch ``count`` pages, ``in_flight`` at a time; what became of each."""
    import requests

    from captcha_tasks.worker.page_tasks import fetch_page

    pages: list[dict[str, Any]] = []
    open_: dict[int, Any] = {}
    changed_at: float | None = None
    deadline = time.monotonic() + timeout
    following = 0
    while following < count or open_:
        while following < count and len(open_) < in_flight:
            if change_at is not None and following == change_at and change_url:
                answer = requests.post(change_url, json=json.loads(change_body), timeout=10)
                answer.raise_for_status()
                changed_at = time.time()
            result = fetch_page.delay(f"{base}/page/{following}", isolated=True)
            record = {"i": following, "task_id": result.id, "sent": time.time()}
            pages.append(record)
            open_[following] = (result, record)
            following += 1
        if time.monotonic() > deadline:
            break
        for i, (result, record) in list(open_.items()):
            if not result.ready():
                continue
            del open_[i]
            record["ended"] = time.time()
            try:
                page = result.get(timeout=10)
                record.update(status=page.get("status"), attempts=page.get("attempts"))
            except Exception as exc:  # the page's failure is a figure of the run
                record["error"] = type(exc).__name__
        time.sleep(0.01)
    for _, record in open_.values():
        record["error"] = "unfinished"
    return {"pages": pages, "changed_at": changed_at}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m captcha_tasks_dev.bench.routing_client")
    parser.add_argument("base", help="the demo site's URL")
    parser.add_argument("count", type=int, help="pages to fetch")
    parser.add_argument("--in-flight", type=int, default=16, help="pages open at once")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for the run")
    parser.add_argument("--change-at", type=int, default=None, help="page to change before")
    parser.add_argument("--change-url", default="", help="URL to POST the change to")
    parser.add_argument("--change-body", default="{}", help="JSON body of the change")
    args = parser.parse_args(argv)
    out = fetch_pages(
        args.base.rstrip("/"),
        args.count,
        in_flight=args.in_flight,
        timeout=args.timeout,
        change_at=args.change_at,
        change_url=args.change_url,
        change_body=args.change_body,
    )
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
