"""Per-execution scopes: one ``__call__`` enters every base's scope around the body."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from celery import Celery

from captcha_tasks import PinnedProxyTask, SessionLockTask, SharedCookiesTask
from captcha_tasks.worker.scopes import ScopedTask


@pytest.fixture
def app() -> Celery:
    return Celery("scopes-test", set_as_current=False)


def _recording(name: str, log: list[str]) -> type[ScopedTask]:
    method = f"{name}_scope"

    @contextlib.contextmanager
    def scope(self: Any, args: Any, kwargs: Any) -> Iterator[str]:
        log.append(f"enter {name}")
        try:
            yield name
        finally:
            log.append(f"exit {name}")

    namespace = {"abstract": True, "scopes": (method,), method: scope}
    return type(f"{name.title()}Task", (ScopedTask,), namespace)


def test_every_bases_scope_wraps_the_body_first_base_outermost(app: Celery) -> None:
    log: list[str] = []
    outer, inner = _recording("outer", log), _recording("inner", log)

    class Both(outer, inner):  # type: ignore[misc,valid-type]
        abstract = True

    @app.task(base=Both, bind=True, shared=False)
    def body(self: Any, fail: bool) -> tuple[str, str]:
        log.append("body")
        if fail:
            raise ValueError("boom")
        return self.scoped("outer_scope"), self.scoped("inner_scope")

    assert Both.all_scopes == ("outer_scope", "inner_scope")
    assert body(False) == ("outer", "inner")
    assert log == ["enter outer", "enter inner", "body", "exit inner", "exit outer"]
    log.clear()
    with pytest.raises(ValueError, match="boom"):
        body(True)  # torn down whatever the outcome
    assert log == ["enter outer", "enter inner", "body", "exit inner", "exit outer"]
    assert body.scoped("outer_scope") is None  # nothing outside an execution


def test_the_readme_composition_keeps_working(app: Celery) -> None:
    class SiteTask(SharedCookiesTask, SessionLockTask, PinnedProxyTask):
        abstract = True

    @app.task(base=SiteTask, bind=True, shared=False)
    def orders(self: Any, page: str) -> tuple[bool, Any]:
        self.use_proxy(self.http)  # no worker: no proxy, the session goes direct
        return isinstance(self.http, requests.Session), self.http.proxies.get("https")

    assert orders("not a url: nothing shared") == (True, None)
    with pytest.raises(RuntimeError, match="only while the task runs"):
        orders.http  # noqa: B018


def test_a_users_scope_composes_with_the_shared_cookies(app: Celery) -> None:
    seen: list[Any] = []

    class BrowserTask(ScopedTask):
        abstract = True
        scopes = ("browser_scope",)

        @contextlib.contextmanager
        def browser_scope(self, args: Any, kwargs: Any) -> Iterator[str]:
            seen.append(self.http)  # the cookies' scope, listed first, is entered already
            yield "browser"

    class SiteTask(SharedCookiesTask, BrowserTask):
        abstract = True

    @app.task(base=SiteTask, bind=True, shared=False)
    def visit(self: Any) -> bool:
        return self.scoped("browser_scope") == "browser" and seen == [self.http]

    assert SiteTask.all_scopes == ("cookie_scope", "browser_scope")
    assert visit() is True


def test_concurrent_executions_each_have_their_own_session(app: Celery) -> None:
    started = threading.Barrier(4, timeout=10)

    @app.task(base=SharedCookiesTask, bind=True, shared=False)
    def visit(self: Any, n: int) -> int:
        self.http.headers["X-N"] = str(n)
        started.wait()  # all four bodies run at once on the one task instance
        return int(self.http.headers["X-N"])

    # Build the task before the threads call it, as a worker does when it starts. Celery
    # creates a decorated task lazily, on first use, and puts it in the registry before it
    # binds it (celery/app/base.py, _task_from_fun): a second thread that finds it in
    # between has no request stack yet ('NoneType' object has no attribute 'push').
    task = visit._get_current_object()
    results: dict[int, int] = {}
    threads = [threading.Thread(target=lambda n=n: results.update({n: task(n)})) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert results == {n: n for n in range(4)}


def test_a_task_called_from_another_finds_its_own_session(app: Celery) -> None:
    @app.task(base=SharedCookiesTask, bind=True, shared=False)
    def inner(self: Any) -> int:
        return id(self.http)

    @app.task(base=SharedCookiesTask, bind=True, shared=False)
    def outer(self: Any) -> bool:
        mine = id(self.http)
        theirs = inner()
        return theirs != mine and id(self.http) == mine

    assert outer() is True
