"""A real Scrapy crawl of the demo site's protected pages, for tests/integration/test_scrapy.py.

Run as ``python -m tests.support.scrapy_crawl --base URL --pages N --out DIR --mode MODE``
(Twisted's reactor starts once per process, so every crawl is a process of its own):

- ``shared``: both captcha_tasks middlewares, in place of Scrapy's CookiesMiddleware;
- ``cookies``: only CaptchaTasksCookiesMiddleware (the shared jar, no solving);
- ``plain``: Scrapy as it comes (the control).

Writes ``DIR/items.jsonl`` (one item per page: its number, title, heading, or the error
that dropped it) and ``DIR/stats.json`` (the crawl's stats). The cluster's configuration
(Redis, allowlist) comes from the environment, as for every worker.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import scrapy
from scrapy.crawler import CrawlerProcess
from twisted.python.failure import Failure

MIDDLEWARES: dict[str, dict[str, int | None]] = {
    "shared": {
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700,
        "captcha_tasks.contrib.scrapy.CaptchaTasksChallengeMiddleware": 585,
    },
    "cookies": {
        "scrapy.downloadermiddlewares.cookies.CookiesMiddleware": None,
        "captcha_tasks.contrib.scrapy.CaptchaTasksCookiesMiddleware": 700,
    },
    "plain": {},
}


class DemoPages(scrapy.Spider):
    """``/page/0`` .. ``/page/N-1`` of the demo site, one item per page."""

    name = "demo_pages"

    def __init__(self, base: str, pages: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.base = base
        self.pages = pages

    async def start(self) -> AsyncIterator[scrapy.Request]:
        for n in range(self.pages):
            yield scrapy.Request(
                f"{self.base}/page/{n}",
                callback=self.parse,
                errback=self.failed,
                cb_kwargs={"n": n},
            )

    def parse(self, response: scrapy.http.TextResponse, n: int) -> Iterator[dict[str, Any]]:
        yield {
            "n": n,
            "title": response.css("title::text").get(),
            "h1": response.css("h1::text").get(),
            "reissues": response.meta.get("captcha_tasks_reissues", 0),
        }

    def failed(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        yield {"n": request.cb_kwargs["n"], "error": f"{failure.type.__name__}: {failure.value}"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", required=True)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--mode", choices=sorted(MIDDLEWARES), default="shared")
    args = parser.parse_args()
    settings = {
        "DOWNLOADER_MIDDLEWARES": MIDDLEWARES[args.mode],
        "FEEDS": {str(args.out / "items.jsonl"): {"format": "jsonlines"}},
        # The most a crawl ever logs: every request, item and cookie debug line.
        "LOG_LEVEL": "DEBUG",
        "COOKIES_DEBUG": True,
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "CAPTCHA_TASKS_SOLVE_TIMEOUT": 60,
    }
    process = CrawlerProcess(settings, install_root_handler=True)
    crawler = process.create_crawler(DemoPages)
    process.crawl(crawler, base=args.base, pages=args.pages)
    process.start()
    assert crawler.stats is not None
    stats = crawler.stats.get_stats()
    (args.out / "stats.json").write_text(json.dumps(stats, default=str, indent=1))


if __name__ == "__main__":
    main()
