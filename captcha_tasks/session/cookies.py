"""Cookies shared per host by every worker, without stale jars overwriting fresh ones.

A task that logs in (or passes a challenge) leaves cookies that other workers should
reuse instead of solving again. Each execution loads the host's shared cookies into
its own ``requests.Session`` and, when it ends, writes back only what it changed::

    from captcha_tasks import app
    from captcha_tasks.session.cookies import SharedCookiesTask

    @app.task(base=SharedCookiesTask, bind=True, name="myproject.fetch")
    def fetch(self, url):
        # self.http carries example.com's shared cookies; whatever the site sets or
        # deletes here is merged back for every other worker when the task ends
        # (also when it raises or retries).
        return self.http.get(url, timeout=30).status_code

    fetch.delay("https://example.com/account")

Without Celery: ``snapshot = store.apply(session, host)`` ... ``store.merge(session,
host, snapshot)``. Browser automation: :meth:`CookieStore.export_browser` gives
Playwright's/Puppeteer's ``cookies()`` shape, :meth:`CookieStore.import_browser`
takes it.

Layout: ``Keys.cookies(host)`` is a hash with one field per cookie identity
``name;domain;path`` holding JSON (:class:`StoredCookie`): value, attributes and
``set_at``, when whoever set this value set it. Both flaws of a name -> value hash
written back whole are avoided: attributes survive, and a write lands only if its
``set_at`` is not older than the stored one (one Lua script per merge), while
cookies a task did not change are never written. The key's TTL is the latest
cookie expiry (session cookies count :data:`SESSION_COOKIE_TTL`), capped at
:data:`MAX_TTL`, refreshed on every write. Hosts are lower-case, IDNA, without port.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis
import requests
from celery import Task

from ..errors import InvalidTaskInput
from ..settings import Settings, get_settings
from ..state.keys import Keys
from ..state.redis import state_redis
from ..state.scripts import run
from .cookie_model import (
    CookieSnapshot,
    Op,
    StoredCookie,
    diff_jar,
    domain_matches,
    jar_cookies,
    mask_value,
    normalize_host,
    parse_browser_cookies,
)

__all__ = [
    "MAX_TTL",
    "SESSION_COOKIE_TTL",
    "CookieSnapshot",
    "CookieStore",
    "MergeResult",
    "SharedCookiesTask",
    "StoredCookie",
    "diff_jar",
    "domain_matches",
    "mask_value",
    "normalize_host",
    "parse_browser_cookies",
]

log = logging.getLogger(__name__)

#: Longest TTL of a host's cookie key, whatever the cookies' own expiry says.
MAX_TTL = 30 * 86_400
#: How long a session cookie (no expiry) keeps its host's key alive after a write.
SESSION_COOKIE_TTL = 86_400


@dataclass(frozen=True)
class MergeResult:
    written: int = 0  #: new or changed cookies stored
    stale: int = 0  #: changes dropped: another worker had stored a fresher value
    deleted: int = 0  #: cookies the server deleted (or that expired) removed from the store


class CookieStore:
    """The shared cookie jars in Redis (see the module docstring for the rules)."""

    def __init__(
        self,
        client: redis.Redis,
        settings: Settings,
        *,
        clock: Callable[[], float] = time.time,
        max_ttl: int = MAX_TTL,
        session_ttl: int = SESSION_COOKIE_TTL,
    ) -> None:
        self.client = client
        self.keys = Keys(settings.key_prefix)
        self.clock = clock
        self.max_ttl = max_ttl
        self.session_ttl = session_ttl

    def load(self, host: str) -> list[StoredCookie]:
        """The host's live cookies (expired ones are deleted on the way)."""
        host = normalize_host(host)
        flat = run(self.client, "cookies_load", [self.keys.cookies(host)], [repr(self.clock())])
        cookies = []
        for field, raw in zip(flat[::2], flat[1::2], strict=True):
            try:
                cookies.append(StoredCookie.from_json(raw))
            except (ValueError, KeyError, TypeError):
                log.warning("skipping an unreadable shared cookie %r of %s", field, host)
        return sorted(cookies, key=lambda c: (c.domain, c.path, c.name))

    def apply(self, session: requests.Session, host: str) -> CookieSnapshot:
        """Load the host's cookies into ``session`` (attributes kept) and return what was
        loaded, for :meth:`merge`."""
        host = normalize_host(host)
        loaded = self.load(host)
        for cookie in loaded:
            session.cookies.set_cookie(cookie.to_jar())
        return CookieSnapshot(host, {c.identity: c for c in loaded})

    def merge(
        self, session: requests.Session, host: str, snapshot: CookieSnapshot | None = None
    ) -> MergeResult:
        """Write back what ``session`` changed since ``snapshot`` (None: everything is new).

        One Lua call; a cookie another worker set more recently than this change is kept.
        """
        host = normalize_host(host)
        if snapshot is not None and snapshot.host != host:
            raise ValueError(f"snapshot of {snapshot.host!r} merged into {host!r}")
        now = self.clock()
        ops = diff_jar(session.cookies, host, snapshot or CookieSnapshot(host, {}), now)
        return self._apply_ops(host, ops, now)

    def import_browser(self, host: str, cookies: list[dict[str, Any]]) -> MergeResult:
        """Store Playwright/Puppeteer cookies (``context.cookies()`` shape) for ``host``,
        with the same freshness rule as :meth:`merge`. Bad input: :class:`InvalidTaskInput`."""
        host = normalize_host(host)
        now = self.clock()
        parsed, _expired = parse_browser_cookies(host, cookies, now)
        by_identity = {c.identity: c for c in parsed}  # a repeated cookie: the last wins
        ops = [("set", identity, c.to_json()) for identity, c in sorted(by_identity.items())]
        return self._apply_ops(host, ops, now)

    def export_browser(self, host: str) -> list[dict[str, Any]]:
        """The host's cookies for Playwright's ``context.add_cookies`` / Puppeteer's
        ``page.setCookie`` (their ``cookies()`` shape; ``expires`` -1 for session)."""
        host = normalize_host(host)
        return [c.to_browser(host) for c in self.load(host)]

    def show(self, host: str, *, reveal: bool = False) -> list[dict[str, Any]]:
        """The host's cookies as plain dicts, values masked unless ``reveal``."""
        rows = []
        for cookie in self.load(host):
            row = dataclasses.asdict(cookie)
            if not reveal:
                row["value"] = mask_value(cookie.value)
            rows.append(row)
        return rows

    def clear(self, host: str) -> int:
        """Forget every shared cookie of the host; returns how many there were."""
        key = self.keys.cookies(normalize_host(host))
        pipe = self.client.pipeline(transaction=True)
        pipe.hlen(key)
        pipe.delete(key)
        count, _ = pipe.execute()
        return int(count)

    def _apply_ops(self, host: str, ops: Iterable[Op], now: float) -> MergeResult:
        args: list[str] = [repr(now), str(self.max_ttl), str(self.session_ttl)]
        for op in ops:
            args.extend(op)
        if len(args) == 3:
            return MergeResult()  # nothing changed: no write, no TTL refresh
        written, stale, deleted = run(self.client, "cookies_merge", [self.keys.cookies(host)], args)
        return MergeResult(int(written), int(stale), int(deleted))


# The session of each running execution, per thread (greenlet under gevent): one task
# instance serves every execution of a process, concurrently under -P threads/gevent.
_running = threading.local()


class _Execution:
    """One running execution's session and what its cookies were last synced to."""

    def __init__(self, task: object, session: requests.Session) -> None:
        self.task = task
        self.session = session
        self.store: CookieStore | None = None
        self.host: str | None = None
        self.snapshot: CookieSnapshot | None = None


def _stack() -> list[_Execution]:
    stack: list[_Execution] | None = getattr(_running, "stack", None)
    if stack is None:
        stack = _running.stack = []
    return stack


class SharedCookiesTask(Task):  # type: ignore[misc]  # celery ships no type hints
    """Task mixin: ``self.http``, a ``requests.Session`` per execution carrying the shared
    cookies of :meth:`cookie_host`, merged back after every attempt (success, failure,
    retry). ``__call__`` is overridden cooperatively, so it combines with other bases:
    ``class MyTask(SharedCookiesTask, SolverTask)``. Bodies need ``bind=True``."""

    abstract = True
    #: Keyword arguments whose http(s) URL names the host, checked in order.
    cookie_url_kwargs: tuple[str, ...] = ("url",)

    def _execution(self) -> _Execution:
        for execution in reversed(_stack()):
            if execution.task is self:
                return execution
        raise RuntimeError(f"{self.name}: self.http exists only while the task runs")

    @property
    def http(self) -> requests.Session:
        return self._execution().session

    def save_cookies(self) -> None:
        """Merge this execution's cookie changes now, not only when the body ends: call
        it before releasing a lock that others wait on to read the fresh cookies."""
        execution = self._execution()
        if execution.store is None or execution.host is None or execution.snapshot is None:
            return
        execution.store.merge(execution.session, execution.host, execution.snapshot)
        now = time.time()
        current = jar_cookies(execution.session.cookies, execution.host, now)
        execution.snapshot = CookieSnapshot(execution.host, current)

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

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        session = self.make_http_session()
        execution = _Execution(self, session)
        try:
            execution.host = self.cookie_host(args, kwargs)
            if execution.host is not None:
                execution.store = self.cookie_store
                execution.snapshot = execution.store.apply(session, execution.host)
            stack = _stack()
            stack.append(execution)
            try:
                return super().__call__(*args, **kwargs)
            finally:
                stack.pop()
                if execution.store and execution.host and execution.snapshot is not None:
                    self._merge_back(execution.store, session, execution.host, execution.snapshot)
        finally:
            session.close()

    def _merge_back(
        self, store: CookieStore, session: requests.Session, host: str, snapshot: CookieSnapshot
    ) -> None:
        try:
            store.merge(session, host, snapshot)
        except redis.RedisError as exc:
            # The body's outcome (and its side effects) stand: losing a cookie update is
            # cheaper than failing or re-running the task for it.
            log.warning("%s: could not merge the cookies of %s back: %s", self.name, host, exc)
