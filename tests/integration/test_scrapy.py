"""A real Scrapy crawl (a process of its own) of the demo site's protected pages, with
captcha_tasks.contrib.scrapy's middlewares and a real worker cluster behind them."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from captcha_tasks.engine.acceptance import AcceptanceBook
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_dev.procs import wait_until
from tests.support.secret_scan import leaks
from tests.support.workers import ROOT, worker_env

pytestmark = pytest.mark.integration

PAGES = 100
#: Seconds a crawl may take (it takes a few): then it is killed by PID (before pytest's
#: own 120 s timeout would stop the test).
CRAWL_TIMEOUT = 90.0


def _host(sandbox: Any) -> str:
    return str(sandbox.demo_url.split("//")[1])


def _env(sandbox: Any) -> dict[str, str]:
    return worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=_host(sandbox))


def _crawl(sandbox: Any, out: Path, mode: str) -> tuple[list[dict[str, Any]], dict[str, Any], str]:
    """Run the crawl; its items by page number, its stats and its log."""
    out.mkdir(parents=True, exist_ok=True)
    # The crawl gets what a worker gets of the cluster, and nothing of the solver's key.
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAPTCHAAI")}
    env.update(CAPTCHA_TASKS_ALLOWED_DOMAINS=_host(sandbox), PYTHONUNBUFFERED="1")
    argv = [
        sys.executable,
        "-m",
        "tests.support.scrapy_crawl",
        "--base",
        sandbox.demo_url,
        "--pages",
        str(PAGES),
        "--out",
        str(out),
        "--mode",
        mode,
    ]
    started = time.monotonic()
    # On a timeout subprocess.run kills the crawl (by its PID) before raising.
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=CRAWL_TIMEOUT, check=False
    )
    log = done.stdout + done.stderr
    (out / "crawl.log").write_text(log)
    assert done.returncode == 0, log[-4000:]
    print(f"crawl ({mode}): {time.monotonic() - started:.1f} s")
    items = [json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()]
    stats = json.loads((out / "stats.json").read_text())
    return sorted(items, key=lambda item: item["n"]), stats, log


def _secrets(sandbox: Any) -> set[str]:
    """Every validation cookie value in the shared jar, and every token the sandbox
    issued (read from its memory: nothing else shows them)."""
    settings = get_settings()
    values = {c.value for c in CookieStore(state_redis(settings), settings).load(_host(sandbox))}
    return values | set(sandbox.demo.state._tokens)


def test_a_crawl_of_100_protected_pages_spends_at_most_two_solves(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, tmp_path: Path
) -> None:
    env = _env(demo_sandbox)
    worker_factory(env, concurrency=2)
    worker_factory(env, concurrency=2)
    items, stats, log = _crawl(demo_sandbox, tmp_path / "crawl", "shared")

    assert [item["n"] for item in items] == list(range(PAGES))
    assert [item.get("error") for item in items] == [None] * PAGES
    assert all(item["h1"] == f"page {item['n']}" for item in items), items[:3]
    solves = demo_sandbox.stats()["submitted"]
    site = demo_sandbox.demo.stats()
    print(
        f"solves: {solves}, site: {site}, crawl: "
        f"{ {k: v for k, v in stats.items() if k.startswith('captcha_tasks/')} }"
    )
    assert 1 <= solves <= 2
    assert 1 <= site["tokens_accepted"] <= 2 and site["tokens_rejected"] == 0
    assert stats["item_scraped_count"] == PAGES
    assert stats.get("captcha_tasks/gave_up", 0) == 0
    # The requests that met the challenge waited for one fetch_page, not one each.
    assert stats["captcha_tasks/cluster_fetches"] <= 2 < stats["captcha_tasks/reissued"]
    # Each token the crawl's solves used is counted accepted, through the cluster.
    settings = get_settings()
    tally = AcceptanceBook(state_redis(settings), settings).window("recaptcha_v2")["default"]
    assert (tally.accepted, tally.rejected) == (solves, 0)
    assert stats.get("captcha_tasks/tokens_refused", 0) == 0
    # The validation cookie the cluster earned is in the shared jar...
    jar = CookieStore(state_redis(settings), settings).load(_host(demo_sandbox))
    assert "qa_validation_cookie" in {c.name for c in jar}
    # ... and none of its values, nor any token, is in the crawl's log (COOKIES_DEBUG on).
    secrets = _secrets(demo_sandbox)
    assert secrets
    assert not leaks({"crawl log": log}, secrets)
    assert "Cookie: " not in log and "Set-Cookie: " not in log


def test_a_site_refusing_tokens_is_counted_and_the_crawl_goes_on(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, tmp_path: Path
) -> None:
    # Seed 1: the site refuses the first good token it sees and accepts the next one.
    sandbox = sandbox_factory(demo_port=0, reject_rates={"*": 0.5}, seed=1)
    worker_factory(_env(sandbox), concurrency=2)
    items, stats, _ = _crawl(sandbox, tmp_path / "crawl", "shared")
    assert [item.get("error") for item in items] == [None] * PAGES
    refused = stats.get("captcha_tasks/tokens_refused", 0)
    settings = get_settings()
    tally = AcceptanceBook(state_redis(settings), settings).window("recaptcha_v2")["default"]
    wait_until(lambda: sandbox.stats()["reports_bad"] >= refused, timeout=30, what="reports")
    print(f"crawl with a refusing site: {tally}, refused per the crawl's stats: {refused}")
    assert refused >= 1 and tally.rejected == refused == sandbox.stats()["reports_bad"]
    assert tally.accepted + tally.rejected == sandbox.stats()["submitted"]


def test_without_the_middlewares_every_item_is_a_challenge_page(
    demo_sandbox: Any, tmp_path: Path
) -> None:
    # The control: the same crawl with Scrapy's own cookies scrapes 100 challenge pages.
    items, _, _ = _crawl(demo_sandbox, tmp_path / "crawl", "plain")
    assert len(items) == PAGES
    assert {item["h1"] for item in items} == {"Checking that you are not a robot"}
    assert demo_sandbox.demo.stats()["pages_served"] == 0
    assert demo_sandbox.stats()["submitted"] == 0


def test_a_spider_is_the_same_visitor_as_the_workers(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, tmp_path: Path
) -> None:
    # A worker passes the challenge; a crawl with only the shared jar (no solving) uses
    # the cookie it left, and the cookies of the crawl are the workers' next visit.
    worker_factory(_env(demo_sandbox))
    first = fetch_page.delay(f"{demo_sandbox.demo_url}/page/worker").get(timeout=60)
    assert first["solved"] and first["status"] == 200
    items, stats, _ = _crawl(demo_sandbox, tmp_path / "crawl", "cookies")
    assert all(item["h1"] == f"page {item['n']}" for item in items) and len(items) == PAGES
    assert stats["captcha_tasks/cookies/requests_with_shared_cookies"] == PAGES
    after = fetch_page.delay(f"{demo_sandbox.demo_url}/page/after").get(timeout=60)
    assert after == {**after, "status": 200, "solved": False, "source": None}
    assert demo_sandbox.stats()["submitted"] == 1


def test_the_example_spider_of_the_docs_runs_as_written(
    celery_app: Any, demo_sandbox: Any, worker_factory: Any, tmp_path: Path
) -> None:
    doc = (ROOT / "docs" / "SCRAPY.md").read_text()
    example = doc.split("## Example", 1)[1]
    spider = re.search(r"```python\n(.*?)```", example, re.DOTALL)
    assert spider is not None
    (tmp_path / "demo_spider.py").write_text(spider.group(1))
    worker_factory(_env(demo_sandbox))
    env = {**os.environ, "CAPTCHA_TASKS_ALLOWED_DOMAINS": _host(demo_sandbox)}
    argv = [
        sys.executable,
        "-m",
        "scrapy",
        "runspider",
        "demo_spider.py",
        "-o",
        "pages.jsonl",
        "-a",
        f"base={demo_sandbox.demo_url}",
        "-a",
        "pages=10",
        "-s",
        "TELNETCONSOLE_ENABLED=False",
    ]
    done = subprocess.run(
        argv,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=CRAWL_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    items = [json.loads(line) for line in (tmp_path / "pages.jsonl").read_text().splitlines()]
    assert sorted(item["h1"] for item in items) == sorted(f"page {n}" for n in range(10))
    assert done.stderr.count("fetch_page on the cluster") == 1
    assert demo_sandbox.stats()["submitted"] == 1
