"""Shared cookies as plain data: host names, the stored cookie, the browser format, diffs.

No Redis and no Celery here (see :mod:`.cookies` for the store and the task mixin):
everything in this module is a pure function of its arguments.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http.cookiejar import Cookie, CookieJar
from typing import Any
from urllib.parse import urlsplit

import idna

from ..errors import InvalidTaskInput

__all__ = [
    "CookieSnapshot",
    "Op",
    "StoredCookie",
    "browser_jar",
    "diff_browser",
    "diff_jar",
    "domain_matches",
    "mask_value",
    "normalize_host",
    "parse_browser_cookies",
]

_ASCII_HOST = re.compile(r"[a-z0-9_.-]{1,253}")
_BAD_NAME = re.compile(r"[\x00-\x20\x7f;=,]")
_BAD_VALUE = re.compile(r"[\x00-\x1f\x7f;]")
_SAME_SITE = {"strict": "Strict", "lax": "Lax", "none": "None"}


def normalize_host(host: str) -> str:
    """``"https://Bücher.Example:8443/x"`` or ``"Bücher.example."`` -> ``"xn--bcher-kva.example"``.

    Lower-case, no port, no trailing dot, IDNA (UTS 46) for non-ASCII names;
    IPv6 literals lose their brackets. Raises :class:`InvalidTaskInput`.
    """
    raw = host.strip()
    try:
        if "://" in raw:
            name = urlsplit(raw).hostname or ""
        elif raw.startswith("["):
            name = raw[1:].split("]", 1)[0]  # [v6]:port
        else:
            name = raw.split(":", 1)[0] if raw.count(":") == 1 else raw
        name = name.rstrip(".").lower()
        if ":" in name:
            return str(ipaddress.IPv6Address(name))
        if name and not name.isascii():
            name = idna.encode(name, uts46=True).decode("ascii")
    except ValueError as exc:  # idna.IDNAError is a ValueError too
        raise InvalidTaskInput(f"{host!r} is not a valid host name: {exc}") from None
    # ASCII names are only checked loosely: underscores exist in real internal hosts.
    if not _ASCII_HOST.fullmatch(name) or ".." in name or name.startswith("."):
        raise InvalidTaskInput(f"{host!r} is not a valid host name")
    return name


def domain_matches(domain: str, host: str) -> bool:
    """Whether a cookie of ``domain`` (leading dot: a domain cookie, else host-only) is
    sent to the normalised ``host`` (RFC 6265 matching)."""
    d = domain.lower()
    domain_cookie = d.startswith(".")
    d = d.lstrip(".")
    if "." not in host:  # http.cookiejar names a dotless host "<host>.local"
        d = d.removesuffix(".local")
    d = d.strip("[]")
    return d == host or (domain_cookie and host.endswith("." + d))


def mask_value(value: str) -> str:
    """A cookie value fit for a terminal: long ones keep 4 characters, short ones none."""
    return f"{value[:4]}...({len(value)})" if len(value) >= 16 else f"***({len(value)})"


def _rest_attrs(cookie: Cookie) -> dict[str, str | None]:
    # http.cookiejar keeps attributes it does not model (HttpOnly, SameSite) in `_rest`
    # under the server's spelling, with no public way to list them.
    rest: Mapping[str, str | None] = getattr(cookie, "_rest", {})
    return {str(k).lower(): v for k, v in rest.items()}


@dataclass(frozen=True)
class StoredCookie:
    """One shared cookie: what a browser keeps of it, plus ``set_at`` (epoch seconds)."""

    name: str
    value: str
    domain: str  #: leading dot: a domain cookie (subdomains too); otherwise host-only
    path: str = "/"
    expires: int | None = None  #: epoch seconds; None for a session cookie
    secure: bool = False
    http_only: bool = False
    same_site: str | None = None  #: "Strict", "Lax", "None" or unspecified
    set_at: float = 0.0

    @property
    def identity(self) -> str:
        """The hash field: a jar holds at most one cookie per name, domain and path."""
        return f"{self.name};{self.domain};{self.path}"

    def is_expired(self, now: float) -> bool:
        return self.expires is not None and self.expires <= now

    def same_as(self, other: StoredCookie) -> bool:
        """Equal in everything but ``set_at``."""
        return dataclasses.replace(self, set_at=0.0) == dataclasses.replace(other, set_at=0.0)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> StoredCookie:
        data = json.loads(raw)
        expires = data.get("expires")
        return cls(
            name=str(data["name"]),
            value=str(data["value"]),
            domain=str(data["domain"]),
            path=str(data.get("path") or "/"),
            expires=None if expires is None else int(expires),
            secure=bool(data.get("secure")),
            http_only=bool(data.get("http_only")),
            same_site=data.get("same_site"),
            set_at=float(data.get("set_at") or 0.0),
        )

    @classmethod
    def from_jar(cls, cookie: Cookie, set_at: float = 0.0) -> StoredCookie:
        rest = _rest_attrs(cookie)
        return cls(
            name=cookie.name,
            value=cookie.value or "",
            domain=cookie.domain.lower(),
            path=cookie.path or "/",
            expires=cookie.expires,
            secure=bool(cookie.secure),
            http_only="httponly" in rest,
            same_site=_SAME_SITE.get(str(rest.get("samesite") or "").lower()),
            set_at=set_at,
        )

    def to_jar(self) -> Cookie:
        rest: dict[str, str] = {}
        if self.http_only:
            rest["HttpOnly"] = ""  # only its presence counts
        if self.same_site:
            rest["SameSite"] = self.same_site
        dot = self.domain.startswith(".")
        return Cookie(
            version=0,
            name=self.name,
            value=self.value,
            port=None,
            port_specified=False,
            domain=self.domain,
            domain_specified=dot,
            domain_initial_dot=dot,
            path=self.path,
            path_specified=True,
            secure=self.secure,
            expires=self.expires,
            discard=self.expires is None,
            comment=None,
            comment_url=None,
            rest=rest,
        )

    def to_browser(self, host: str) -> dict[str, Any]:
        """Playwright's / Puppeteer's ``cookies()`` shape."""
        domain = self.domain
        if "." not in host and domain.lstrip(".") == f"{host}.local":
            domain = domain.removesuffix(".local")  # http.cookiejar's name for dotless hosts
        return {
            "name": self.name,
            "value": self.value,
            "domain": domain,
            "path": self.path,
            "expires": -1 if self.expires is None else self.expires,
            "httpOnly": self.http_only,
            "secure": self.secure,
            "sameSite": self.same_site or "Lax",  # browsers' default when unspecified
        }


def parse_browser_cookies(host: str, cookies: object, now: float) -> tuple[list[StoredCookie], int]:
    """Validate Playwright/Puppeteer cookies for ``host``; returns (live cookies, expired
    ones skipped). Raises :class:`InvalidTaskInput` naming the first bad entry."""
    if not isinstance(cookies, list):
        raise InvalidTaskInput(f"browser cookies for {host}: expected a list of objects")
    out: list[StoredCookie] = []
    expired = 0
    for index, entry in enumerate(cookies):
        cookie = _browser_cookie(host, entry, f"browser cookies for {host}: cookie #{index}", now)
        if cookie.is_expired(now):
            expired += 1
        else:
            out.append(cookie)
    return out, expired


def _browser_cookie(host: str, entry: object, where: str, now: float) -> StoredCookie:
    """One entry of :func:`parse_browser_cookies`; ``where`` names it in errors."""
    if not isinstance(entry, dict):
        raise InvalidTaskInput(f"{where} is not an object")
    name, value = entry.get("name"), entry.get("value")
    if not isinstance(name, str) or not name or _BAD_NAME.search(name):
        raise InvalidTaskInput(f"{where}: 'name' must be a non-empty cookie name")
    where += f" ({name!r})"
    if not isinstance(value, str) or _BAD_VALUE.search(value):
        raise InvalidTaskInput(f"{where}: 'value' must be a string without ';' or controls")
    if len(name) + len(value) > 4096:
        raise InvalidTaskInput(f"{where}: name and value exceed 4096 characters")
    domain = _browser_domain(host, entry, where)
    path = entry.get("path", "/")
    if not isinstance(path, str) or not path.startswith("/"):
        raise InvalidTaskInput(f"{where}: 'path' must start with '/'")
    expires = _browser_expires(entry.get("expires", -1), where)
    flags = {}
    for key in ("httpOnly", "secure"):
        flag = entry.get(key, False)
        if not isinstance(flag, bool):
            raise InvalidTaskInput(f"{where}: {key!r} must be true or false")
        flags[key] = flag
    same_site = entry.get("sameSite")
    if same_site is not None and (
        not isinstance(same_site, str) or same_site.lower() not in _SAME_SITE
    ):
        raise InvalidTaskInput(f"{where}: 'sameSite' must be Strict, Lax or None")
    return StoredCookie(
        name=name,
        value=value,
        domain=domain,
        path=path,
        expires=expires,
        secure=flags["secure"],
        http_only=flags["httpOnly"],
        same_site=_SAME_SITE[same_site.lower()] if same_site else None,
        set_at=now,
    )


def _browser_domain(host: str, entry: dict[str, Any], where: str) -> str:
    """The cookie's domain as stored: normalized, sent to ``host``."""
    domain = entry.get("domain")
    if domain is None and isinstance(entry.get("url"), str):
        domain = normalize_host(entry["url"])  # Playwright's {name, value, url} form
    if not isinstance(domain, str) or not domain.strip("."):
        raise InvalidTaskInput(f"{where}: 'domain' (or 'url') is required")
    dot = "." if domain.startswith(".") else ""
    domain = dot + normalize_host(domain.lstrip("."))
    if not domain_matches(domain, host):
        raise InvalidTaskInput(f"{where}: domain {domain!r} is not sent to host {host!r}")
    if "." not in host and not dot and domain == host:
        domain = f"{host}.local"  # what http.cookiejar calls a dotless host
    return domain


def _browser_expires(raw: object, where: str) -> int | None:
    """Epoch seconds, or None for a session cookie (-1 or null)."""
    if raw is None or raw == -1:
        return None
    if (
        isinstance(raw, bool)
        or not isinstance(raw, int | float)
        or not math.isfinite(raw)
        or raw < 0
    ):
        raise InvalidTaskInput(f"{where}: 'expires' must be epoch seconds or -1")
    return int(raw)


@dataclass(frozen=True)
class CookieSnapshot:
    """The host's cookies as :meth:`CookieStore.apply` loaded them (by identity)."""

    host: str
    cookies: Mapping[str, StoredCookie]


Op = tuple[str, str, str]


def jar_cookies(jar: CookieJar, host: str, now: float) -> dict[str, StoredCookie]:
    """The live cookies of ``jar`` sent to ``host``, by identity, stamped ``now``."""
    current: dict[str, StoredCookie] = {}
    for jar_cookie in jar:
        cookie = StoredCookie.from_jar(jar_cookie, set_at=now)
        if domain_matches(cookie.domain, host) and not cookie.is_expired(now):
            current[cookie.identity] = cookie
    return current


def diff_jar(jar: CookieJar, host: str, snapshot: CookieSnapshot, now: float) -> list[Op]:
    """The merge operations for what ``jar`` changed since ``snapshot`` (cookies sent to
    ``host`` only): ``("set", identity, json)`` stamped ``now``, ``("del", identity,
    set_at seen)``. Unchanged cookies yield nothing, so they are never written back."""
    current = jar_cookies(jar, host, now)
    ops: list[Op] = []
    for identity, cookie in sorted(current.items()):
        seen = snapshot.cookies.get(identity)
        if seen is None or not cookie.same_as(seen):
            ops.append(("set", identity, cookie.to_json()))
    for identity, seen in sorted(snapshot.cookies.items()):
        if identity not in current:
            ops.append(("del", identity, repr(seen.set_at)))
    return ops


def browser_jar(
    host: str, cookies: Iterable[Mapping[str, Any]], now: float
) -> tuple[dict[str, StoredCookie], list[str]]:
    """A browser's whole ``context.cookies()`` narrowed to what the jar of ``host`` keeps:
    (live cookies sent to ``host``, any path, by identity and stamped ``now``; why each
    cookie the jar cannot hold was left out). Other hosts' cookies and partitioned ones
    (CHIPS: bound to one top-level site, which a jar per host cannot express) are left
    out silently, expired ones too."""
    kept: dict[str, StoredCookie] = {}
    refused: list[str] = []
    for index, entry in enumerate(cookies):
        domain = str(entry.get("domain") or "").lower()
        if not domain or not domain_matches(domain, host) or entry.get("partitionKey"):
            continue
        where = f"browser cookies for {host}: cookie #{index}"
        try:
            cookie = _browser_cookie(host, dict(entry), where, now)
        except InvalidTaskInput as exc:
            refused.append(str(exc))
            continue
        if not cookie.is_expired(now):
            kept[cookie.identity] = cookie
    return kept, refused


def _browser_changed(cookie: StoredCookie, seen: StoredCookie) -> bool:
    # A browser reports a cookie it was given in its own form (sameSite spelled out, the
    # expiry clamped to 400 days, fractions of seconds): value and expiry are what count.
    if cookie.value != seen.value or (cookie.expires is None) != (seen.expires is None):
        return True
    return abs((cookie.expires or 0) - (seen.expires or 0)) > 1


def diff_browser(current: Mapping[str, StoredCookie], snapshot: CookieSnapshot) -> list[Op]:
    """:func:`diff_jar` for a browser's cookies (:func:`browser_jar`): ``set`` what is
    new or changed since ``snapshot``, ``del`` what the browser no longer has."""
    ops: list[Op] = []
    for identity, cookie in sorted(current.items()):
        seen = snapshot.cookies.get(identity)
        if seen is None or _browser_changed(cookie, seen):
            ops.append(("set", identity, cookie.to_json()))
    for identity, seen in sorted(snapshot.cookies.items()):
        if identity not in current:
            ops.append(("del", identity, repr(seen.set_at)))
    return ops
