"""Task base classes for the cluster's shared session state, combinable with each other
and with users' own bases::

    from captcha_tasks import PinnedProxyTask, SessionLockTask, SharedCookiesTask, app

    class SiteTask(SharedCookiesTask, SessionLockTask, PinnedProxyTask):
        abstract = True

    @app.task(base=SiteTask, bind=True, name="myapp.orders")
    def orders(self, url):
        self.use_proxy(self.http)  # the worker's pinned proxy
        return self.http.get(url, timeout=30).status_code  # the host's shared cookies

The logic is in plain modules (:mod:`captcha_tasks.session.cookies`, ``.locks``,
``.pinned_proxy``); these classes only tie it to a task's execution and request.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Iterator, Mapping
from typing import Any

import redis
import requests
from celery import Task

from ..errors import InvalidTaskInput, NoProxyAvailable, SessionLockBusy, SessionLockTimeout
from ..provider.proxy import Proxy
from ..session.cookies import CookieStore, MergeResult, SharedSession, normalize_host
from ..session.locks import SessionLock, lock_wait_policy
from ..session.pinned_proxy import current_proxy, current_proxy_id, replace_bad_proxy, use_proxy
from ..settings import Settings, get_settings
from ..state import state_redis
from .scopes import ScopedTask

__all__ = ["PinnedProxyTask", "SessionLockTask", "SharedCookiesTask"]

log = logging.getLogger(__name__)


class SharedCookiesTask(ScopedTask):
    """``self.http``: a ``requests.Session`` per execution carrying the shared cookies of
    :meth:`cookie_host`, merged back after every attempt (success, failure, retry).
    Bodies need ``bind=True``."""

    abstract = True
    scopes = ("cookie_scope",)
    #: Keyword arguments whose http(s) URL names the host, checked in order.
    cookie_url_kwargs: tuple[str, ...] = ("url",)

    @contextlib.contextmanager
    def cookie_scope(
        self, args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> Iterator[SharedSession]:
        """This execution's session: the host's cookies loaded before the body, what it
        changed merged back after it."""
        session = self.make_http_session()
        try:
            host = self.cookie_host(args, kwargs)
            store = self.cookie_store if host is not None else None
            shared = SharedSession(session, store, host).load()
            try:
                yield shared
            finally:
                self._merge_back(shared)
        finally:
            session.close()

    def _shared(self) -> SharedSession:
        shared: SharedSession | None = self.scoped("cookie_scope")
        if shared is None:
            raise RuntimeError(f"{self.name}: self.http exists only while the task runs")
        return shared

    @property
    def http(self) -> requests.Session:
        return self._shared().session

    def save_cookies(self) -> MergeResult:
        """Merge this execution's cookie changes now, not only when the body ends: call
        it before releasing a lock that others wait on to read the fresh cookies."""
        return self._shared().save()

    @property
    def cookie_store(self) -> CookieStore:
        settings = get_settings()
        return CookieStore(state_redis(settings), settings)

    def make_http_session(self) -> requests.Session:
        """A fresh session per execution; override for headers, adapters or proxies."""
        return requests.Session()

    def cookie_host(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Whose cookies this execution shares: the host of the first ``cookie_url_kwargs``
        URL, else of the first positional http(s) URL; None shares nothing."""
        candidates = [kwargs.get(name) for name in self.cookie_url_kwargs]
        for value in [*candidates, *args]:
            if isinstance(value, str) and value.lower().startswith(("http://", "https://")):
                try:
                    return normalize_host(value)
                except InvalidTaskInput:
                    return None  # the body validates its own arguments
        return None

    def _merge_back(self, shared: SharedSession) -> None:
        try:
            shared.save()
        except redis.RedisError as exc:
            # The body's outcome (and its side effects) stand: losing a cookie update is
            # cheaper than failing or re-running the task for it.
            log.warning(
                "%s: could not merge the cookies of %s back: %s", self.name, shared.host, exc
            )


class SessionLockTask(Task):  # type: ignore[misc]  # celery ships no type hints
    """``with self.session_lock(host):`` retries instead of waiting (see
    :mod:`captcha_tasks.session.locks` for the pattern)."""

    abstract = True

    @contextlib.contextmanager
    def session_lock(self, host: str) -> Iterator[SessionLock]:
        """Hold ``host``'s session lock for the block, or raise ``self.retry`` at once.

        When another owner holds it, the task is retried after a short countdown
        (``lock_wait_policy``; the retries of this task count), and after about twice
        the lock TTL it fails with :class:`SessionLockTimeout`. The lock is released
        at the end of the block; if the block outlived the lock TTL, the release is
        refused (and logged) rather than freeing another owner's lock: call
        ``lock.extend()`` during long work.
        """
        settings = get_settings()
        request: Any = self.request
        lock = SessionLock(
            state_redis(settings), settings, host, owner=getattr(request, "hostname", None)
        )
        if not lock.acquire():
            raise self._wait_for(lock, settings)
        try:
            yield lock
        finally:
            lock.release()

    def _wait_for(self, lock: SessionLock, settings: Settings) -> Exception:
        countdown, max_retries = lock_wait_policy(settings)
        retries = int(getattr(self.request, "retries", 0) or 0)
        if retries >= max_retries:
            return SessionLockTimeout(
                f"gave up waiting for the session lock of {lock.host} after {retries} "
                f"retries (~{retries * countdown:.1f} s); held by {lock.holder()}"
            )
        busy = SessionLockBusy(f"session lock of {lock.host} is held by {lock.holder()}")
        # A little jitter so waiters woken together do not all try at the same instant.
        when = countdown * random.uniform(1.0, 1.2)
        result: Exception = self.retry(exc=busy, countdown=when, max_retries=max_retries)
        return result


class PinnedProxyTask(Task):  # type: ignore[misc]  # celery ships no type hints
    """``self.proxy``: the worker's leased proxy (or ``None``; see
    :mod:`captcha_tasks.session.pinned_proxy`)."""

    abstract = True

    def _worker_name(self) -> str | None:
        name = getattr(self.request, "hostname", None)
        return name if isinstance(name, str) and name else None

    @property
    def proxy(self) -> Proxy | None:
        """The worker's proxy with its credentials; never put it in args or results."""
        name = self._worker_name()
        return current_proxy(name) if name else None

    @property
    def proxy_id(self) -> str | None:
        """The id of the worker's proxy (safe to log and to return)."""
        name = self._worker_name()
        return current_proxy_id(name) if name else None

    def use_proxy(self, session: requests.Session, *, required: bool = False) -> Proxy | None:
        """Point ``session`` (http and https) at the worker's proxy; returns it.

        Without one, the session's http/https proxies are cleared (it goes direct, or
        through the environment's proxy), or :class:`NoProxyAvailable` is raised when
        ``required``.
        """
        proxy = use_proxy(session, self.proxy)
        if proxy is None and required:
            raise NoProxyAvailable(f"worker {self._worker_name()} holds no proxy right now")
        return proxy

    def report_bad_proxy(self, reason: str = "") -> str | None:
        """Quarantine the worker's proxy and lease another for the worker at once.

        Returns the new proxy id (``None`` if none is free; the heartbeat keeps trying).
        """
        name = self._worker_name()
        return replace_bad_proxy(name, reason) if name else None
