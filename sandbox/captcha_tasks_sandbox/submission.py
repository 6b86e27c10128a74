"""What every in.php parser shares: the error, the parsed submit, and the field checks.

Kept apart from :mod:`.protocol` (which dispatches on ``method``) and :mod:`.kinds`
(the newer captcha types), so both can use them without importing each other.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = [
    "HOST_RE",
    "ApiError",
    "Submission",
    "Upload",
    "check_proxy",
    "hints",
    "image",
    "pageurl_host",
]

HOST_RE = re.compile(r"^[A-Za-z0-9.\-]{1,253}$")
#: ``[user:password@]host:port``
_PROXY_RE = re.compile(r"^(?:[^:@/\s]+:[^@/\s]*@)?(?P<host>[^:@/\s]+):(?P<port>\d{1,5})$")
_PROXY_TYPES = frozenset({"HTTP", "HTTPS", "SOCKS4", "SOCKS5"})
_IMAGE_EXTENSIONS = frozenset({"jpg", "jpeg", "png", "gif"})
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF87a", b"GIF89a")
#: Accepted image hints and their allowed integer ranges (text hints: any value).
_INT_HINTS = {
    "numeric": (0, 4),
    "min_len": (0, 20),
    "max_len": (0, 20),
    "phrase": (0, 1),
    "regsense": (0, 1),
    "calc": (0, 1),
}


class ApiError(Exception):
    """An answer with status 0: an ``ERROR_*`` code, or ``CAPCHA_NOT_READY``."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Upload:
    """A file part of a multipart submit."""

    filename: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class Submission:
    """A valid submit: what to solve and what the answer and its token carry."""

    kind: str
    #: sha256 over the method and every parameter but ``FINGERPRINT_IGNORED``.
    fingerprint: bytes
    sitekey: str = ""
    hostname: str = ""
    action: str = ""
    score: float | None = None
    cdata: str = ""
    image: bytes | None = None
    hints: Mapping[str, str] = dataclasses.field(default_factory=dict)
    challenge: str = ""
    #: FunCaptcha's public key (its token names it: ``pk=``).
    publickey: str = ""
    #: GeeTest v4's captcha id (echoed in its answer).
    captcha_id: str = ""
    #: Turnstile challenge mode's page data; set means challenge mode.
    pagedata: str = ""
    #: The browser's user agent, where the submit gave one.
    user_agent: str = ""


def pageurl_host(params: Mapping[str, str]) -> str:
    """The host of ``pageurl``, or ERROR_PAGEURL when it is not an http(s) URL."""
    pageurl = params.get("pageurl", "").strip()
    try:
        parts = urlsplit(pageurl)
        host = parts.hostname or ""
    except ValueError:
        raise ApiError("ERROR_PAGEURL") from None
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in pageurl):
        raise ApiError("ERROR_PAGEURL")
    return host


def check_proxy(params: Mapping[str, str]) -> None:
    proxy = params.get("proxy", "").strip()
    if not proxy:
        return
    proxytype = params.get("proxytype", "HTTP").strip().upper() or "HTTP"
    match = _PROXY_RE.match(proxy)
    if proxytype not in _PROXY_TYPES or match is None or not 0 < int(match["port"]) < 65536:
        raise ApiError("ERROR_BAD_PROXY")


def hints(params: Mapping[str, str]) -> dict[str, str]:
    """An image submit's hints, range-checked (ERROR_BAD_PARAMETERS)."""
    out: dict[str, str] = {}
    for name, (low, high) in _INT_HINTS.items():
        raw = params.get(name, "").strip()
        if not raw:
            continue
        try:
            value = int(raw)
        except ValueError:
            raise ApiError("ERROR_BAD_PARAMETERS") from None
        if not low <= value <= high:
            raise ApiError("ERROR_BAD_PARAMETERS")
        out[name] = str(value)
    for name in ("lang", "textinstructions"):
        if params.get(name):
            out[name] = params[name]
    return out


def image(
    method: str,
    params: Mapping[str, str],
    files: Mapping[str, Upload],
    min_bytes: int,
    max_bytes: int,
) -> bytes:
    """The image of a ``base64`` or ``post`` submit, or the provider's image error."""
    if method == "base64":
        body = "".join(params.get("body", "").split())
        if not body:
            raise ApiError("ERROR_ZERO_CAPTCHA_FILESIZE")
        # base64 grows data by 4/3: refuse what cannot fit before decoding it.
        if len(body) > (max_bytes + 3) * 4 // 3 + 4:
            raise ApiError("ERROR_TOO_BIG_CAPTCHA_FILESIZE")
        try:
            data = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError("ERROR_UPLOAD") from None
    else:
        upload = files.get("file")
        if upload is None:
            raise ApiError("ERROR_ZERO_CAPTCHA_FILESIZE")
        extension = upload.filename.rpartition(".")[2].lower() if "." in upload.filename else ""
        if extension and extension not in _IMAGE_EXTENSIONS:
            raise ApiError("ERROR_WRONG_FILE_EXTENSION")
        data = upload.data
    if len(data) == 0 or len(data) < min_bytes:
        raise ApiError("ERROR_ZERO_CAPTCHA_FILESIZE")
    if len(data) > max_bytes:
        raise ApiError("ERROR_TOO_BIG_CAPTCHA_FILESIZE")
    if not data.startswith(_IMAGE_MAGIC):
        raise ApiError("ERROR_IMAGE_TYPE_NOT_SUPPORTED")
    return data
