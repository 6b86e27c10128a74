"""The proxy the provider's workers load the page through, sent along with a captcha.

Built from its fields or parsed from the strings proxy sellers hand out. The password
shows in no message, ``str()`` or ``repr()``; only a provider's encoding sends it
(in.php's is :func:`captcha_tasks.provider.classic_params.proxy_params`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Literal

from ._checks import _CONTROL, _HOSTNAME, _brief, _fail, _hostname, _int, _set, _text

__all__ = ["Proxy", "ProxyType"]

ProxyType = Literal["HTTP", "HTTPS", "SOCKS4", "SOCKS5"]

_PROXY_TYPES: dict[str, ProxyType] = {
    "HTTP": "HTTP",
    "HTTPS": "HTTPS",
    "SOCKS4": "SOCKS4",
    "SOCKS5": "SOCKS5",
    "SOCKS5H": "SOCKS5",
}


@dataclasses.dataclass(frozen=True, slots=True, repr=False)
class Proxy:
    """A proxy the provider's workers use to load the page; the password never shows."""

    host: str
    port: int
    type: ProxyType = "HTTP"
    username: str | None = None
    password: str | None = None

    def __post_init__(self) -> None:
        _hostname("Proxy.host", self.host)
        _int("Proxy.port", self.port, 1, 65535)
        kind = self.type.upper() if isinstance(self.type, str) else self.type
        if not isinstance(kind, str) or kind not in _PROXY_TYPES:
            _fail(
                "Proxy.type", f"must be one of HTTP, HTTPS, SOCKS4, SOCKS5, got {_brief(self.type)}"
            )
        _set(self, "type", _PROXY_TYPES[kind])
        if (self.username is None) != (self.password is None):
            _fail("Proxy", "username and password go together")
        if self.username is not None:
            user = _text("Proxy.username", self.username, max_len=128)
            if ":" in user or "@" in user:
                _fail("Proxy.username", "must not contain ':' or '@'")
            # Only presence and shape are checked: the value must not end up in a message.
            if not isinstance(self.password, str) or not self.password:
                _fail("Proxy.password", "must be a non-empty string")
            if len(self.password) > 256 or "@" in self.password:
                _fail("Proxy.password", "must be at most 256 characters without '@'")
            if _CONTROL.search(self.password) or any(c.isspace() for c in self.password):
                _fail("Proxy.password", "must not contain whitespace or control characters")

    @classmethod
    def parse(cls, value: str, type: str | None = None) -> Proxy:
        """``[scheme://][user:pass@]host:port`` or ``host:port:user:pass``.

        ``type`` wins over the scheme (default HTTP). Messages never echo the input,
        which may hold the password.
        """
        if not isinstance(value, str) or not value.strip():
            _fail("Proxy", "must be a non-empty 'user:pass@host:port' string")
        scheme, sep, rest = value.strip().partition("://")
        if not sep:
            scheme, rest = "", value.strip()
        credentials, at, address = rest.rpartition("@")
        user: str | None = None
        password: str | None = None
        fields = address.split(":")
        if at:
            user, colon, password = credentials.partition(":")
            if not colon:
                _fail("Proxy", "credentials must be 'user:password'")
        elif len(fields) == 4 and fields[1].isdigit():  # the sellers' host:port:user:pass
            address, user, password = f"{fields[0]}:{fields[1]}", fields[2], fields[3]
        host, colon, port = address.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        # isascii(): "²" and other Unicode digits pass isdigit() but not int().
        if not colon or not (port.isascii() and port.isdigit()) or len(port) > 5:
            _fail("Proxy", "expected [user:pass@]host:port with a numeric port")
        if not _HOSTNAME.match(host):
            try:
                ipaddress.ip_address(host)
            except ValueError:
                _fail("Proxy.host", "is not a hostname or IP address")
        kind = type if type is not None else (scheme.upper() or "HTTP")
        return cls(host, int(port), kind, user, password)  # type: ignore[arg-type]

    @property
    def address(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        auth = f"{self.username}:***@" if self.username is not None else ""
        return f"{self.type.lower()}://{auth}{self.address}"

    def __repr__(self) -> str:
        masked = None if self.password is None else "***"
        return (
            f"Proxy(host={self.host!r}, port={self.port!r}, type={self.type!r}, "
            f"username={self.username!r}, password={masked!r})"
        )
