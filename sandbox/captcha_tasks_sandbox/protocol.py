"""The in.php side of the protocol: which captcha a submit describes, or which error code.

:func:`parse_submission` checks a submit's parameters the way the providers do and
returns a :class:`Submission`, or raises :class:`ApiError` with the provider's code.
:class:`Reply` is one answer in both wire forms (plain text and ``json=1``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Mapping

from . import kinds
from .submission import (
    HOST_RE,
    ApiError,
    Submission,
    Upload,
    check_proxy,
    hints,
    image,
    pageurl_host,
)

__all__ = [
    "FINGERPRINT_IGNORED",
    "NOT_OFFERED_METHODS",
    "WITHDRAWN_METHODS",
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
    "ERROR_METHOD_CALL": "This method is not offered any more.",
}

_SITEKEY_RE = re.compile(r"^[A-Za-z0-9_.\-]{10,100}$")
_GEETEST_RE = re.compile(r"^[A-Za-z0-9]{16,64}$")


#: ``method`` -> parser of the newer types (:mod:`.kinds`).
_NEWER = {
    "funcaptcha": kinds.funcaptcha,
    "geetest_v4": kinds.geetest_v4,
    "amazon_waf": kinds.amazon_waf,
    "mt_captcha": kinds.mt_captcha,
    "prosopo": kinds.prosopo,
    "friendly_captcha": kinds.friendly_captcha,
    "altcha": kinds.altcha,
    "datadome": kinds.datadome,
    "yidun": kinds.yidun,
    "binance": kinds.binance,
    "tencent": kinds.tencent,
    "cloudflare_challenge": kinds.cloudflare_challenge,
}
#: in.php methods a classic dialect never offered, answered as a method in.php does not
#: know (ERROR_BAD_PARAMETERS, :func:`parse_submission`'s answer to an unknown method):
#: CaptchaAI has no Altcha, DataDome, Yidun, Binance nor Tencent (provider/offers.py
#: SOURCES); 2Captcha sells no cf_clearance (CaptchaAI-Examples' cloudflare_challenge is
#: CaptchaAI's method).
NOT_OFFERED_METHODS: Mapping[str, frozenset[str]] = {
    "captchaai": frozenset({"altcha", "datadome", "yidun", "binance", "tencent"}),
    "2captcha": frozenset({"cloudflare_challenge"}),
}


#: in.php methods a classic dialect no longer takes: 2Captcha answers ERROR_METHOD_CALL
#: for hCaptcha (Furry/2captcha#58); CaptchaAI's answer is not withdrawn in any source.
WITHDRAWN_METHODS: Mapping[str, frozenset[str]] = {"2captcha": frozenset({"hcaptcha"})}


def error_text(code: str) -> str:
    return _ERROR_TEXT.get(code, code)


@dataclasses.dataclass(frozen=True)
class Reply:
    """One in.php/res.php answer: ``request`` and ``extra`` for ``json=1``, else ``plain``."""

    status: int
    request: object
    plain: str
    #: Top-level fields of the ``json=1`` document besides status and request (Turnstile
    #: challenge mode's ``useragent``); the plain form has no room for them.
    extra: Mapping[str, object] = dataclasses.field(default_factory=dict)

    @classmethod
    def ok(
        cls, request: object, plain: str | None = None, extra: Mapping[str, object] | None = None
    ) -> Reply:
        """Success; plain text defaults to ``OK|<request>`` (dicts as compact JSON)."""
        if plain is None:
            plain = "OK|" + (_compact_json(request) if isinstance(request, dict) else str(request))
        return cls(1, request, plain, dict(extra or {}))

    @classmethod
    def answer(cls, value: object, extra: Mapping[str, object] | None = None) -> Reply:
        """A solved captcha's answer as 2Captcha sends it; coordinates (a list of points)
        as strings in ``json=1`` and ``coordinates:x=38,y=90;x=120,y=44`` in plain text."""
        if isinstance(value, list):
            points = [{"x": str(p["x"]), "y": str(p["y"])} for p in value]
            text = ";".join(f"x={p['x']},y={p['y']}" for p in points)
            return cls.ok(points, "OK|coordinates:" + text, extra)
        return cls.ok(value, extra=extra)

    @classmethod
    def error(cls, code: str) -> Reply:
        return cls(0, code, code)


def parse_submission(
    params: Mapping[str, str],
    files: Mapping[str, Upload],
    min_image_bytes: int,
    max_image_bytes: int,
) -> Submission:
    """Check an in.php submit (key already checked) and describe it, or raise :class:`ApiError`."""
    method = params.get("method", "").strip().lower()
    fingerprint = _fingerprint(params, files)
    if method in ("base64", "post") and params.get("recaptcha", "").strip() == "1":
        return kinds.grid(method, params, files, min_image_bytes, max_image_bytes, fingerprint)
    if method in ("base64", "post") and params.get("coordinatescaptcha", "").strip() == "1":
        return kinds.coordinates(
            method, params, files, min_image_bytes, max_image_bytes, fingerprint
        )
    if method in ("base64", "post"):
        data = image(method, params, files, min_image_bytes, max_image_bytes)
        check_proxy(params)
        return Submission("image", fingerprint, image=data, hints=hints(params))
    if method == "userrecaptcha":
        return _recaptcha(params, fingerprint)
    if method in ("turnstile", "hcaptcha"):
        return _turnstile_or_hcaptcha(method, params, fingerprint)
    if method == "geetest":
        return _geetest(params, fingerprint)
    if method in _NEWER:
        return _NEWER[method](params, fingerprint)
    raise ApiError("ERROR_BAD_PARAMETERS")


def _recaptcha(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    googlekey = params.get("googlekey", "").strip()
    if not googlekey:
        raise ApiError("ERROR_GOOGLEKEY")
    if not _SITEKEY_RE.match(googlekey):
        raise ApiError("ERROR_WRONG_GOOGLEKEY")
    hostname = pageurl_host(params)
    check_proxy(params)
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
    hostname = pageurl_host(params)
    check_proxy(params)
    if method == "hcaptcha":
        return Submission("hcaptcha", fingerprint, sitekey=sitekey, hostname=hostname)
    pagedata, user_agent = kinds.challenge_fields(params)
    return Submission(
        "turnstile",
        fingerprint,
        sitekey=sitekey,
        hostname=hostname,
        action=params.get("action", ""),
        cdata=params.get("data", ""),
        pagedata=pagedata,
        user_agent=user_agent,
    )


def _geetest(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    gt = params.get("gt", "").strip()
    challenge = params.get("challenge", "").strip()
    if not _GEETEST_RE.match(gt) or not _GEETEST_RE.match(challenge):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    api_server = params.get("api_server", "").strip()
    if api_server and not HOST_RE.match(api_server):
        raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    return Submission("geetest", fingerprint, hostname=hostname, challenge=challenge)


def _fingerprint(params: Mapping[str, str], files: Mapping[str, Upload]) -> bytes:
    digest = hashlib.sha256()
    for name in sorted(set(params) - FINGERPRINT_IGNORED):
        digest.update(f"{len(name)}:{name}={len(params[name])}:".encode())
        digest.update(params[name].encode("utf-8", "surrogatepass"))
    for name in sorted(files):
        digest.update(f"file:{name}=".encode() + hashlib.sha256(files[name].data).digest())
    return digest.digest()


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))
