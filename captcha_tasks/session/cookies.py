"""Cookies shared per host by every worker, without stale jars overwriting fresh ones.

A task that logs in (or passes a challenge) leaves cookies that other workers should
reuse instead of solving again. Each execution loads the host's shared cookies into
its own ``requests.Session`` and, when it ends, writes back only what it changed::

    from captcha_tasks import SharedCookiesTask, app

    @app.task(base=SharedCookiesTask, bind=True, name="myproject.fetch")
    def fetch(self, url):
        # self.http carries example.com's shared cookies; whatever the site sets or
        # deletes here is merged back for every other worker when the task ends
        # (also when it raises or retries).
        return self.http.get(url, timeout=30).status_code

    fetch.delay("https://example.com/account")

Without Celery: ``shared = SharedSession(session, store, host).load()`` ...
``shared.save()`` (or ``store.apply`` and ``store.merge`` by hand). Browser automation:
:meth:`CookieStore.export_browser` gives Playwright's/Puppeteer's ``cookies()`` shape,
:meth:`CookieStore.import_browser` takes it, and :meth:`CookieStore.merge_browser`
writes back only what a browser changed since a snapshot, as :meth:`CookieStore.merge`
does for a session (``captcha_tasks.contrib.playwright`` keeps that snapshot per context).

Layout: ``Keys.cookies(host)`` is a hash with one field per cookie identity
``name;domain;path`` holding JSON (:class:`StoredCookie`): value, attributes and
``set_at``, when whoever set this value set it. Both flaws of a name -> value hash
written back whole are avoided: attributes survive, and a write lands only if its
``set_at`` is not older than the stored one (one Lua script per merge), while
cookies a task did not change are never written. The key's TTL is the latest
cookie expiry (session cookies count :data:`SESSION_COOKIE_TTL`), capped at
:data:`MAX_TTL`, refreshed on every write. Hosts are lower-case, IDNA, without port.

Cookies bound to a visitor (:data:`VISITOR_BOUND_COOKIES`: DataDome's ``datadome``,
Cloudflare's ``cf_clearance``) are good only from the IP and user agent that earned
them: another worker sending one through its own proxy is challenged again, solves
again and would overwrite everyone's copy. They are never written to or read from the
host's shared jar; each visitor keeps its own in ``Keys.visitor_cookies(host, visitor)``
(same layout, rules and TTLs), where ``visitor`` is :func:`visitor_id` of the worker's
pinned proxy id and its user agent.
Executions with the same visitor (prefork children of one worker) share it; without a
visitor such cookies are neither loaded nor stored.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import redis
import requests

from ..settings import Settings
from ..state.clock import clock_of
from ..state.keys import Keys
from ..state.scripts import run
from .cookie_model import (
    CookieSnapshot,
    Op,
    StoredCookie,
    browser_jar,
    diff_browser,
    diff_jar,
    domain_matches,
    jar_cookies,
    mask_value,
    normalize_host,
    parse_browser_cookies,
)

__all__ = [
    "MAX_TTL",
    "PAGE_JAR_TTL",
    "SESSION_COOKIE_TTL",
    "VISITOR_BOUND_COOKIES",
    "CookieSnapshot",
    "CookieStore",
    "MergeResult",
    "PageJar",
    "SharedSession",
    "StoredCookie",
    "decode_loaded",
    "diff_jar",
    "domain_matches",
    "mask_value",
    "merge_args",
    "normalize_host",
    "parse_browser_cookies",
    "visitor_bound",
    "visitor_id",
]

log = logging.getLogger(__name__)

#: Longest TTL of a host's cookie key, whatever the cookies' own expiry says.
MAX_TTL = 30 * 86_400
#: How long a session cookie (no expiry) keeps its host's key alive after a write.
SESSION_COOKIE_TTL = 86_400
#: Names of cookies bound to the visitor that earned them (its IP and user agent), kept
#: per visitor instead of in the host's shared jar: DataDome's ``datadome`` (its docs and
#: the solving providers: the cookie is good only from the IP and User-Agent it was
#: solved with) and Cloudflare's ``cf_clearance`` (bound the same way: CapMonster Cloud's
#: and CapSolver's Cloudflare challenge pages).
VISITOR_BOUND_COOKIES = frozenset({"datadome", "cf_clearance"})
#: Seconds an isolated page's own jar (:class:`PageJar`) outlives its last write: longer
#: than any page's solves and retries, so it is gone even when its last step never runs.
PAGE_JAR_TTL = 3_600


def visitor_id(proxy_id: str | None, user_agent: str, worker: str | None = None) -> str | None:
    """Who a visitor-bound cookie belongs to: the pinned proxy's id (credential-free)
    or, going direct, the worker's name, with 12 hex digits of SHA-256 over the user
    agent. ``None`` (neither a proxy nor a worker): no visitor."""
    where = proxy_id or (f"direct-{worker}" if worker else None)
    if where is None:
        return None
    return f"{where}:{hashlib.sha256(user_agent.encode()).hexdigest()[:12]}"


def visitor_bound(field: str) -> bool:
    """Whether the cookie of a jar field (``name;domain;path``) is visitor-bound."""
    return field.split(";", 1)[0] in VISITOR_BOUND_COOKIES


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
        clock: Callable[[], float] | None = None,
        max_ttl: int = MAX_TTL,
        session_ttl: int = SESSION_COOKIE_TTL,
    ) -> None:
        self.client = client
        self.keys = Keys(settings.key_prefix)
        # Redis's clock: set_at stamps decide between writers on different hosts.
        self.clock = clock or clock_of(client)
        self.max_ttl = max_ttl
        self.session_ttl = session_ttl

    def jar_key(self, host: str) -> str:
        """The key of the jar this store keeps ``host``'s (normalized) cookies in."""
        return self.keys.cookies(host)

    def load(self, host: str, visitor: str | None = None) -> list[StoredCookie]:
        """The host's live cookies (expired ones are deleted on the way): the shared ones
        and, with a ``visitor``, that visitor's own visitor-bound ones."""
        host = normalize_host(host)
        now = repr(self.clock())
        flat = run(self.client, "cookies_load", [self.jar_key(host)], [now])
        shared = [c for c in decode_loaded(flat, host) if not visitor_bound(c.identity)]
        if visitor is None:
            return shared
        key = self.keys.visitor_cookies(host, visitor)
        own = decode_loaded(run(self.client, "cookies_load", [key], [now]), host)
        return sorted(
            [*shared, *(c for c in own if visitor_bound(c.identity))],
            key=lambda c: (c.domain, c.path, c.name),
        )

    def apply(
        self, session: requests.Session, host: str, visitor: str | None = None
    ) -> CookieSnapshot:
        """Load the host's cookies (and ``visitor``'s own) into ``session`` (attributes
        kept) and return what was loaded, for :meth:`merge`."""
        host = normalize_host(host)
        loaded = self.load(host, visitor)
        for cookie in loaded:
            session.cookies.set_cookie(cookie.to_jar())
        return CookieSnapshot(host, {c.identity: c for c in loaded})

    def merge(
        self,
        session: requests.Session,
        host: str,
        snapshot: CookieSnapshot | None = None,
        visitor: str | None = None,
    ) -> MergeResult:
        """Write back what ``session`` changed since ``snapshot`` (None: everything is new):
        visitor-bound cookies to ``visitor``'s own jar (none: dropped), the rest to the
        host's shared jar.

        A Lua call per jar; a cookie another worker set more recently than this change is
        kept.
        """
        host = normalize_host(host)
        if snapshot is not None and snapshot.host != host:
            raise ValueError(f"snapshot of {snapshot.host!r} merged into {host!r}")
        now = self.clock()
        ops = diff_jar(session.cookies, host, snapshot or CookieSnapshot(host, {}), now)
        return self._apply_ops(host, ops, now, visitor)

    def import_browser(self, host: str, cookies: list[dict[str, Any]]) -> MergeResult:
        """Store Playwright/Puppeteer cookies (``context.cookies()`` shape) for ``host``,
        with the same freshness rule as :meth:`merge`. Bad input: :class:`InvalidTaskInput`."""
        host = normalize_host(host)
        now = self.clock()
        parsed, _expired = parse_browser_cookies(host, cookies, now)
        by_identity = {c.identity: c for c in parsed}  # a repeated cookie: the last wins
        ops = [("set", identity, c.to_json()) for identity, c in sorted(by_identity.items())]
        return self._apply_ops(host, ops, now)

    def merge_browser(
        self,
        host: str,
        cookies: Iterable[Mapping[str, Any]],
        snapshot: CookieSnapshot | None = None,
    ) -> tuple[MergeResult, CookieSnapshot, list[str]]:
        """Write back what a browser changed since ``snapshot``: its ``context.cookies()``
        (every host's; those sent to ``host`` are taken) against what it was given or
        last wrote. New or changed cookies are set, ones it no longer has deleted (only
        the version it saw), with :meth:`merge`'s freshness rule. ``snapshot`` None:
        every cookie is new, none deleted. Returns the result, the snapshot for the next
        merge, and why each cookie the jar cannot hold was left out."""
        host = normalize_host(host)
        now = self.clock()
        current, refused = browser_jar(host, cookies, now)
        ops = diff_browser(current, snapshot or CookieSnapshot(host, {}))
        return self._apply_ops(host, ops, now), CookieSnapshot(host, current), refused

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
        key = self.jar_key(normalize_host(host))
        pipe = self.client.pipeline(transaction=True)
        pipe.hlen(key)
        pipe.delete(key)
        count, _ = pipe.execute()
        return int(count)

    def _apply_ops(
        self, host: str, ops: Iterable[Op], now: float, visitor: str | None = None
    ) -> MergeResult:
        """Each op to its jar: visitor-bound cookies to ``visitor``'s (without a visitor:
        nowhere), the others to the host's."""
        shared: list[Op] = []
        own: list[Op] = []
        for op in ops:
            (own if visitor_bound(op[1]) else shared).append(op)
        jars = [(self.jar_key(host), shared)]
        if visitor is not None:
            jars.append((self.keys.visitor_cookies(host, visitor), own))
        total = MergeResult()
        for key, jar_ops in jars:
            args = merge_args(jar_ops, now, self.max_ttl, self.session_ttl)
            if args is None:
                continue  # nothing changed: no write, no TTL refresh
            written, stale, deleted = run(self.client, "cookies_merge", [key], args)
            total = MergeResult(
                total.written + int(written), total.stale + int(stale), total.deleted + int(deleted)
            )
        return total


class PageJar(CookieStore):
    """One isolated page's own cookies (``Keys.page_cookies``): what the site set when
    ``fetch_page(..., isolated=True)`` loaded it (a session cookie its form's one-time
    field is bound to, say) goes with the page to the step that posts the form, on
    whichever worker that runs, and to each reload of a retry; no other task reads it.
    Same layout, freshness rule and TTL as the shared jars, with :data:`PAGE_JAR_TTL` both
    as the cap and as a session cookie's lifetime; the page's last step deletes it
    (:meth:`clear`)."""

    def __init__(self, client: redis.Redis, settings: Settings, page_id: str) -> None:
        super().__init__(client, settings, max_ttl=PAGE_JAR_TTL, session_ttl=PAGE_JAR_TTL)
        self.page_id = page_id

    def jar_key(self, host: str) -> str:
        return self.keys.page_cookies(host, self.page_id)


def decode_loaded(flat: list[str], host: str) -> list[StoredCookie]:
    """The cookies of a ``cookies_load`` reply (field, json, ...), unreadable ones logged
    and skipped, in a stable order. Shared by every client of the script, sync or async."""
    cookies = []
    for field, raw in zip(flat[::2], flat[1::2], strict=True):
        try:
            cookies.append(StoredCookie.from_json(raw))
        except (ValueError, KeyError, TypeError):
            log.warning("skipping an unreadable shared cookie %r of %s", field, host)
    return sorted(cookies, key=lambda c: (c.domain, c.path, c.name))


def merge_args(
    ops: Iterable[Op], now: float, max_ttl: int = MAX_TTL, session_ttl: int = SESSION_COOKIE_TTL
) -> list[str] | None:
    """The ``cookies_merge`` arguments for ``ops``, or None when there is nothing to write."""
    args: list[str] = [repr(now), str(max_ttl), str(session_ttl)]
    for op in ops:
        args.extend(op)
    return None if len(args) == 3 else args


class SharedSession:
    """``session`` sharing ``host``'s cookies through ``store``: :meth:`load` puts them in,
    :meth:`save` writes back what changed since the last load or save; visitor-bound
    cookies go to and come from ``visitor``'s own jar. Without a store or a host it is a
    plain session: nothing is read or written."""

    def __init__(
        self,
        session: requests.Session,
        store: CookieStore | None = None,
        host: str | None = None,
        visitor: str | None = None,
    ) -> None:
        self.session = session
        self.store = store
        self.host = normalize_host(host) if host is not None else None
        #: Whose visitor-bound cookies it carries (:func:`visitor_id`); None: none.
        self.visitor = visitor
        self.snapshot: CookieSnapshot | None = None

    @property
    def shared(self) -> bool:
        return self.store is not None and self.host is not None

    def load(self) -> SharedSession:
        if self.store is not None and self.host is not None:
            self.snapshot = self.store.apply(self.session, self.host, self.visitor)
        return self

    def save(self) -> MergeResult:
        """Merge the changes now; later saves count from here."""
        if self.store is None or self.host is None or self.snapshot is None:
            return MergeResult()
        result = self.store.merge(self.session, self.host, self.snapshot, self.visitor)
        current = jar_cookies(self.session.cookies, self.host, self.store.clock())
        self.snapshot = CookieSnapshot(self.host, current)
        return result
