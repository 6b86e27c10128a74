"""The field checks shared by the captcha kinds and :class:`~.proxy.Proxy` (a kind's own
patterns are in its module of :mod:`.kinds`).

Each check raises :class:`~captcha_tasks.errors.InvalidTaskInput` whose message
starts with the field it names (``"RecaptchaV2.sitekey: ..."``).
"""

from __future__ import annotations

import ipaddress
import re
from typing import NoReturn
from urllib.parse import urlsplit

from ..errors import InvalidTaskInput

_HOSTNAME = re.compile(
    r"^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_BASE64 = re.compile(r"^[A-Za-z0-9+/]*={0,2}$")
_DATA_URL = re.compile(r"^data:image/[a-z+.-]+;base64,", re.I)
_MAGIC = (
    (b"\xff\xd8\xff", "jpg", "image/jpeg"),
    (b"\x89PNG\r\n\x1a\n", "png", "image/png"),
    (b"GIF87a", "gif", "image/gif"),
    (b"GIF89a", "gif", "image/gif"),
)


def _fail(where: str, problem: str) -> NoReturn:
    raise InvalidTaskInput(f"{where}: {problem}")


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:37] + "...")


def _brief(value: object) -> str:
    """A short repr of any value for a message."""
    try:
        text = repr(value)
    except ValueError:  # an integer of more digits than str() converts
        return f"a huge {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."


def _text(where: str, value: object, *, max_len: int = 100, spaces: bool = False) -> str:
    if not isinstance(value, str):
        _fail(where, f"must be a string, got {type(value).__name__}")
    if not value or value.isspace():
        _fail(where, "must not be empty")
    if _CONTROL.search(value):
        _fail(where, "must not contain control characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: JSON carries them, HTTP cannot
        _fail(where, "must be valid Unicode text (no lone surrogates)")
    if not spaces and any(c.isspace() for c in value):
        _fail(where, f"must not contain whitespace: {_shown(value)}")
    if len(value) > max_len:
        _fail(where, f"must be at most {max_len} characters, got {len(value)}")
    return value


def _optional_text(where: str, value: object, *, max_len: int = 100, spaces: bool = False) -> None:
    if value is not None:
        _text(where, value, max_len=max_len, spaces=spaces)


def _matching(
    where: str, value: object, pattern: re.Pattern[str], looks_like: str, *, max_len: int = 100
) -> str:
    text = _text(where, value, max_len=max_len)
    if not pattern.match(text):
        _fail(where, f"{_shown(text)} does not look like {looks_like}")
    return text


def _page_url(where: str, value: object) -> str:
    url = _text(where, value, max_len=2048)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  # raises ValueError for a malformed port
    except ValueError:
        _fail(where, f"{_shown(url)} is not a valid URL")
    if parts.scheme.lower() not in ("http", "https"):
        _fail(where, f"must be an http:// or https:// URL, got {_shown(url)}")
    if not parts.hostname:
        _fail(where, f"{_shown(url)} has no host")
    return url


def _flag(where: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    _fail(where, f"must be true or false, got {_brief(value)}")


def _int(where: str, value: object, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        _fail(where, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        _fail(where, f"must be between {low} and {high}, got {_brief(value)}")
    return value


def _hostname(where: str, value: object) -> str:
    host = _text(where, value, max_len=253)
    if "://" in host or "/" in host:
        _fail(where, f"must be a hostname, not a URL: {_shown(host)}")
    if not _HOSTNAME.match(host):
        try:
            ipaddress.ip_address(host)
        except ValueError:
            _fail(where, f"{_shown(host)} is not a hostname or IP address")
    return host


def _host_of(where: str, value: object) -> str:
    """A hostname given bare (``host``) or as an origin (``https://host``, a trailing
    ``/`` allowed): the host, checked."""
    text = _text(where, value, max_len=300)
    lowered = text.lower()
    for scheme in ("https://", "http://"):
        if lowered.startswith(scheme):
            text = text[len(scheme) :].removesuffix("/")
            break
    return _hostname(where, text)


def _optional_url(where: str, value: object) -> None:
    if value is not None:
        _page_url(where, value)


def _set(obj: object, name: str, value: object) -> None:
    object.__setattr__(obj, name, value)  # normalising a frozen dataclass in __post_init__
