"""Redis URLs: one server, or the sentinels that know which server is the master.

``redis://``, ``rediss://`` and ``unix://`` name one server. A Redis Sentinel
deployment is named by its sentinels, Celery's and kombu's way:
``sentinel://h1:26379;sentinel://h2:26379;sentinel://h3:26379/0``. A client asks them
where the master of the service ``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER`` is, and asks
again after a failover. The database and the data nodes' credentials are the first
URL's: kombu and Celery read only that one, so a later URL may not carry a password
of its own (it would be ignored by them, and shown by their URL masking).

Pure: no Redis, no Celery. :func:`redis_url` is the settings' parser of every Redis URL.
"""

from __future__ import annotations

import dataclasses
import re
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import ConfigurationError
from ..redaction import mask_url

__all__ = [
    "SENTINEL_PORT",
    "URL_FIELDS",
    "SentinelURL",
    "check_sentinel_master",
    "is_sentinel",
    "parse_sentinel_url",
    "redis_url",
    "sentinel_master",
    "split_urls",
    "ssl_options",
]

#: A sentinel's port when its URL names none (Redis Sentinel's own default).
SENTINEL_PORT = 26379
#: ``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER``: Sentinel allows letters, digits and ``.-_``.
_MASTER_RE = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_SCHEMES = ("redis", "rediss", "unix", "sentinel")
#: The settings' Redis URL fields, in the order a missing sentinel master is reported.
URL_FIELDS = ("redis_url", "broker_url", "result_backend", "state_url")


@dataclasses.dataclass(frozen=True)
class SentinelURL:
    """What a ``sentinel://`` URL says: the sentinels, and how to talk to the master."""

    sentinels: tuple[tuple[str, int], ...]
    db: int = 0
    username: str | None = None
    password: str | None = dataclasses.field(default=None, repr=False)

    def master_options(self) -> dict[str, object]:
        """Connection options of the master (and replicas): database and credentials."""
        options: dict[str, object] = {"db": self.db}
        if self.username:
            options["username"] = self.username
        if self.password:
            options["password"] = self.password
        return options


def split_urls(url: str) -> list[str]:
    """The URLs of a ``;``-separated list (kombu's alternates): ``[url]`` for one."""
    return [part.strip() for part in url.split(";") if part.strip()]


def is_sentinel(url: str) -> bool:
    """Whether ``url`` names sentinels (``sentinel://...``) rather than one server."""
    return url.strip().lower().startswith("sentinel://")


def parse_sentinel_url(url: str) -> SentinelURL:
    """The sentinels of ``url``; ValueError (its message quotes no password) if it is
    not a list of ``sentinel://[user:password@]host[:port][/db]``."""
    sentinels: list[tuple[str, int]] = []
    first = None
    for n, part in enumerate(split_urls(url)):
        parts = urlsplit(part)
        if parts.scheme.lower() != "sentinel":
            raise ValueError(f"{mask_url(part)!r} is not a sentinel:// URL (all or none)")
        if not parts.hostname:
            raise ValueError(f"{mask_url(part)!r} names no host")
        if n and parts.password is not None:
            raise ValueError(
                "only the first sentinel:// URL may carry the Redis password "
                "(kombu and Celery read it from the first one alone)"
            )
        sentinels.append((parts.hostname, parts.port or SENTINEL_PORT))
        first = first or parts
        if parts.path.strip("/") not in ("", first.path.strip("/") or "0"):
            raise ValueError(
                "a sentinel:// URL names another database than the first: "
                "name it in the first (kombu and Celery read it from there)"
            )
    if first is None:
        raise ValueError("no sentinel:// URL")
    db_text = first.path.strip("/") or "0"
    if not db_text.isdigit():
        raise ValueError(f"the database must be a number, got {db_text!r}")
    return SentinelURL(
        sentinels=tuple(sentinels),
        db=int(db_text),
        username=unquote(first.username) if first.username else None,
        password=unquote(first.password) if first.password else None,
    )


def redis_url(name: str, url: str) -> str:
    """The settings' parser of a Redis URL: one server, or a list of sentinels."""
    try:
        for part in split_urls(url) or [url]:
            urlsplit(part).port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:  # an unclosed [IPv6 bracket, a bad port: not echoed (password)
        raise ConfigurationError(f"{name} is not a valid URL ({exc})") from None
    scheme = urlsplit(url).scheme.lower()
    if scheme not in _SCHEMES:
        raise ConfigurationError(
            f"{name} must be a redis://, rediss://, unix:// or sentinel:// URL, "
            f"got {mask_url(url)!r}"
        )
    if scheme == "sentinel":
        try:
            parse_sentinel_url(url)
        except ValueError as exc:
            raise ConfigurationError(f"{name}: {exc}") from None
    elif ";" in url:
        raise ConfigurationError(f"{name}: only sentinel:// URLs can be a ;-separated list")
    return url


def sentinel_master(name: str, raw: str) -> str:
    """The settings' parser of ``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER``."""
    if not _MASTER_RE.match(raw):
        raise ConfigurationError(
            f"{name} must be a Sentinel service name (1-64 letters, digits and ._-)"
        )
    return raw


def check_sentinel_master(
    earlier: Mapping[str, Any], sources: Mapping[str, tuple[str, Any]]
) -> str:
    """The default of an unset ``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER``: "" unless one of
    the Redis URLs read before it (``earlier``: field to value; ``sources``: field to its
    variable and parser) is a ``sentinel://`` URL, which needs the name of the service
    its sentinels monitor: then ConfigurationError naming that URL's variable."""
    for field in URL_FIELDS:
        if is_sentinel(earlier[field]):
            raise ConfigurationError(
                f"{sources[field][0]} is a sentinel:// URL: set "
                f"{sources['redis_sentinel_master'][0]} to the name of the master its "
                "sentinels monitor (`sentinel monitor <name> ...` in sentinel.conf)"
            )
    return ""


def ssl_options(url: str, ca_certs: str | None) -> dict[str, object] | None:
    """SSL options for a ``rediss://`` URL (``None`` for others): the server certificate
    verified, against ``ca_certs`` when set."""
    if urlsplit(url).scheme != "rediss":
        return None
    options: dict[str, object] = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    if ca_certs:
        options["ssl_ca_certs"] = ca_certs
    return options
