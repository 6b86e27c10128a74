"""Playwright pages and the cluster: the workers' shared cookies in a browser, and the
captcha a page shows solved by the workers.

``pip install 'captcha_tasks[playwright]'``; the browser is yours (``playwright
install``, or a system Chromium through ``executable_path``)::

    from captcha_tasks.contrib.playwright import export_cookies, import_cookies, solve_on_page

    context = await browser.new_context()
    await import_cookies(context, "https://example.com/")  # what the workers earned
    page = await context.new_page()
    await page.goto("https://example.com/page/1")
    solved = await solve_on_page(page)  # the token is in the form, the callback called
    await page.click("button[type=submit]")
    await export_cookies(context, "https://example.com/")  # for every worker

Every call checks its host against ``CAPTCHA_TASKS_ALLOWED_DOMAINS`` first
(:func:`captcha_tasks.session.pages.check_url`, the rule ``fetch_page`` follows) and
raises :class:`~captcha_tasks.errors.TargetNotAllowed` for any other. A bare host is
checked as ``http://host/``: pass the page's URL (or ``host:port``) when the allowlist
names a port. The shared jar is per host, without port, as browsers keep cookies.

:func:`export_cookies` writes what the browser set, changed or deleted since this
context's last import or export of the host, not everything it holds: a cookie a
worker refreshed meanwhile is not overwritten by the browser's older copy (the rule of
:class:`~captcha_tasks.session.cookies.SharedSession`, through
:meth:`~captcha_tasks.session.cookies.CookieStore.merge_browser`).

Redis and DNS calls run in a thread (``asyncio.to_thread``): a slow Redis or resolver
never stalls the event loop the browser is driven from.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .. import aio
from ..errors import ChallengeNotFound
from ..results import FeedbackResult
from ..session.cookie_model import CookieSnapshot, normalize_host
from ..session.cookies import CookieStore
from ..session.pages import check_url
from ..settings import Settings, get_settings
from ..state import state_redis
from ._page_scripts import FILL_JS, FIND_JS, Filled, Widget, widget_table

if TYPE_CHECKING:
    from playwright.async_api import BrowserContext, Page

__all__ = [
    "DEFAULT_TIMEOUT",
    "PageSolve",
    "Widget",
    "export_cookies",
    "find_widget",
    "import_cookies",
    "solve_on_page",
]

log = logging.getLogger(__name__)

#: Seconds :func:`solve_on_page` waits for the cluster's answer, queue time included
#: (:data:`captcha_tasks.aio.DEFAULT_TIMEOUT`: longer than a solve's own deadline).
DEFAULT_TIMEOUT = aio.DEFAULT_TIMEOUT

# context -> host -> its cookies as last shared (imported, or exported): what the next
# export is diffed against. Weak: a closed, dropped context takes its snapshots along.
_snapshots: weakref.WeakKeyDictionary[Any, dict[str, CookieSnapshot]] = weakref.WeakKeyDictionary()


async def _allowed(url_or_host: str, settings: Settings) -> tuple[str, str]:
    """(URL, jar host) of ``url_or_host`` once the allowlist let it through."""
    url = url_or_host if "://" in url_or_host else f"http://{url_or_host}/"
    await asyncio.to_thread(check_url, url, settings)  # resolves host names
    return url, normalize_host(url)


def _store(settings: Settings) -> CookieStore:
    return CookieStore(state_redis(settings), settings)


async def import_cookies(
    context: BrowserContext, url_or_host: str, *, settings: Settings | None = None
) -> int:
    """Put the host's shared cookies into ``context``; returns how many."""
    settings = settings or get_settings()
    _, host = await _allowed(url_or_host, settings)
    stored = await asyncio.to_thread(_store(settings).load, host)
    if stored:
        # StoredCookie.to_browser gives Playwright's SetCookieParam shape as plain dicts.
        cookies: list[Any] = [c.to_browser(host) for c in stored]
        await context.add_cookies(cookies)
    snapshot = CookieSnapshot(host, {c.identity: c for c in stored})
    _snapshots.setdefault(context, {})[host] = snapshot
    log.info("imported %d shared cookies of %s into a browser context", len(stored), host)
    return len(stored)


async def export_cookies(
    context: BrowserContext, url_or_host: str, *, settings: Settings | None = None
) -> int:
    """Merge what the browser set, changed or deleted for the host since this context's
    last import or export of it into the shared jar; returns how many cookies were
    written (a change older than a worker's is dropped, as in every merge)."""
    settings = settings or get_settings()
    _, host = await _allowed(url_or_host, settings)
    cookies = await context.cookies()
    before = _snapshots.get(context, {}).get(host)
    store = _store(settings)
    result, after, refused = await asyncio.to_thread(store.merge_browser, host, cookies, before)
    _snapshots.setdefault(context, {})[host] = after
    for reason in refused:
        log.warning("a browser cookie was not shared: %s", reason)
    log.info(
        "exported the browser's cookies of %s: %d written, %d stale, %d deleted",
        host,
        result.written,
        result.stale,
        result.deleted,
    )
    return result.written


async def find_widget(page: Page) -> Widget | None:
    """The first reCAPTCHA v2, Turnstile or hCaptcha widget declared in the page's
    markup (``class`` and ``data-sitekey``, as ``fetch_page`` reads them), or None."""
    return Widget.from_dom(await page.evaluate(FIND_JS, widget_table()))


@dataclass(frozen=True)
class PageSolve:
    """What :func:`solve_on_page` did. The token is here for the caller's own use, but
    never in ``repr`` (nor in any log line)."""

    widget: Widget
    pageurl: str
    source: str | None  #: the result's ``source``: ``"api"`` (a solve spent), ``"pool"``
    captcha_id: str | None  #: the provider's id (what ``report_solution`` reports)
    fields: int  #: form fields now holding the token
    callback: str | None  #: the page function called with the token, if any
    token: str = field(repr=False)
    #: The solve task's id (what :func:`captcha_tasks.feedback` takes); None for a
    #: pooled token, which names no solve.
    task_id: str | None = None

    async def feedback(self, accepted: bool) -> FeedbackResult | None:
        """Tell the cluster whether the site accepted this token (counted once per
        solve; a rejection is reported to its provider once). None for a pooled token."""
        if self.task_id is None:
            return None
        return await aio.feedback(self.task_id, accepted)

    async def confirm(self, page: Page) -> FeedbackResult | None:
        """After the page's form went with the token: the site accepted it unless the
        page shows the same widget (its sitekey) again. Counts that verdict
        (:meth:`feedback`) and returns it; None for a pooled token."""
        again = await find_widget(page)
        return await self.feedback(not (again is not None and again.sitekey == self.sitekey))

    @property
    def type(self) -> str:
        return self.widget.type

    @property
    def sitekey(self) -> str:
        return self.widget.sitekey


async def _solve(widget: Widget, pageurl: str, user_agent: str, timeout: float | None) -> Any:
    """The cluster's answer (``.get()``'s dict), awaited through :mod:`captcha_tasks.aio`."""
    if widget.type == "recaptcha_v2":
        return await aio.solve_recaptcha_v2(
            widget.sitekey,
            pageurl,
            invisible=widget.invisible,
            user_agent=user_agent,
            timeout=timeout,
        )
    if widget.type == "turnstile":
        return await aio.solve_turnstile(
            widget.sitekey,
            pageurl,
            action=widget.action,
            cdata=widget.cdata,
            user_agent=user_agent,
            timeout=timeout,
        )
    return await aio.solve_hcaptcha(widget.sitekey, pageurl, timeout=timeout)


async def solve_on_page(
    page: Page, *, timeout: float | None = DEFAULT_TIMEOUT, settings: Settings | None = None
) -> PageSolve:
    """Solve the captcha ``page`` shows through the cluster and hand the token over as
    the widget would: into its form field(s) (``g-recaptcha-response``,
    ``cf-turnstile-response``, ``h-captcha-response``; created in the widget's form if
    the page has none) and to its ``data-callback`` function, if it names one. The
    form is not submitted: that is the page's (or the caller's) next step.

    Raises :class:`~captcha_tasks.errors.TargetNotAllowed` (the page's host is off the
    allowlist: nothing is solved), :class:`~captcha_tasks.errors.ChallengeNotFound`,
    the solve's own typed errors, and :class:`asyncio.TimeoutError` after ``timeout``
    seconds without an answer (``None``: no limit but the solve's own deadline); the
    solve goes on in the cluster then, as with any :mod:`captcha_tasks.aio` wait.
    """
    settings = settings or get_settings()
    pageurl, _ = await _allowed(page.url, settings)
    widget = await find_widget(page)
    if widget is None:
        raise ChallengeNotFound(f"no reCAPTCHA, Turnstile or hCaptcha widget on {pageurl:.200}")
    user_agent = str(await page.evaluate("navigator.userAgent"))
    started = time.monotonic()
    result = await _solve(widget, pageurl, user_agent, timeout)
    token = str(result["solution"])
    if urlsplit(page.url)[:2] != urlsplit(pageurl)[:2]:  # never hand a token to another site
        raise ChallengeNotFound(
            f"the page left {pageurl:.200} for another site while its {widget.type} was "
            f"solved (captcha {result.get('captcha_id')}): the token was not handed over"
        )
    filled = Filled.from_dom(
        await page.evaluate(
            FILL_JS,
            {
                "cssClass": widget.css_class,
                "sitekey": widget.sitekey,
                "fields": widget.fields,
                "token": token,
                "callback": widget.callback,
            },
        )
    )
    if filled.fields == 0:
        raise ChallengeNotFound(
            f"the {widget.type} widget left {pageurl:.200} while it was solved "
            f"(captcha {result.get('captcha_id')}): the token went nowhere"
        )
    if filled.callback == "missing":
        log.warning(
            "the %s widget names data-callback %r, which is not a function",
            widget.type,
            widget.callback,
        )
    solved = PageSolve(
        widget=widget,
        pageurl=pageurl,
        source=result.get("source"),
        captcha_id=None if result.get("captcha_id") is None else str(result["captcha_id"]),
        fields=filled.fields,
        callback=widget.callback if filled.callback == "scheduled" else None,
        token=token,
        task_id=None if result.get("task_id") is None else str(result["task_id"]),
    )
    log.info(
        "solved the %s widget (sitekey %s) on %.200s in %.1f s: %s captcha %s, "
        "%d field(s), callback %s",
        widget.type,
        widget.sitekey,
        pageurl,
        time.monotonic() - started,
        solved.source,
        solved.captcha_id,
        solved.fields,
        solved.callback,
    )
    return solved
