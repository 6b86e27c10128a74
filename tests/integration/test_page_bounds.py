"""A real worker's ``fetch_page`` against a loopback site serving huge and slow pages:
refused with a typed error past ``CAPTCHA_TASKS_MAX_PAGE_BYTES`` (its default) and
``CAPTCHA_TASKS_PAGE_DEADLINE``, the pool process's memory bounded, and the worker goes
on serving."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from captcha_tasks.errors import PageTooLarge, PageTooSlow
from captcha_tasks.worker.page_tasks import fetch_page
from tests.support.heavy_site import MB, HeavySite
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration


@pytest.fixture
def site() -> Iterator[HeavySite]:
    with HeavySite(drip_every=0.5, drip_for=60.0) as heavy:
        yield heavy


def _peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (``VmHWM``), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmHWM for {pid}")


def _pool_process(worker: Any) -> int:
    """The one pool process of a ``-c 1`` prefork worker."""
    pid = worker.proc.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


@pytest.mark.parametrize("path", ["/huge/150", "/chunked/150"], ids=["announced", "chunked"])
def test_a_150_mb_page_is_refused_and_the_pool_process_stays_small(
    celery_app: Any, worker_factory: Any, no_provider: str, site: HeavySite, path: str
) -> None:
    env = worker_env(no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=site.host)
    worker = worker_factory(env, concurrency=1)
    small = fetch_page.delay(f"{site.url}/small").get(timeout=30)
    assert small["status"] == 200 and small["solved"] is False
    pool = _pool_process(worker)
    before = _peak_rss_mb(pool)
    with pytest.raises(PageTooLarge, match=r"CAPTCHA_TASKS_MAX_PAGE_BYTES \(10,485,760 bytes\)"):
        fetch_page.delay(f"{site.url}{path}").get(timeout=60)
    grew = _peak_rss_mb(pool) - before
    # The default bound is 10 MiB: the page's bytes and its text, not 150 MB of either.
    assert grew < 40, f"the pool process's peak RSS grew {grew:.0f} MB"
    assert site.sent[path.split("/")[1]] < 40 * MB
    assert fetch_page.delay(f"{site.url}/small").get(timeout=30)["status"] == 200


def test_a_page_sent_a_byte_at_a_time_is_given_up_at_the_deadline(
    celery_app: Any, worker_factory: Any, no_provider: str, site: HeavySite
) -> None:
    env = worker_env(
        no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=site.host, CAPTCHA_TASKS_PAGE_DEADLINE="3"
    )
    worker_factory(env, concurrency=1)
    started = time.monotonic()
    with pytest.raises(PageTooSlow, match=r"took over CAPTCHA_TASKS_PAGE_DEADLINE \(3 s\)"):
        fetch_page.delay(f"{site.url}/drip").get(timeout=30)
    assert time.monotonic() - started < 10  # not the drip's 60 s
    assert site.sent["drip"] >= 4  # each byte came within the read timeout
    assert fetch_page.delay(f"{site.url}/small").get(timeout=30)["status"] == 200
