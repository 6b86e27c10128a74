"""captcha_tasks.contrib.playwright in a real headless Chromium (Debian's, through
Playwright's ``executable_path``) against the sandbox's demo site, solving through
real workers, and the cookies going both ways between the browser and the workers."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from captcha_tasks import aio
from captcha_tasks.contrib import playwright as playwright_contrib
from captcha_tasks.contrib.playwright import (
    export_cookies,
    find_widget,
    import_cookies,
    solve_on_page,
)
from captcha_tasks.engine.acceptance import AcceptanceBook
from captcha_tasks.errors import ChallengeNotFound, TargetNotAllowed
from captcha_tasks.session.cookies import CookieStore
from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_sandbox.demo_widgets import CALLBACK_NAME, CALLBACK_STORAGE_KEY, widgets
from tests.support.workers import worker_env

#: Debian's chromium (``make browser``); CHROMIUM=... points at another build.
CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
#: Without the background-networking flags Chromium keeps dialling Google's hosts,
#: which this closed network refuses by the dozen; --no-sandbox: tests run as root.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not CHROMIUM.exists(),
        reason=f"Debian's chromium is not installed ({CHROMIUM}): run `make browser`",
    ),
]

T = TypeVar("T")


class Browser:
    """A headless Chromium with a fresh profile, driven from its own event loop."""

    def __init__(self, profile: Path) -> None:
        from playwright.async_api import async_playwright

        self.loop = asyncio.new_event_loop()
        self._playwright = self.run(async_playwright().start())
        chromium = self._playwright.chromium
        self.context = self.run(
            chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
        )
        self.context.set_default_timeout(15_000)

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 90) -> T:
        return self.loop.run_until_complete(asyncio.wait_for(coro, timeout))

    def close(self) -> None:
        try:
            self.run(self.context.close(), timeout=30)
            self.run(aio.aclose(), timeout=30)  # this loop's result connection
        finally:
            try:
                self.run(self._playwright.stop(), timeout=30)
            finally:
                self.loop.close()


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Browser]:
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    started = Browser(profile)
    yield started
    started.close()
    shutil.rmtree(profile, ignore_errors=True)


def _host(sandbox: Any) -> str:
    return str(sandbox.demo_url.split("//")[1])


@pytest.fixture
def allowed(demo_sandbox: Any, settings_env: Any) -> str:
    """The demo host allowlisted in this process (the workers get it from ``_env``)."""
    settings_env(CAPTCHA_TASKS_ALLOWED_DOMAINS=_host(demo_sandbox))
    return _host(demo_sandbox)


def _env(sandbox: Any) -> dict[str, str]:
    return worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=_host(sandbox))


def _jar_names(host: str) -> set[str]:
    settings = get_settings()
    return {c.name for c in CookieStore(state_redis(settings), settings).load(host)}


def test_a_browser_passes_the_challenge_and_workers_read_on_without_a_solve(
    browser: Browser, demo_sandbox: Any, worker_factory: Any, celery_app: Any, allowed: str
) -> None:
    worker_factory(_env(demo_sandbox))
    demo = demo_sandbox.demo_url

    async def scenario() -> tuple[Any, int, Any]:
        page = await browser.context.new_page()
        await page.goto(f"{demo}/page/1")
        assert await page.title() == "Just a moment..."
        solved = await solve_on_page(page, timeout=60)
        async with page.expect_navigation():
            await page.click("button[type=submit]")
        assert await page.inner_text("h1") == "page 1"
        # The page shows no widget now: the site accepted the token, counted once.
        verdict = await solved.confirm(page)
        return solved, await export_cookies(browser.context, demo), verdict

    solved, written, verdict = browser.run(scenario())
    assert verdict == {"task_id": solved.task_id, "counted": True, "verdict": "accepted"}
    settings = get_settings()
    tally = AcceptanceBook(state_redis(settings), settings).window("recaptcha_v2")["default"]
    assert (tally.accepted, tally.rejected) == (1, 0)
    assert (solved.type, solved.sitekey) == ("recaptcha_v2", demo_sandbox.config.demo_sitekey)
    assert solved.source == "api" and solved.captcha_id and solved.callback is None
    assert solved.fields == 1 and solved.pageurl == f"{demo}/page/1"
    assert solved.token and solved.token not in repr(solved)
    # The validation cookie and the site's session cookie the form was bound to.
    assert written == 2 and {"qa_validation_cookie", "demo_visitor"} <= _jar_names(allowed)

    page = fetch_page.delay(f"{demo}/page/2").get(timeout=60)
    assert page["status"] == 200 and page["solved"] is False
    assert demo_sandbox.stats()["submitted"] == 1
    site = demo_sandbox.demo.stats()
    assert site["tokens_accepted"] == 1 and site["pages_served"] == 2


@pytest.mark.parametrize("widget", ["recaptcha", "turnstile", "hcaptcha"])
def test_the_widgets_callback_gets_the_token(
    browser: Browser,
    demo_sandbox: Any,
    worker_factory: Any,
    celery_app: Any,
    allowed: str,
    widget: str,
) -> None:
    worker_factory(_env(demo_sandbox))
    kind = widgets(demo_sandbox.config.demo_sitekey)[widget]
    url = f"{demo_sandbox.demo_url}/page/cb?widget={widget}&callback=1"

    async def scenario() -> tuple[Any, str | None]:
        from playwright.async_api import expect

        page = await browser.context.new_page()
        await page.goto(url)
        solved = await solve_on_page(page, timeout=60)
        # The demo's callback submits the form itself: nobody clicks Continue.
        await expect(page.locator("h1")).to_have_text("page cb", timeout=15_000)
        given = await page.evaluate(f"sessionStorage.getItem({CALLBACK_STORAGE_KEY!r})")
        return solved, given

    solved, given = browser.run(scenario())
    assert solved.sitekey == kind.sitekey and solved.widget.field == kind.field
    assert solved.callback == CALLBACK_NAME
    assert given == solved.token
    assert demo_sandbox.demo.stats()["tokens_accepted"] == 1


#: A page of the test's own, served by the browser's router at an allowlisted URL: a
#: widget with no token field in its form, and callbacks one found, one not.
OWN_PAGE = """<!doctype html><html><body>
<script>window.app = {captcha: {done(token) { this.seen = token; }}};</script>
<form id="f" action="/verify" method="post">
<div class="g-recaptcha" data-sitekey="{sitekey}" data-callback="{callback}"></div>
</form></body></html>"""


@pytest.mark.parametrize("callback", ["app.captcha.done", "app.nope"])
def test_a_missing_field_is_created_in_the_widgets_form_and_a_dotted_callback_called(
    browser: Browser,
    demo_sandbox: Any,
    worker_factory: Any,
    celery_app: Any,
    allowed: str,
    callback: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    worker_factory(_env(demo_sandbox))
    url = f"{demo_sandbox.demo_url}/own"
    html = OWN_PAGE.replace("{sitekey}", demo_sandbox.config.demo_sitekey)
    html = html.replace("{callback}", callback)

    async def scenario() -> tuple[Any, Any, Any]:
        page = await browser.context.new_page()
        await page.route(url, lambda route: route.fulfill(body=html, content_type="text/html"))
        await page.goto(url)
        solved = await solve_on_page(page, timeout=60)
        if solved.callback:  # it runs from a later task, as a widget calls it
            await page.wait_for_function("window.app.captcha.seen", timeout=5_000)
        field = await page.evaluate("document.forms.f.elements['g-recaptcha-response'].value")
        return solved, field, await page.evaluate("window.app.captcha.seen || null")

    with caplog.at_level("INFO", logger="captcha_tasks.contrib.playwright"):
        solved, field, seen = browser.run(scenario())
    assert field == solved.token and solved.fields == 1
    if callback == "app.captcha.done":
        assert solved.callback == callback and seen == solved.token  # called on its object
    else:
        assert solved.callback is None and seen is None
        assert "names data-callback 'app.nope', which is not a function" in caplog.text
    assert "solved the recaptcha_v2 widget" in caplog.text
    assert solved.token not in caplog.text


@pytest.mark.parametrize(
    ("leave_to", "message"),
    [("http://localhost:{port}/page/1", "for another site"), ("{demo}/", "went nowhere")],
)
def test_a_page_that_leaves_while_it_is_solved_gets_no_token(
    browser: Browser,
    demo_sandbox: Any,
    worker_factory: Any,
    celery_app: Any,
    allowed: str,
    monkeypatch: pytest.MonkeyPatch,
    leave_to: str,
    message: str,
) -> None:
    worker_factory(_env(demo_sandbox))
    demo = demo_sandbox.demo_url
    # localhost: the same server under another origin, showing the same challenge form.
    target = leave_to.format(port=allowed.rsplit(":", 1)[1], demo=demo)
    real_solve = playwright_contrib._solve

    async def scenario() -> str:
        page = await browser.context.new_page()

        async def solve_then_leave(*args: Any) -> Any:
            answer = await real_solve(*args)
            await page.goto(target)
            return answer

        monkeypatch.setattr(playwright_contrib, "_solve", solve_then_leave)
        await page.goto(f"{demo}/page/1")
        with pytest.raises(ChallengeNotFound, match=message):
            await solve_on_page(page, timeout=60)
        return str(
            await page.evaluate(
                "Array.from(document.getElementsByName('g-recaptcha-response'))"
                ".map((el) => el.value).join('')"
            )
        )

    assert browser.run(scenario()) == ""
    assert demo_sandbox.stats()["submitted"] == 1  # spent, and said so


def test_shared_cookies_let_the_browser_skip_the_challenge(
    browser: Browser, demo_sandbox: Any, worker_factory: Any, celery_app: Any, allowed: str
) -> None:
    worker_factory(_env(demo_sandbox))
    demo = demo_sandbox.demo_url
    assert fetch_page.delay(f"{demo}/page/1").get(timeout=60)["solved"] is True
    challenges = demo_sandbox.demo.stats()["challenges"]

    async def scenario() -> tuple[int, str, Any]:
        imported = await import_cookies(browser.context, allowed)
        page = await browser.context.new_page()
        await page.goto(f"{demo}/page/7")
        return imported, await page.inner_text("h1"), await find_widget(page)

    imported, heading, widget = browser.run(scenario())
    # fetch_page's: the validation cookie and the site session its form was bound to.
    assert imported == 2 and heading == "page 7" and widget is None
    assert demo_sandbox.stats()["submitted"] == 1
    assert demo_sandbox.demo.stats()["challenges"] == challenges  # none for the browser


def test_a_page_without_a_widget_raises_challenge_not_found(
    browser: Browser, demo_sandbox: Any, celery_app: Any, allowed: str
) -> None:
    async def scenario() -> None:
        page = await browser.context.new_page()
        await page.goto(f"{demo_sandbox.demo_url}/")
        await solve_on_page(page, timeout=10)

    with pytest.raises(ChallengeNotFound, match="no reCAPTCHA, Turnstile or hCaptcha widget"):
        browser.run(scenario())
    assert demo_sandbox.stats()["submitted"] == 0


def test_a_host_off_the_allowlist_is_refused(
    browser: Browser, demo_sandbox: Any, celery_app: Any, settings_env: Any
) -> None:
    settings_env(CAPTCHA_TASKS_ALLOWED_DOMAINS="example.org")
    demo = demo_sandbox.demo_url

    async def scenario() -> list[str]:
        page = await browser.context.new_page()
        await page.goto(f"{demo}/page/1")  # the browser goes where it is told ...
        refused = []
        for call in (
            solve_on_page(page, timeout=10),  # ... but nothing is solved for it
            import_cookies(browser.context, demo),
            export_cookies(browser.context, _host(demo_sandbox)),
        ):
            try:
                await call
            except TargetNotAllowed as exc:
                refused.append(str(exc))
        return refused

    refused = browser.run(scenario())
    assert len(refused) == 3
    assert all("is not allowed by CAPTCHA_TASKS_ALLOWED_DOMAINS" in r for r in refused)
    assert not any("example.org" in r for r in refused)  # the list stays the operator's
    assert demo_sandbox.stats()["submitted"] == 0
