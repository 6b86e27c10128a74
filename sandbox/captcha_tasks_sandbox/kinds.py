"""in.php's newer captcha types: FunCaptcha, GeeTest v4, Amazon WAF, image to coordinates,
MTCaptcha, Prosopo, Friendly Captcha, Altcha, DataDome, Yidun, Binance, Tencent,
Turnstile's challenge mode and Cloudflare's challenge page, under 2Captcha's (CaptchaAI's
for the last) documented parameter names.

Each parser checks what the provider needs to solve the captcha and refuses the rest
with the provider's code: ERROR_PAGEURL for the page, ERROR_BAD_PARAMETERS otherwise.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Mapping
from urllib.parse import parse_qsl, urlsplit

from captcha_tasks.errors import InvalidTaskInput
from captcha_tasks.provider.altcha import parse_challenge

from .answers import DEFAULT_USER_AGENT
from .submission import (
    HOST_RE,
    ApiError,
    Submission,
    Upload,
    check_proxy,
    image,
    pageurl_host,
)

__all__ = [
    "MAX_BLOB",
    "MAX_INSTRUCTIONS",
    "altcha",
    "amazon_waf",
    "binance",
    "challenge_fields",
    "cloudflare_challenge",
    "coordinates",
    "datadome",
    "friendly_captcha",
    "funcaptcha",
    "geetest_v4",
    "grid",
    "mt_captcha",
    "prosopo",
    "tencent",
    "yidun",
]

_UUID_RE = re.compile(
    r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$"
)
_CAPTCHA_ID_RE = re.compile(r"^[0-9A-Fa-f]{32}$")
_MTCAPTCHA_KEY_RE = re.compile(r"^MTPublic-[A-Za-z0-9]{4,64}$")
_PROSOPO_KEY_RE = re.compile(r"^5[A-Za-z0-9]{46,47}$")
_FRIENDLY_KEY_RE = re.compile(r"^[A-Za-z0-9]{8,64}$")
_YIDUN_KEY_RE = re.compile(r"^[A-Za-z0-9]{16,64}$")
_BINANCE_KEY_RE = re.compile(r"^[A-Za-z0-9_.-]{2,64}$")
_VALIDATE_ID_RE = re.compile(r"^[A-Za-z0-9_-]{8,128}$")
_TENCENT_APP_ID_RE = re.compile(r"^[0-9]{5,20}$")
_DATADOME_HOST = "captcha-delivery.com"
_AWS_FIELDS = (
    ("sitekey", re.compile(r"^[A-Za-z0-9+/=_-]{20,2048}$")),
    ("iv", re.compile(r"^[A-Za-z0-9+/=_-]{8,256}$")),
    ("context", re.compile(r"^[A-Za-z0-9+/=_-]{8,8192}$")),
)
#: Longest FunCaptcha ``data[blob]`` accepted.
MAX_BLOB = 16384
#: 2Captcha's limit on ``textinstructions`` for a coordinates captcha.
MAX_INSTRUCTIONS = 140


def funcaptcha(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=funcaptcha``: ``publickey`` (a UUID), ``pageurl``, optional ``surl``
    (the Arkose API host, with or without ``https://``), ``data[blob]``, ``userAgent``."""
    publickey = params.get("publickey", "").strip()
    if not _UUID_RE.match(publickey):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    surl = params.get("surl", "").strip()
    if surl:
        host = surl.split("://", 1)[1] if surl.startswith(("https://", "http://")) else surl
        if not HOST_RE.match(host.rstrip("/")):
            raise ApiError("ERROR_BAD_PARAMETERS")
    blob = params.get("data[blob]", "")
    if len(blob) > MAX_BLOB or any(c.isspace() for c in blob):
        raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    return Submission(
        "funcaptcha",
        fingerprint,
        sitekey=publickey,  # what /siteverify's sitekey is checked against
        hostname=hostname,
        publickey=publickey,
        user_agent=params.get("userAgent", "").strip(),
    )


def geetest_v4(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=geetest_v4``: ``captcha_id`` (32 hex digits), ``pageurl``, ``api_server``."""
    captcha_id = params.get("captcha_id", "").strip()
    if not _CAPTCHA_ID_RE.match(captcha_id):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    api_server = params.get("api_server", "").strip()
    if api_server and not HOST_RE.match(api_server):
        raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    return Submission("geetest_v4", fingerprint, hostname=hostname, captcha_id=captcha_id)


def _site_key_and_page(
    kind: str, key_re: re.Pattern[str], params: Mapping[str, str], fingerprint: bytes
) -> Submission:
    """A ``kind`` submitted as a site key matching ``key_re`` and a ``pageurl``."""
    sitekey = params.get("sitekey", "").strip()
    if not key_re.match(sitekey):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    check_proxy(params)
    return Submission(kind, fingerprint, sitekey=sitekey, hostname=hostname)


def mt_captcha(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=mt_captcha``: ``sitekey`` (``MTPublic-...``), ``pageurl``, ``action``."""
    submission = _site_key_and_page("mtcaptcha", _MTCAPTCHA_KEY_RE, params, fingerprint)
    return dataclasses.replace(submission, action=params.get("action", ""))


def prosopo(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=prosopo``: ``sitekey`` (an SS58 address, ``5...``), ``pageurl``."""
    return _site_key_and_page("prosopo", _PROSOPO_KEY_RE, params, fingerprint)


def friendly_captcha(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=friendly_captcha``: ``sitekey`` (the widget's ``data-sitekey``), ``pageurl``."""
    return _site_key_and_page("friendly_captcha", _FRIENDLY_KEY_RE, params, fingerprint)


def yidun(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=yidun``: ``sitekey`` (the widget's ``captchaId``), ``pageurl``; optional
    ``yidun_get_lib`` (an http(s) URL), ``yidun_api_server_subdomain`` (a host),
    ``challenge``, ``hcg``, ``hct`` (digits) and ``useragent`` (2captcha-python's yidun())."""
    submission = _site_key_and_page("yidun", _YIDUN_KEY_RE, params, fingerprint)
    script = params.get("yidun_get_lib", "").strip()
    server = params.get("yidun_api_server_subdomain", "").strip()
    hct = params.get("hct", "").strip()
    if (
        (script and not _is_http_url(script))
        or (server and not HOST_RE.match(server))
        or (hct and not (hct.isascii() and hct.isdigit()))
    ):
        raise ApiError("ERROR_BAD_PARAMETERS")
    return dataclasses.replace(submission, user_agent=params.get("useragent", "").strip())


def binance(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=binance``: ``sitekey`` (the page's bizId, such as ``login``), ``pageurl``
    and ``validate_id``, all required; optional ``useragent`` (2captcha-python's
    binance())."""
    submission = _site_key_and_page("binance", _BINANCE_KEY_RE, params, fingerprint)
    if not _VALIDATE_ID_RE.match(params.get("validate_id", "").strip()):
        raise ApiError("ERROR_BAD_PARAMETERS")
    return dataclasses.replace(submission, user_agent=params.get("useragent", "").strip())


def tencent(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=tencent``: ``app_id`` (the page's CaptchaAppId, digits) and ``pageurl``
    (2captcha-python's tencent()); the JSON dialects' captcha script rides along as
    ``captcha_script``, an http(s) URL."""
    app_id = params.get("app_id", "").strip()
    if not _TENCENT_APP_ID_RE.match(app_id):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    script = params.get("captcha_script", "").strip()
    if script and not _is_http_url(script):
        raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    agent = params.get("useragent", "").strip()
    return Submission("tencent", fingerprint, sitekey=app_id, hostname=hostname, user_agent=agent)


def altcha(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=altcha``: ``pageurl`` and ``challenge_json``, the challenge the widget
    fetched (2captcha-python's ``altcha()``). ``challenge_url`` alone is refused
    ERROR_BAD_PARAMETERS: the sandbox fetches nothing from the network."""
    raw = params.get("challenge_json", "").strip()
    if not raw:
        raise ApiError("ERROR_BAD_PARAMETERS")
    try:
        parse_challenge(raw, max_number_bound=sys.maxsize)
    except InvalidTaskInput:
        raise ApiError("ERROR_BAD_PARAMETERS") from None
    hostname = pageurl_host(params)
    check_proxy(params)
    return Submission("altcha", fingerprint, challenge=raw, hostname=hostname)


def datadome(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=datadome``: ``captcha_url`` (DataDome's captcha iframe, ``t=fe``),
    ``pageurl``, ``userAgent`` and ``proxy``, all required (2captcha-python's datadome())."""
    url = params.get("captcha_url", "").strip()
    try:
        parts = urlsplit(url)
    except ValueError:
        raise ApiError("ERROR_BAD_PARAMETERS") from None
    host = (parts.hostname or "").lower()
    query = dict(parse_qsl(parts.query, keep_blank_values=True))
    if (
        parts.scheme != "https"
        or not (host == _DATADOME_HOST or host.endswith("." + _DATADOME_HOST))
        or not parts.path.startswith("/captcha")
        or query.get("t") != "fe"  # t=bv: the IP is banned, there is nothing to solve
    ):
        raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    agent = params.get("userAgent", "").strip()
    if not agent or len(agent) > 512 or not params.get("proxy", "").strip():
        raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    return Submission("datadome", fingerprint, hostname=hostname, user_agent=agent)


#: What a Cloudflare challenge page carries (its script's options and its platform's path).
CLOUDFLARE_MARKERS = ("_cf_chl_opt", "/cdn-cgi/challenge-platform/")


def cloudflare_challenge(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=cloudflare_challenge`` (CaptchaAI's): ``pageurl`` and ``proxy``, required;
    ``userAgent`` optional (a fixed Chrome's when none is given); ``html``, where the
    JSON dialects carry the challenge page, must be one (its markers)."""
    hostname = pageurl_host(params)
    agent = params.get("userAgent", "").strip()
    page = params.get("html", "")
    if len(agent) > 512 or not params.get("proxy", "").strip():
        raise ApiError("ERROR_BAD_PARAMETERS")
    if page and not any(marker in page for marker in CLOUDFLARE_MARKERS):
        raise ApiError("ERROR_BAD_PARAMETERS")  # not a challenge page: nothing to pass
    check_proxy(params)
    return Submission(
        "cloudflare_challenge",
        fingerprint,
        hostname=hostname,
        user_agent=agent or DEFAULT_USER_AGENT,
    )


def amazon_waf(params: Mapping[str, str], fingerprint: bytes) -> Submission:
    """``method=amazon_waf``: ``sitekey``, ``iv``, ``context`` (the page's ``gokuProps``),
    ``pageurl``, optional ``challenge_script`` and ``captcha_script`` (http(s) URLs)."""
    for name, pattern in _AWS_FIELDS:
        if not pattern.match(params.get(name, "").strip()):
            raise ApiError("ERROR_BAD_PARAMETERS")
    hostname = pageurl_host(params)
    for name in ("challenge_script", "captcha_script"):
        url = params.get(name, "").strip()
        if url and not _is_http_url(url):
            raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    sitekey = params["sitekey"].strip()
    return Submission("aws_waf", fingerprint, sitekey=sitekey, hostname=hostname)


def coordinates(
    method: str,
    params: Mapping[str, str],
    files: Mapping[str, Upload],
    min_image_bytes: int,
    max_image_bytes: int,
    fingerprint: bytes,
) -> Submission:
    """``method=base64|post`` with ``coordinatescaptcha=1``: the image (same checks as an
    image captcha) and an optional ``textinstructions`` of at most 140 characters."""
    data = image(method, params, files, min_image_bytes, max_image_bytes)
    instructions = params.get("textinstructions", "")
    if len(instructions) > MAX_INSTRUCTIONS:
        raise ApiError("ERROR_BAD_PARAMETERS")
    check_proxy(params)
    hints = {"textinstructions": instructions} if instructions else {}
    return Submission("coordinates", fingerprint, image=data, hints=hints)


#: The sides a grid may have (rows, columns); past them it is no grid captcha.
_GRID_SIDES = range(1, 11)
#: The grid 2Captcha lays on an image whose submit names none: reCAPTCHA's 3x3.
DEFAULT_GRID = 3


def grid(
    method: str,
    params: Mapping[str, str],
    files: Mapping[str, Upload],
    min_image_bytes: int,
    max_image_bytes: int,
    fingerprint: bytes,
) -> Submission:
    """``method=base64|post`` with ``recaptcha=1``: the image (same checks as an image
    captcha), the instruction (``textinstructions``, required: 2Captcha's grid needs an
    instruction, as text or as an image, which the sandbox does not take) and the optional
    ``recaptcharows`` / ``recaptchacols``."""
    data = image(method, params, files, min_image_bytes, max_image_bytes)
    instructions = params.get("textinstructions", "").strip()
    if not instructions or len(instructions) > MAX_INSTRUCTIONS:
        raise ApiError("ERROR_BAD_PARAMETERS")
    sides = []
    for name in ("recaptcharows", "recaptchacols"):
        raw = params.get(name, "").strip() or str(DEFAULT_GRID)
        if not raw.isdigit() or int(raw) not in _GRID_SIDES:
            raise ApiError("ERROR_BAD_PARAMETERS")
        sides.append(int(raw))
    check_proxy(params)
    hints = {"textinstructions": instructions, "tiles": str(sides[0] * sides[1])}
    return Submission("grid", fingerprint, image=data, hints=hints)


def challenge_fields(params: Mapping[str, str]) -> tuple[str, str]:
    """Turnstile's ``pagedata`` and ``userAgent``. With ``pagedata`` (challenge mode) the
    ``action`` and ``data`` of the challenge page are required too.

    2Captcha's API docs spell the agent ``userAgent``, its official 2captcha-python
    documents ``turnstile(..., useragent=...)`` and sends that name as given: both count."""
    pagedata = params.get("pagedata", "").strip()
    if pagedata and not (params.get("action", "").strip() and params.get("data", "").strip()):
        raise ApiError("ERROR_BAD_PARAMETERS")
    agent = params.get("userAgent", "").strip() or params.get("useragent", "").strip()
    return pagedata, agent


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(host) and not any(c.isspace() for c in url)
