"""Screenshots of the built documentation site, in headless Chromium through Playwright.

``python -m captcha_tasks_dev.docs_screenshots SITE_DIR --out docs`` (``make
docs-screenshots``) serves ``SITE_DIR`` (``mkdocs build``'s output) on a free loopback
port, opens :data:`PAGES` in Debian's ``chromium`` (``make browser``) and writes
``site-<name>.png`` beside the pages. The server stops and the browser closes before it
returns.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import threading
from pathlib import Path

__all__ = ["PAGES", "main", "shoot"]

#: Screenshot name -> the page's path in the site.
PAGES = {
    "home": "",
    "guide": "guides/providers/",
    "reference": "reference/settings/",
}
CHROMIUM = "/usr/bin/chromium"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def shoot(site: Path, out: Path, *, width: int = 1280, height: int = 860) -> list[Path]:
    """Every page of :data:`PAGES`, rendered from ``site``; the paths written."""
    from playwright.sync_api import sync_playwright

    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    written: list[Path] = []
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}/"
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=CHROMIUM,
                args=["--no-sandbox", "--disable-background-networking"],
            )
            try:
                page = browser.new_page(viewport={"width": width, "height": height})
                for name, path in PAGES.items():
                    page.goto(base + path, wait_until="load", timeout=30_000)
                    target = out / f"site-{name}.png"
                    page.screenshot(path=str(target))
                    written.append(target)
            finally:
                browser.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site", type=Path, help="the built site (mkdocs build's site_dir)")
    parser.add_argument("--out", type=Path, default=Path("docs"), help="where the PNGs go")
    args = parser.parse_args(argv)
    for path in shoot(args.site, args.out):
        print(f"screenshot: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
