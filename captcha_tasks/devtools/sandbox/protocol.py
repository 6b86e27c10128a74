"""The in.php side of the protocol: which captcha a submit describes, or which error code.

:func:`parse_submission` checks a submit's parameters the way the providers do and
returns a :class:`Submission`, or raises :class:`ApiError` with the provider's code.
:class:`Reply` is one answer in both wire forms (plain text and ``json=1``).
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping
from urllib.parse import urlsplit

__all__ = [
    "FINGERPRINT_IGNORED",
    "ApiError",
    "Reply",
    "Submission",
    "Upload",
    "error_text",
    "parse_submission",
]

#: Parameters that do not make two submits different captchas (``duplicates`` in /stats).
FINGERPRINT_IGNORED = frozenset({"key", "json", "soft_id", "header_acao", "pingback"})

_ERROR_TEXT = {
    "CAPCHA_NOT_READY": "Captcha is not solved yet.",
    "ERROR_WRONG_USER_KEY": "The key is not 32 letters and digits.",
    "ERROR_KEY_DOES_NOT_EXIST": "The key does not exist.",
    "ERROR_ZERO_BALANCE": "No funds (2Captcha) or no free threads (CaptchaAI).",
    "ERROR_NO_SLOT_AVAILABLE": "All threads of the plan are busy.",
    "ERROR_PAGEURL": "pageurl is missing or not an http(s) URL.",
    "ERROR_GOOGLEKEY": "googlekey is missing.",
    "ERROR_WRONG_GOOGLEKEY": "googlekey is malformed.",
    "ERROR_BAD_PARAMETERS": "A required parameter is missing or malformed.",
    "ERROR_ZERO_CAPTCHA_FILESIZE": "The image is empty or too small.",
    "ERROR_TOO_BIG_CAPTCHA_FILESIZE": "The image is too big.",
    "ERROR_WRONG_FILE_EXTENSION": "The file extension is not jpg, jpeg, png or gif.",
    "ERROR_IMAGE_TYPE_NOT_SUPPORTED": "The image is not JPEG, PNG or GIF.",
    "ERROR_UPLOAD": "The image could not be decoded.",
    "ERROR_BAD_PROXY": "The proxy or proxytype is malformed.",
    "ERROR_CAPTCHA_UNSOLVABLE": "Workers could not solve the captcha.",
    "ERROR_WRONG_ID_FORMAT": "Captcha ids are numbers.",
    "ERROR_WRONG_CAPTCHA_ID": "No captcha with this id.",
    "ERROR_EMPTY_ACTION": "The action parameter is missing.",
    "ERROR_DUPLICATE_REPORT": "This captcha was already reported.",
    "ERROR_REPORT_NOT_RECORDED": "Too late, too early or unsolved: the report is refused.",
    "ERROR_INTERNAL_SERVER_ERROR": "The sandbox failed; see its log.",
}

_SITEKEY_RE = re.compile(r"^[A-Za-z0-9_.\-]{10,100}$")
_GEETEST_RE = re.compile(r"^[A-Za-z0-9]{16,64}$")
_HOST_RE = re.compile(r"^[A-Za-z0-9.\-]{1,253}$")
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


def error_text(code: str) -> str:
    return _ERROR_TEXT.get(code, code)


@dataclasses.dataclass(frozen=True)
class Reply:
    """One in.php/res.php answer: ``request`` for ``json=1``, ``plain`` otherwise."""

    status: int
    request: object
    plain: str

    @classmethod
    def ok(cls, request: object, plain: str | None = None) -> Reply:
        """Success; plain text defaults to ``OK|<request>`` (dicts as compact JSON)."""
        if plain is None:
            plain = "OK|" + (_compact_json(request) if isinstance(request, dict) else str(request))
        return cls(1, request, plain)

    @classmethod
    def error(cls, code: str) -> Reply:
        return cls(0, code, code)


@dataclasses.dataclass(frozen=True)
class Upload:
    """A file part of a multipart submit."""

    filename: str
    data: bytes


@dataclasses.dataclass(frozen=True)
class Submission:
    """A valid submit: what to solve and what the answer and its token carry."""

    kind: str
    #: sha256 over the method and every parameter but :data:`FINGERPRINT_IGNORED`.
    fingerprint: bytes
    sitekey: str = ""
    hostname: str = ""
    action: str = ""
    score: float | None = None
    cdata: str = ""
    image: bytes | None = None
    hints: Mapping[str, str] = dataclasses.field(default_factory=dict)
    challenge: str = ""


def parse_submission(
    params: Mapping[str, str],
    files: Mapping[str, Upload],
    min_image_bytes: int,
    max_image_bytes: int,
) -> Submission:
    """Check an in.php submit (key already checked) and describe it, or raise :class:`ApiError`."""
    method = params.get("method", "").strip().lower()
    fingerprint = _fingerprint(params, files)
    if method in ("base64", "post"):
        image = _image(method, params, files, min_image_bytes, max_image_bytes)
        _check_proxy(params)
        return Submission("image", fingerprint, image=image, hints=_hints(params))
    if method == "userrecaptcha":
        return _recaptcha(params, fingerprint)
    if method in ("turnstile", "hcaptcha"):
        return _turnstile_or_hcaptcha(method, params, fingerprint)
    if method == "geetest":
        return _geetest(params, fingerprint)
    raise ApiError("ERROR_BAD_PARAMETERS")


def _recaptcha(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    googlekey = params.get("googlekey", "").strip()
    if not googlekey:
        raise ApiError("ERROR_GOOGLEKEY")
    if not _SITEKEY_RE.match(googlekey):
        raise ApiError("ERROR_WRONG_GOOGLEKEY")
    hostname = _pageurl_host(params)
    _check_proxy(params)
    version = params.get("version", "v2").strip().lower() or "v2"
    if version == "v2":
        return Submission("recaptcha_v2", fingerprint, sitekey=googlekey, hostname=hostname)
    if version != "v3":
        raise ApiError("ERROR_BAD_PARAMETERS")
    try:
        score = float(params.get("min_score", "") or "0.3")
    except ValueError:
        raise ApiError("ERROR_BAD_PARAMETERS") from None
    if not 0.0 <= score <= 1.0:
        raise ApiError("ERROR_BAD_PARAMETERS")
    return Submission(
        "recaptcha_v3",
        fingerprint,
        sitekey=googlekey,
        hostname=hostname,
        action=params.get("action", "") or "verify",
        score=min(0.9, max(0.1, round(score, 1))),
    )


def _turnstile_or_hcaptcha(
    method: str, params: Mapping[str, str], fingerprint: bytes
) -> Submission:
    sitekey = params.get("sitekey", "").strip()
    if not _SITEKEY_RE.match(sitekey):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = _pageurl_host(params)
    _check_proxy(params)
    if method == "hcaptcha":
        return Submission("hcaptcha", fingerprint, sitekey=sitekey, hostname=hostname)
    return Submission(
        "turnstile",
        fingerprint,
        sitekey=sitekey,
        hostname=hostname,
        action=params.get("action", ""),
        cdata=params.get("data", ""),
    )


def _geetest(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    gt = params.get("gt", "").strip()
    challenge = params.get("challenge", "").strip()
    if not _GEETEST_RE.match(gt) or not _GEETEST_RE.match(challenge):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = _pageurl_host(params)
    api_server = params.get("api_server", "").strip()
    if api_server and not _HOST_RE.match(api_server):
        raise ApiError("ERROR_BAD_PARAMETERS")
    _check_proxy(params)
    return Submission("geetest", fingerprint, hostname=hostname, challenge=challenge)


def _fingerprint(params: Mapping[str, str], files: Mapping[str, Upload]) -> bytes:
    digest = hashlib.sha256()
    for name in sorted(set(params) - FINGERPRINT_IGNORED):
        digest.update(f"{len(name)}:{name}={len(params[name])}:".encode())
        digest.update(params[name].encode("utf-8", "surrogatepass"))
    for name in sorted(files):
        digest.update(f"file:{name}=".encode() + hashlib.sha256(files[name].data).digest())
    return digest.digest()


def _pageurl_host(params: Mapping[str, str]) -> str:
    pageurl = params.get("pageurl", "").strip()
    try:
        parts = urlsplit(pageurl)
        host = parts.hostname or ""
    except ValueError:
        raise ApiError("ERROR_PAGEURL") from None
    if parts.scheme not in ("http", "https") or not host or any(c.isspace() for c in pageurl):
        raise ApiError("ERROR_PAGEURL")
    return host


def _check_proxy(params: Mapping[str, str]) -> None:
    proxy = params.get("proxy", "").strip()
    if not proxy:
        return
    proxytype = params.get("proxytype", "HTTP").strip().upper() or "HTTP"
    match = _PROXY_RE.match(proxy)
    if proxytype not in _PROXY_TYPES or match is None or not 0 < int(match["port"]) < 65536:
        raise ApiError("ERROR_BAD_PROXY")


def _hints(params: Mapping[str, str]) -> dict[str, str]:
    hints: dict[str, str] = {}
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
        hints[name] = str(value)
    for name in ("lang", "textinstructions"):
        if params.get(name):
            hints[name] = params[name]
    return hints


def _image(
    method: str,
    params: Mapping[str, str],
    files: Mapping[str, Upload],
    min_bytes: int,
    max_bytes: int,
) -> bytes:
    if method == "base64":
        body = "".join(params.get("body", "").split())
        if not body:
            raise ApiError("ERROR_ZERO_CAPTCHA_FILESIZE")
        # base64 grows data by 4/3: refuse what cannot fit before decoding it.
        if len(body) > (max_bytes + 3) * 4 // 3 + 4:
            raise ApiError("ERROR_TOO_BIG_CAPTCHA_FILESIZE")
        try:
            image = base64.b64decode(body, validate=True)
        except (binascii.Error, ValueError):
            raise ApiError("ERROR_UPLOAD") from None
    else:
        upload = files.get("file")
        if upload is None:
            raise ApiError("ERROR_ZERO_CAPTCHA_FILESIZE")
        extension = upload.filename.rpartition(".")[2].lower() if "." in upload.filename else ""
        if extension and extension not in _IMAGE_EXTENSIONS:
            raise ApiError("ERROR_WRONG_FILE_EXTENSION")
        image = upload.data
    if len(image) == 0 or len(image) < min_bytes:
        raise ApiError("ERROR_ZERO_CAPTCHA_FILESIZE")
    if len(image) > max_bytes:
        raise ApiError("ERROR_TOO_BIG_CAPTCHA_FILESIZE")
    if not image.startswith(_IMAGE_MAGIC):
        raise ApiError("ERROR_IMAGE_TYPE_NOT_SUPPORTED")
    return image


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))
