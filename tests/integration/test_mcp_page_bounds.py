"""The MCP server's ``fetch_page`` tool is bounded as the task is: a 40 MB page comes
back as a tool error naming ``CAPTCHA_TASKS_MAX_PAGE_BYTES``, the page left unread."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.heavy_site import HeavySite
from tests.support.workers import worker_env

pytest.importorskip("mcp")
from tests.integration.test_mcp import _error, _json, _run, _stdio

pytestmark = pytest.mark.integration


@pytest.fixture
def site() -> Iterator[HeavySite]:
    with HeavySite() as heavy:
        yield heavy


def test_fetch_page_through_mcp_refuses_a_40_mb_page(
    celery_app: Any, worker_factory: Any, no_provider: str, site: HeavySite
) -> None:
    env = worker_env(no_provider, CAPTCHA_TASKS_ALLOWED_DOMAINS=site.host)
    worker_factory(env, concurrency=1)

    async def scenario() -> None:
        async with _stdio(env, "--agent", "pages") as session:
            huge = _error(await session.call_tool("fetch_page", {"url": f"{site.url}/huge/40"}))
            assert "PageTooLarge" in huge and "CAPTCHA_TASKS_MAX_PAGE_BYTES" in huge, huge
            assert "/huge/40" not in huge  # the host and port, not the page's path
            small = _json(await session.call_tool("fetch_page", {"url": f"{site.url}/small"}))
            assert small["status"] == 200 and small["solved"] is False

    _run(scenario())
    assert site.sent["huge"] < 20 * 1024 * 1024
