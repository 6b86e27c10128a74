"""Solve tasks are admitted by the worker's consumer, not its pool (worker/admit_inline):
a pool busy with other work does not hold solves back, and what the consumer must not
do itself (a countdown, bad input) still goes through the pool as for any task."""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from captcha_tasks import solve_recaptcha_v2
from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.settings import get_settings
from captcha_tasks.state import Keys, state_redis
from captcha_tasks.worker.app import app
from captcha_tasks.worker.page_tasks import fetch_page
from tests.support.workers import worker_env

pytestmark = pytest.mark.integration

SITEKEY = "6Le-wvkSAAAAAPBMRTvw0Q4Muexq9bi0DJwx_mJ-"
#: How long the slow page keeps the worker's only pool process busy (real seconds).
SLOW_PAGE_S = 4.0


class _SlowPage(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        time.sleep(SLOW_PAGE_S)
        body = b"<html><body>slow but fine</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def slow_site() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _SlowPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_solves_are_admitted_and_solved_while_the_only_pool_process_is_busy(
    celery_app: Any, sandbox: Any, worker_factory: Any, slow_site: str
) -> None:
    env = worker_env(
        sandbox.url,
        CAPTCHA_TASKS_ALLOWED_DOMAINS=slow_site.split(":")[0],
        CAPTCHA_TASKS_HTTP_TIMEOUT="10",
    )
    # One pool process, and room in the prefetch window for more than the page: the
    # solves reach the worker while the page holds the pool.
    worker_factory(env, concurrency=1, extra_args=["--prefetch-multiplier", "4"])
    page = fetch_page.delay(f"http://{slow_site}/slow")
    started = time.monotonic()
    solves = [solve_recaptcha_v2.delay(SITEKEY, f"https://example.com/busy/{i}") for i in range(3)]
    results = [r.get(timeout=30) for r in solves]
    solved_after = time.monotonic() - started
    # Through the pool, the solves would wait behind the page for its one process.
    assert not page.ready(), f"the page ended first: solves took {solved_after:.1f} s"
    assert solved_after < SLOW_PAGE_S
    assert [r["type"] for r in results] == ["recaptcha_v2"] * 3
    assert len({r["captcha_id"] for r in results}) == 3
    assert page.get(timeout=30)["status"] == 200


def test_a_solve_with_a_countdown_waits_for_it(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    solve_recaptcha_v2.delay(SITEKEY, "https://example.com/warm").get(timeout=30)
    sent = time.time()
    result = solve_recaptcha_v2.apply_async((SITEKEY, "https://example.com/later"), countdown=2)
    got = result.get(timeout=30)
    # Admitted at its ETA (Celery's path through the pool), not when it arrived.
    job = state_redis(get_settings()).hgetall(Keys(get_settings().key_prefix).job(result.id))
    assert float(job["enqueued_at"]) - sent >= 1.9
    assert got["type"] == "recaptcha_v2"


def test_bad_input_sent_past_the_client_checks_fails_as_a_task_does(
    celery_app: Any, sandbox: Any, worker_factory: Any
) -> None:
    worker_factory(worker_env(sandbox.url))
    result = app.send_task("captcha_tasks.solve_recaptcha_v2", args=("short", "not a url"))
    with pytest.raises(InvalidTaskInput):
        result.get(timeout=30)
    assert result.state == "FAILURE"
    # Nothing was queued for the engine.
    settings = get_settings()
    assert not state_redis(settings).exists(Keys(settings.key_prefix).job(result.id))
