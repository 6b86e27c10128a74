"""A refused token is solved again for the form the page shows now, posted as the visitor
that loaded it: against the demo site's one-time, visitor-bound forms and rotating
sitekeys, and against a site whose answer to a post that did pass looks like a refusal."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest
import redis

from captcha_tasks.settings import get_settings
from captcha_tasks.state import state_redis
from captcha_tasks.worker.page_tasks import fetch_page
from captcha_tasks_sandbox import DEMO_SITEKEY
from tests.integration.test_acceptance import _env, _two_providers
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration


def _page_jars(client: redis.Redis) -> list[str]:
    """The pages' own cookie jars left in Redis (``Keys.page_cookies``)."""
    prefix = get_settings().key_prefix
    return [str(key) for key in client.scan_iter(f"{prefix}cookies:*:page:*", count=1000)]


def _strict_pair(sandbox_factory: Any) -> tuple[Any, Any]:
    """A (2captcha), every token of which its demo site refuses, and B (captchaai), none;
    the site rotates its sitekey on every load and binds each one-time form to the
    visitor's session cookie."""
    a = sandbox_factory(
        demo_port=0,
        dialect="2captcha",
        threads=20,
        seed=5,
        reject_rates={"2captcha": 1.0},
        demo_rotate_sitekey=True,
    )
    b = sandbox_factory(dialect="captchaai", threads=20, seed=6)
    a.demo.trust(b.state)
    return a, b


@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "shared"])
def test_a_refused_token_is_solved_again_for_the_fresh_form_and_its_new_sitekey(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, isolated: bool
) -> None:
    a, b = _strict_pair(sandbox_factory)
    worker_factory(_two_providers(a, b), concurrency=3)
    worker_factory(_two_providers(a, b), concurrency=3)
    pages = 6 if isolated else 1
    sent = [fetch_page.delay(f"{a.demo_url}/page/{i}", isolated=isolated) for i in range(pages)]
    results = [r.get(timeout=120) for r in sent]
    assert all(p["status"] == 200 and p["attempts"] == 2 for p in results)
    site = a.demo.stats()
    # Each page: main's token refused on the first form, backup's accepted on the one
    # the reload showed (another sitekey: the first load's would have been refused).
    assert (site["tokens_rejected"], site["tokens_accepted"]) == (pages, pages)
    assert (site["stale_forms"], site["expired_forms"]) == (0, 0)
    assert (a.stats()["submitted"], b.stats()["submitted"]) == (pages, pages)
    # Every page's own cookie jar is gone with the page.
    assert _page_jars(state_redis(get_settings())) == []


def test_a_page_the_reload_shows_unchallenged_is_served_without_another_solve(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any, misleading_site: str
) -> None:
    sandbox = sandbox_factory(threads=5)
    host = misleading_site.split("//")[1]
    worker_factory(worker_env(sandbox.url, CAPTCHA_TASKS_ALLOWED_DOMAINS=host), concurrency=2)
    page = fetch_page.delay(f"{misleading_site}/page", isolated=True).get(timeout=60)
    assert (page["status"], page["attempts"], page["solved"]) == (200, 1, True)
    assert sandbox.stats()["submitted"] == 1
    assert sandbox.stats()["reports_bad"] == 0  # the reload showed the token did pass


def test_once_the_attempts_are_spent_the_page_fails_with_every_form_fresh(
    celery_app: Any, sandbox_factory: Any, worker_factory: Any
) -> None:
    sandbox = sandbox_factory(demo_port=0, reject_rates={"*": 1.0}, demo_rotate_sitekey=True)
    worker_factory(_env(sandbox), concurrency=2)
    from captcha_tasks.errors import ChallengeRejected

    with pytest.raises(ChallengeRejected):
        fetch_page.delay(f"{sandbox.demo_url}/page/1", isolated=True).get(timeout=120)
    site = sandbox.demo.stats()
    assert (site["tokens_rejected"], site["stale_forms"], site["expired_forms"]) == (3, 0, 0)
    assert site["challenges"] == 3  # the first load and one reload per further attempt
    assert _page_jars(state_redis(get_settings())) == []


# -- a site that answers a post that passed as if it were refused ----------------------


class _MisleadingSite(BaseHTTPRequestHandler):
    """``GET /page``: the content with the ``ok`` cookie, else a reCAPTCHA form.
    ``POST /verify``: any token sets the cookie, answered 403 with the form again."""

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _send(self, status: int, body: str, cookie: str = "") -> None:
        payload = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(payload)))
        if cookie:
            self.send_header("Set-Cookie", cookie)
        self.end_headers()
        self.wfile.write(payload)

    def _form(self) -> str:
        return (
            '<form method="post" action="/verify">'
            f'<div class="g-recaptcha" data-sitekey="{DEMO_SITEKEY}"></div></form>'
        )

    def do_GET(self) -> None:
        if "ok=1" in self.headers.get("Cookie", ""):
            self._send(200, "<h1>content</h1>")
        else:
            self._send(200, self._form())

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        fields = parse_qs(self.rfile.read(length).decode())
        cookie = "ok=1; Path=/" if fields.get("g-recaptcha-response") else ""
        self._send(403, self._form(), cookie)


@pytest.fixture
def misleading_site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _MisleadingSite)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
