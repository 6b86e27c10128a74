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
from celery.exceptions import Ignore

from ..errors import InvalidTaskInput, NoProxyAvailable, SessionLockBusy, SessionLockTimeout
from ..provider.proxy import Proxy
from ..session import parking
from ..session.cookies import (
    CookieStore,
    MergeResult,
    SharedSession,
    normalize_host,
    visitor_id,
)
from ..session.locks import WAIT_TTLS, SessionLock, lock_wait_policy
from ..session.pinned_proxy import current_proxy, current_proxy_id, replace_bad_proxy, use_proxy
from ..settings import Settings, get_settings
from ..state import state_redis
from .redacted import send_redacted
from .scopes import ScopedTask

__all__ = ["PinnedProxyTask", "SessionLockTask", "SharedCookiesTask"]

log = logging.getLogger(__name__)

#: Tries to take a lock that frees between a look and a park, before retrying instead.
ACQUIRE_TRIES = 3
#: The message header carrying a parked task's wait deadline (epoch seconds).
DEADLINE_HEADER = "captcha_tasks_lock_deadline"
#: The task that wakes a host's parked tasks when its lock expires (page_tasks.py).
SWEEPER = "captcha_tasks.sweep_session_lock"


class SharedCookiesTask(ScopedTask):
    """``self.http``: a ``requests.Session`` per execution carrying the shared cookies of
    :meth:`cookie_host`, merged back after every attempt (success, failure, retry), and
    the visitor-bound ones (DataDome's) of :meth:`cookie_visitor` only. Bodies need
    ``bind=True``."""

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
            visitor = self.cookie_visitor(session) if host is not None else None
            shared = SharedSession(session, store, host, visitor).load()
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

    def cookie_visitor(self, session: requests.Session) -> str | None:
        """Whose visitor-bound cookies this execution carries (:func:`visitor_id`): the
        worker's pinned proxy (with :class:`PinnedProxyTask`) or else the worker itself,
        with ``session``'s user agent. Executions of the same visitor share them."""
        proxy_id = getattr(self, "proxy_id", None)  # PinnedProxyTask's, when combined
        worker = getattr(self.request, "hostname", None)
        agent = str(session.headers.get("User-Agent", ""))
        return visitor_id(proxy_id if isinstance(proxy_id, str) else None, agent, worker)

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
    """``with self.session_lock(host):`` never blocks a worker slot while another owner
    holds the lock (see :mod:`captcha_tasks.session.locks` for the pattern).

    ``lock_wait = "retry"`` (the default): the task is retried every few seconds until
    it gets the lock. ``lock_wait = "park"``: the task is parked and re-sent (same task
    id) when the lock is released, or when it expires (:mod:`captcha_tasks.session.
    parking`): one more execution per wait instead of one per countdown.
    """

    abstract = True
    lock_wait = "retry"

    @contextlib.contextmanager
    def session_lock(self, host: str) -> Iterator[SessionLock]:
        """Hold ``host``'s session lock for the block, or wait without a worker slot.

        When another owner holds it, the task is retried after a short countdown
        (``lock_wait_policy``; the retries of this task count) or parked (``lock_wait``),
        and after about twice the lock TTL it fails with :class:`SessionLockTimeout`.
        The lock is released at the end of the block (waking the parked); if the block
        outlived the lock TTL, the release is refused (and logged) rather than freeing
        another owner's lock: call ``lock.extend()`` during long work.
        """
        settings = get_settings()
        request: Any = self.request
        lock = SessionLock(
            state_redis(settings), settings, host, owner=getattr(request, "hostname", None)
        )
        self.acquire_or_wait(lock, settings)
        try:
            yield lock
        finally:
            release_and_wake(self.app, lock)

    def acquire_or_wait(self, lock: SessionLock, settings: Settings) -> None:
        """Take ``lock``, or raise what makes this task wait for it (retry, park)."""
        for _ in range(ACQUIRE_TRIES):  # the lock can free between a look and a park
            if lock.acquire():
                return
            wait = self._wait_for(lock, settings)
            if wait is not None:
                raise wait
        raise self._retry_for(lock, settings)

    def _wait_for(self, lock: SessionLock, settings: Settings) -> Exception | None:
        """What to raise to wait for ``lock``; ``None`` if it was free when parking."""
        request: Any = self.request
        if self.lock_wait != "park" or request.is_eager or request.called_directly:
            return self._retry_for(lock, settings)  # nothing would re-send an eager task
        deadline = lock_deadline(request, settings)
        if parking.now(settings) >= deadline:  # Redis's clock, as the deadline
            return SessionLockTimeout(
                f"gave up waiting for the session lock of {lock.host} after "
                f"~{WAIT_TTLS * settings.lock_ttl:g} s; held by {lock.holder()}"
            )
        client = state_redis(settings)
        try:
            member = parking.entry(resend_message(self, deadline), deadline)
        except (TypeError, ValueError):  # options that JSON cannot carry: wait by retrying
            return self._retry_for(lock, settings)
        parked = parking.park(client, settings, lock.host, member, deadline)
        if not parked.parked:
            return None
        if parked.sweep_in > 0:
            schedule_sweeper(self.app, lock.host, parked.sweep_due, parked.sweep_in)
        log.info(
            "%s[%s] parked until the session lock of %s is free", self.name, request.id, lock.host
        )
        continues_later(self)
        ignore: Exception = Ignore()
        return ignore

    def _retry_for(self, lock: SessionLock, settings: Settings) -> Exception:
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


# -- parking: the worker's half (the Redis half is captcha_tasks.session.parking) --------


def continues_later(task: Task) -> None:
    """Tell event consumers that this execution of ``task`` ended and the task goes on in
    another message under the same id (parked and re-sent, or replaced by a chain whose
    last step carries the id): ``task-retried``, Celery's event for exactly that. Without
    it the ``Ignore`` that ends the execution sends no event, and Flower counts the
    message as received but never ended."""
    if task.app.conf.worker_send_task_events and task.request.hostname:
        task.send_event("task-retried")


def lock_deadline(request: Any, settings: Settings) -> float:
    """The epoch deadline of this task's wait: carried by a re-sent task's header, or
    ``WAIT_TTLS`` lock TTLs from now on its first wait."""
    value: Any = getattr(request, DEADLINE_HEADER, None)
    if value is None:
        value = (getattr(request, "headers", None) or {}).get(DEADLINE_HEADER)
    try:
        return float(value)
    except (TypeError, ValueError):
        return parking.deadline_after(settings, WAIT_TTLS)


def resend_message(task: Task, deadline: float) -> dict[str, Any]:
    """What re-sends ``task`` as it was received (same id, chain, callbacks, retries),
    with its wait deadline in a header. Its arguments (form fields included) are those
    already in the broker message, in the same Redis."""
    sig = task.signature_from_request()
    options = {k: v for k, v in dict(sig.options).items() if v is not None}
    options["headers"] = {**(options.get("headers") or {}), DEADLINE_HEADER: deadline}
    return {
        "task": task.name,
        "args": list(sig.args or ()),
        "kwargs": dict(sig.kwargs or {}),
        "options": options,
    }


def wake(app: Any, host: str, members: list[str]) -> int:
    """Re-send parked ``members`` of ``host``, each removed only once sent (a crash
    between the two re-sends it twice, never loses it); the number re-sent."""
    settings = get_settings()
    client = state_redis(settings)
    sent = 0
    for member in members:
        try:
            message, _ = parking.read_entry(member)
            options = dict(message["options"])
            send_redacted(
                app,
                message["task"],
                message["args"],
                message["kwargs"],
                add_to_parent=False,
                **options,
            )
        except Exception as exc:  # leave it parked: the sweeper re-sends it
            log.warning("could not re-send a task parked on %s: %s", host, exc)
            continue
        parking.forget(client, settings, host, member)
        sent += 1
    return sent


def release_and_wake(app: Any, lock: SessionLock) -> bool:
    """Release ``lock`` (owner-checked) and re-send the tasks parked on it."""
    done = lock.release_collect()
    if done.parked:
        wake(app, lock.host, done.parked)
    return done.released


def schedule_sweeper(app: Any, host: str, due: int, delay: float) -> None:
    """The host's sweeper, ``delay`` seconds from now, as ``due`` (its identity)."""
    from .celeryconfig import MAX_COUNTDOWN_SECONDS

    # Capped below the visibility timeout; one that fires early looks and comes again.
    app.send_task(
        SWEEPER,
        kwargs={"host": host, "due": due},
        countdown=min(delay, MAX_COUNTDOWN_SECONDS),
        add_to_parent=False,
    )


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
