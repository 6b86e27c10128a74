"""Checks of the documentation site beyond ``mkdocs build --strict``.

``python -m captcha_tasks_dev.docs_check SITE_DIR`` (run by ``make docs-check``):

- every internal link and image of the built HTML resolves to a file of the site, and
  every ``#anchor`` to an ``id`` in that file (the generated pages included, which
  mkdocs' own validation does not see);
- every repository path a page cites (a code span with a ``/`` and a file extension, or
  ending in ``/``, and any ``*.md``) is a file or folder of the repository: under the
  root, or under ``captcha_tasks/``, ``docs/``, ``deploy/`` or ``tests/`` as pages
  abbreviate them.

Prints the figures and each problem; exits 1 if there is any.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

__all__ = ["Report", "check_links", "check_paths", "main"]

ROOT = Path(__file__).resolve().parents[2]
#: Where a page's abbreviated path may start.
_BASES = ("", "captcha_tasks", "docs", "deploy", "tests")
_CODE = re.compile(r"`([^`\s]+)`")
_EXTENSIONS = (
    ".py",
    ".md",
    ".yml",
    ".yaml",
    ".lua",
    ".acl",
    ".conf",
    ".toml",
    ".json",
    ".png",
    ".svg",
    ".example",
    ".service",
    ".cfg",
)


@dataclass
class Report:
    pages: int = 0
    links: int = 0
    anchors: int = 0
    paths: int = 0
    problems: list[str] = field(default_factory=list)


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name"):
                self.ids.add(value)
            elif (name == "href" and tag in ("a", "link")) or (name == "src" and tag == "img"):
                self.refs.append(value)


def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8", errors="replace"))
    return page


def check_links(site: Path, report: Report) -> None:
    """Every internal href/src of ``site``'s pages, and its anchor."""
    parsed: dict[Path, _Page] = {}

    def page_of(path: Path) -> _Page:
        if path not in parsed:
            parsed[path] = _parse(path)
        return parsed[path]

    for html in sorted(site.rglob("*.html")):
        if html.name == "404.html" and html.parent == site:
            continue  # links from the site's root URL, wherever a page was not found
        report.pages += 1
        for ref in page_of(html).refs:
            parts = urlsplit(ref)
            if parts.scheme or parts.netloc or ref.startswith(("mailto:", "javascript:")):
                continue
            report.links += 1
            target = html if not parts.path else (html.parent / unquote(parts.path)).resolve()
            if target.is_dir():
                target = target / "index.html"
            where = html.relative_to(site)
            if not target.exists():
                report.problems.append(f"{where}: link {ref!r}: no such file in the site")
                continue
            if parts.fragment and target.suffix == ".html":
                report.anchors += 1
                if unquote(parts.fragment) not in page_of(target).ids:
                    report.problems.append(f"{where}: link {ref!r}: no such anchor")


def _cited(token: str) -> bool:
    if token.startswith(("/", ".", "~", "$")) or "://" in token or "{" in token or "*" in token:
        return False
    if token.endswith(".md"):
        return True
    return "/" in token and (token.endswith("/") or token.endswith(_EXTENSIONS))


def check_paths(docs: Path, report: Report) -> None:
    """Every repository path cited in code spans of the markdown pages exists."""
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text(encoding="utf-8")
        text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks are code
        # A line naming another repository (github.com/..., "same repo") cites its files.
        text = "\n".join(
            line
            for line in text.splitlines()
            if "github.com/" not in line and "same repo" not in line
        )
        for token in _CODE.findall(text):
            token = token.rstrip(".,:;)")
            if not _cited(token):
                continue
            report.paths += 1
            path = token.split(":")[0]
            if not any((ROOT / base / path).exists() for base in _BASES):
                where = page.relative_to(docs)
                report.problems.append(f"{where}: cites {token!r}, not in the repository")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    site = Path(args[0]) if args else ROOT / ".run" / "site"
    report = Report()
    check_links(site, report)
    check_paths(ROOT / "docs", report)
    for problem in report.problems:
        print(problem)
    print(
        f"docs-check: {report.pages} pages, {report.links} internal links "
        f"({report.anchors} with an anchor), {report.paths} cited repository paths: "
        f"{len(report.problems)} problems"
    )
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(main())
