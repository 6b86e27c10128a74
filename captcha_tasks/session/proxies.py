"""The proxy pool: one proxy pinned to each worker, leased in Redis.

Sites that bind a session to an IP address want every request of a worker to leave
through the same proxy, and no two workers on one proxy. Each worker therefore
*leases* one proxy of the pool and renews the lease from a heartbeat
(:mod:`captcha_tasks.session.pinned_proxy`); a worker that dies stops renewing, and its
proxy returns to the pool when the lease expires (``CAPTCHA_TASKS_PROXY_LEASE_TTL``).

Redis layout (names from :class:`~captcha_tasks.state.Keys`):

==============================  ======  ===========================================
``{p}proxies``                  hash    proxy id -> JSON record with credentials (the
                                        only place they are stored). TTL
                                        ``PROXY_POOL_TTL`` (30 days), refreshed by
                                        every write and every lease heartbeat.
``{p}proxy:lease:{id}``         string  the worker holding the proxy; its own TTL
                                        (the lease), set with ``SET NX PX``.
``{p}proxy:worker:{worker}``    string  the proxy id the worker holds (same TTL).
``{p}proxy:quarantine:{id}``    string  why it was reported bad; TTL the cooldown.
==============================  ======  ===========================================

Every lease is its own key with its own TTL (never one TTL over a hash of
assignments, which would let a live worker's lease expire with a dead one's, or keep
a dead one's alive). Leasing, renewing, releasing, quarantining and removing are
each one Lua script, owner-checked where it matters.

A proxy id is a short hash of ``host:port:user``: stable across re-adds, and free of
credentials, so key names, logs and task arguments can carry it. Views of the pool
(:meth:`ProxyPool.list`) mask passwords as ``user:***@host:port``; only
:meth:`ProxyPool.get` and friends return a :class:`Proxy` with its password, for use.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import re
from typing import Any
from urllib.parse import quote

import redis

from ..errors import InvalidTaskInput, NoProxyAvailable, UnknownProxy
from ..provider.proxy import Proxy, ProxyType
from ..redaction import mask_secrets
from ..settings import Settings
from ..state import Keys
from ..state.clock import local_time
from ..state.keys import PROXY_POOL_TTL
from ..state.scripts import run

__all__ = [
    "SCHEMES",
    "NoProxyAvailable",
    "ProxyPool",
    "ProxyView",
    "UnknownProxy",
    "checked_proxy",
    "masked",
    "proxy_id",
    "proxy_url",
]

#: Longest quarantine reason kept (characters).
MAX_REASON = 200
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# The proxy URL ``requests`` gets for each type. SOCKS proxies resolve the target's
# name themselves (socks5h, socks4a), not the worker: for scraping that is what users
# want (the page is looked up where it is fetched from, geo-DNS included, and the
# worker's resolver does not see the names). pages.check_url still resolves a name on
# the worker first, for the allowlist's public-address check.
_SCHEMES: dict[str, str] = {
    "HTTP": "http",
    "HTTPS": "https",
    "SOCKS4": "socks4a",
    "SOCKS5": "socks5h",
}
#: Schemes ``add`` takes (``host:port`` without one is HTTP), and the type of each.
#: Every one works both for page fetches and for the provider (``proxytype``).
SCHEMES: dict[str, str] = {
    "http": "HTTP",
    "https": "HTTPS",
    "socks4": "SOCKS4",
    "socks4a": "SOCKS4",
    "socks5": "SOCKS5",
    "socks5h": "SOCKS5",
}
_ALLOWED = ", ".join(f"{name}://" for name in SCHEMES) + " (none: http)"
_SCHEME = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]{0,15})://")


def proxy_id(proxy: Proxy) -> str:
    """12 hex digits of SHA-256 over ``host:port:user``: stable and credential-free."""
    ident = f"{proxy.host.lower()}:{proxy.port}:{proxy.username or ''}"
    return hashlib.sha256(ident.encode()).hexdigest()[:12]


def masked(proxy: Proxy) -> str:
    """``user:***@host:port`` (or ``host:port``): how a proxy is shown anywhere."""
    auth = f"{proxy.username}:***@" if proxy.username is not None else ""
    return f"{auth}{proxy.address}"


def proxy_url(proxy: Proxy) -> str:
    """The URL with credentials that ``requests`` wants in ``session.proxies``.

    SOCKS5 becomes ``socks5h://`` and SOCKS4 ``socks4a://`` (names resolved by the
    proxy, see ``_SCHEMES``); SOCKS goes through PySocks (``requests[socks]``, a
    dependency). Keep it in memory only.
    """
    auth = ""
    if proxy.username is not None and proxy.password is not None:
        auth = f"{quote(proxy.username, safe='')}:{quote(proxy.password, safe='')}@"
    return f"{_SCHEMES[proxy.type]}://{auth}{proxy.address}"


def checked_proxy(url: str | Proxy, type: str | None = None) -> Proxy:
    """The :class:`Proxy` of ``url`` if the pool can use it for both page fetches and
    the provider, else :class:`InvalidTaskInput` (naming what is allowed, never
    echoing the URL, which may hold the password).

    Refused: schemes other than :data:`SCHEMES` (``ftp://``, ``socks6://``, ...), and
    SOCKS4 with a password (SOCKS4 has a user id but no password: use SOCKS5).
    """
    if isinstance(url, Proxy):
        proxy = url if type is None else dataclasses.replace(url, type=type)  # type: ignore[arg-type]
    else:
        if not isinstance(url, str):
            raise InvalidTaskInput("Proxy: must be a '[scheme://][user:pass@]host:port' string")
        scheme = _SCHEME.match(url)
        if scheme is None and "://" in url:
            raise InvalidTaskInput(f"Proxy: unreadable scheme; use one of {_ALLOWED}")
        name = scheme.group(1).lower() if scheme else ""
        if name and name not in SCHEMES:
            raise InvalidTaskInput(
                f"Proxy: scheme {name}:// is not supported; use one of {_ALLOWED}"
            )
        if name == "socks4a" and type is None:
            type = "SOCKS4"  # Proxy.parse knows the types, not this alias
        proxy = Proxy.parse(url, type)
    if proxy.type == "SOCKS4" and proxy.password is not None:
        raise InvalidTaskInput(
            "Proxy: SOCKS4 has no password authentication; add it without user:password, "
            "or as socks5:// if the proxy speaks SOCKS5"
        )
    return proxy


def _record(proxy: Proxy) -> str:
    return json.dumps(
        {
            "host": proxy.host,
            "port": proxy.port,
            "type": proxy.type,
            "username": proxy.username,
            "password": proxy.password,
            "added_at": round(local_time(), 3),
        }
    )


def _from_record(raw: str | bytes) -> Proxy:
    data = json.loads(raw)
    return Proxy(data["host"], int(data["port"]), data["type"], data["username"], data["password"])


@dataclasses.dataclass(frozen=True)
class ProxyView:
    """A proxy as shown by ``list``: never its password."""

    id: str
    type: ProxyType
    proxy: str  # user:***@host:port
    holder: str | None
    quarantined: bool
    quarantine_reason: str | None = None
    quarantine_seconds_left: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


class ProxyPool:
    """The pool of proxies in Redis and the leases that pin them to workers."""

    def __init__(self, client: redis.Redis, settings: Settings) -> None:
        self.client = client
        self.keys = Keys(settings.key_prefix)
        self.lease_ms = max(1, round(settings.proxy_lease_ttl * 1000))
        self.cooldown_ms = max(0, round(settings.proxy_cooldown * 1000))

    # -- the pool ---------------------------------------------------------------------

    def add(self, url: str | Proxy, type: str | None = None) -> str:
        """Add (or update: same host, port and user) a proxy; returns its id.

        ``url``: ``[scheme://][user:pass@]host:port`` or ``host:port:user:pass``, the
        scheme one of :data:`SCHEMES`; ``type`` (HTTP, HTTPS, SOCKS4, SOCKS5) wins over
        the scheme. Raises :class:`InvalidTaskInput` for a proxy the workers could not
        use (see :func:`checked_proxy`).
        """
        proxy = checked_proxy(url, type)
        ident = proxy_id(proxy)
        with self.client.pipeline(transaction=True) as pipe:
            pipe.hset(self.keys.proxies, ident, _record(proxy))
            pipe.expire(self.keys.proxies, PROXY_POOL_TTL)
            pipe.execute()
        return ident

    def remove(self, ident: str) -> bool:
        """Remove a proxy (its holder's lease and its quarantine go too). ``False`` if
        the id is unknown."""
        holder = run(
            self.client,
            "proxy_remove",
            [self.keys.proxies, self.keys.proxy_lease(ident), self.keys.proxy_quarantine(ident)],
            [ident, self.keys.worker_proxy_prefix],
        )
        return holder is not None and holder is not False

    def get(self, ident: str) -> Proxy:
        """The proxy with its credentials, for use (not for display). Raises
        :class:`UnknownProxy`."""
        raw = self.client.hget(self.keys.proxies, ident)
        if raw is None:
            raise UnknownProxy(f"no proxy with id {ident!r} in the pool")
        return _from_record(raw)

    def ids(self) -> list[str]:
        return sorted(_text(i) or "" for i in self.client.hkeys(self.keys.proxies))

    def list(self) -> list[ProxyView]:
        """Every proxy, masked, with the worker holding it and its quarantine, by id."""
        records: dict[Any, Any] = self.client.hgetall(self.keys.proxies)
        idents = sorted(_text(i) or "" for i in records)
        with self.client.pipeline(transaction=False) as pipe:
            for ident in idents:
                pipe.get(self.keys.proxy_lease(ident))
                pipe.get(self.keys.proxy_quarantine(ident))
                pipe.pttl(self.keys.proxy_quarantine(ident))
            answers = pipe.execute()
        views: list[ProxyView] = []
        by_text = {_text(k): v for k, v in records.items()}
        for n, ident in enumerate(idents):
            holder, reason, pttl = answers[3 * n : 3 * n + 3]
            proxy = _from_record(by_text[ident])
            quarantined = reason is not None
            views.append(
                ProxyView(
                    id=ident,
                    type=proxy.type,
                    proxy=masked(proxy),
                    holder=_text(holder),
                    quarantined=quarantined,
                    quarantine_reason=_text(reason) if quarantined else None,
                    quarantine_seconds_left=(
                        round(int(pttl) / 1000, 1) if quarantined and int(pttl) >= 0 else None
                    ),
                )
            )
        return views

    def report_bad(self, ident: str, reason: str = "") -> str | None:
        """Quarantine a proxy for ``CAPTCHA_TASKS_PROXY_COOLDOWN`` and drop its lease,
        so its holder leases another at its next heartbeat. Returns the former holder
        (``None`` if nobody held it). Raises :class:`UnknownProxy`.

        The reason is trimmed and scrubbed of the proxy's password.
        """
        proxy = self.get(ident)
        text = _CONTROL.sub(" ", reason or "reported bad").strip() or "reported bad"
        if proxy.password:
            text = mask_secrets(text, (proxy.password,))
        holder = run(
            self.client,
            "proxy_report_bad",
            [self.keys.proxies, self.keys.proxy_quarantine(ident), self.keys.proxy_lease(ident)],
            [
                ident,
                text[:MAX_REASON],
                self.cooldown_ms,
                self.keys.worker_proxy_prefix,
                PROXY_POOL_TTL,
            ],
        )
        if holder is None or holder is False:
            raise UnknownProxy(f"no proxy with id {ident!r} in the pool")
        return _text(holder) or None

    def quarantined(self, ident: str) -> bool:
        return bool(self.client.exists(self.keys.proxy_quarantine(ident)))

    # -- leases -----------------------------------------------------------------------

    def lease(self, worker: str) -> str | None:
        """The id of the proxy ``worker`` holds, leasing a free one if it holds none.

        Keeps the worker's live lease (renewing it); else takes a proxy nobody holds
        and that is not quarantined (the previous one first). ``None`` when none is free.
        """
        found = run(
            self.client,
            "proxy_lease",
            [self.keys.proxies, self.keys.worker_proxy(_worker(worker))],
            [
                worker,
                self.lease_ms,
                PROXY_POOL_TTL,
                self.keys.proxy_lease_prefix,
                self.keys.proxy_quarantine_prefix,
                random.randrange(1 << 30),
            ],
        )
        return _text(found) if found else None

    def renew(self, worker: str, ident: str) -> bool:
        """Extend ``worker``'s lease of ``ident`` (and its ``worker_proxy`` key) to the
        lease TTL, refreshing the pool's TTL. ``False`` if the lease was lost (expired
        and taken, quarantined or removed): lease again."""
        keys = [
            self.keys.proxy_lease(ident),
            self.keys.worker_proxy(_worker(worker)),
            self.keys.proxies,
            self.keys.proxy_quarantine(ident),
        ]
        return bool(
            run(self.client, "proxy_renew", keys, [worker, ident, self.lease_ms, PROXY_POOL_TTL])
        )

    def release(self, worker: str, ident: str) -> bool:
        """Give ``ident`` back if ``worker`` holds it (``False`` otherwise)."""
        return bool(
            run(
                self.client,
                "proxy_release",
                [self.keys.proxy_lease(ident), self.keys.worker_proxy(_worker(worker))],
                [worker, ident],
            )
        )

    def holder(self, ident: str) -> str | None:
        """The worker holding ``ident`` now, if any."""
        return _text(self.client.get(self.keys.proxy_lease(ident)))

    def held(self, worker: str) -> tuple[str, Proxy] | None:
        """``(id, proxy)`` of the live lease ``worker`` holds, or ``None`` (one round trip)."""
        found = run(
            self.client,
            "proxy_of",
            [self.keys.worker_proxy(_worker(worker)), self.keys.proxies],
            [worker, self.keys.proxy_lease_prefix, self.keys.proxy_quarantine_prefix],
        )
        if not found:
            return None
        ident, raw = found
        return _text(ident) or "", _from_record(raw)

    def worker_proxy(self, worker: str) -> Proxy | None:
        """The proxy ``worker`` holds (with credentials, for use), or ``None``."""
        found = self.held(worker)
        return found[1] if found else None


def _worker(worker: str) -> str:
    if not isinstance(worker, str) or not worker or len(worker) > 255 or _CONTROL.search(worker):
        raise InvalidTaskInput("worker: must be a worker name (non-empty, printable)")
    return worker
