"""What the sandbox's "workers" answer.

Image answers are deterministic so tests can predict them (:func:`image_answer`);
tokens are random (from the sandbox's seeded generator) and never contain ``ERROR``,
because some clients (the official 2captcha-python one) detect errors by that substring.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import random
import sys
import time
import uuid
from collections.abc import Callable, Mapping

from captcha_tasks.errors import CaptchaUnsolvable
from captcha_tasks.provider.altcha import parse_challenge, solve

__all__ = [
    "DEFAULT_USER_AGENT",
    "altcha_answer",
    "aws_waf_answer",
    "cf_clearance",
    "coordinates_answer",
    "datadome_cookie",
    "funcaptcha_token",
    "geetest_answer",
    "geetest_v4_answer",
    "grid_answer",
    "image_answer",
    "tencent_answer",
    "token",
]

#: The user agent a solution carries when the submit gave none.
DEFAULT_USER_AGENT = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 "
    "(KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36"
)
_ARKOSE = "https%3A%2F%2Fclient-api.arkoselabs.com"
#: What follows ``pk=<publickey>`` in a FunCaptcha token (as Arkose issues them).
_FUNCAPTCHA_TAIL = f"|at=40|ag=101|cdn_url={_ARKOSE}%2Fcdn%2Ffc|surl={_ARKOSE}"

#: Shape of each kind's token: a realistic prefix and how many random bytes follow.
_TOKEN_SHAPES = {
    "recaptcha_v2": ("03AFcWeA", 240),
    "recaptcha_v3": ("03AFcWeA", 240),
    "turnstile": ("0.", 300),
    "hcaptcha": ("P1_eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.", 240),
    "mtcaptcha": ("v1(", 120),  # MTCaptcha's verifiedToken
    "prosopo": ("0x0001", 200),  # Procaptcha's token (Anti-Captcha's example)
    # Friendly Captcha's token: a 32-hex signature, a dot, the puzzle and its solution
    # (CapSolver's example).
    "friendly_captcha": ("72b43902cd1457f6880dd3735c50070d.", 200),
    "yidun": ("CN31_", 200),  # NECaptcha's validate token (CapMonster's example)
    "binance": ("captcha#", 200),  # Binance's captcha token (CapMonster's example)
}

_DEFAULT_IMAGE_ANSWER_LENGTH = 6
_MAX_IMAGE_ANSWER_LENGTH = 20
_HEX_TO_LETTERS = str.maketrans("0123456789abcdef", "ghijklmnopqrstuv")


def image_answer(image: bytes, hints: Mapping[str, str] | None = None) -> str:
    """The text the sandbox reads in ``image``.

    ``sha256(image).hexdigest()`` upper-cased, first 6 characters, e.g. ``"3F9A0C"``.
    Hints shape it: ``numeric=1`` or ``calc=1`` use the digest's decimal digits
    instead, ``numeric=2`` maps hex digits to letters (0-9a-f -> G-V); ``min_len``
    and ``max_len`` (1..20) stretch or cut the length. Other hints are accepted
    and ignored.
    """
    hints = hints or {}
    digest = hashlib.sha256(image).hexdigest()
    numeric = hints.get("numeric", "0")
    if numeric == "1" or hints.get("calc") == "1":
        text = str(int(digest, 16))
    elif numeric == "2":
        text = digest.translate(_HEX_TO_LETTERS)
    else:
        text = digest
    length = _DEFAULT_IMAGE_ANSWER_LENGTH
    min_len = _int_hint(hints.get("min_len"))
    max_len = _int_hint(hints.get("max_len"))
    if min_len:
        length = max(length, min_len)
    if max_len:
        length = min(length, max_len)
    return text[: max(1, min(length, _MAX_IMAGE_ANSWER_LENGTH))].upper()


def token(kind: str, rng: random.Random) -> str:
    """A fresh random token for a token-type captcha (``recaptcha_v2``, ``turnstile``, ...)."""
    prefix, size = _TOKEN_SHAPES[kind]
    return _clean(lambda: prefix + _b64(rng, size))


@functools.lru_cache(maxsize=64)
def altcha_answer(challenge_json: str) -> str | None:
    """The payload the widget would post for ``challenge_json``: the challenge solved as
    the worker solves it, so a site's verifier accepts it; ``None`` when no number in
    range solves it (the sandbox answers it ERROR_CAPTCHA_UNSOLVABLE, as a provider
    would). Kept for the few challenges last asked: the submit asks twice."""
    challenge = parse_challenge(challenge_json, max_number_bound=sys.maxsize)
    try:
        return solve(challenge).payload(challenge)
    except CaptchaUnsolvable:
        return None


def geetest_answer(challenge: str, rng: random.Random) -> dict[str, str]:
    """GeeTest v3's three fields: the challenge with two characters appended, as GeeTest
    does once solved, a validate hash, and the seccode derived from it."""
    validate = rng.randbytes(16).hex()
    return {
        "geetest_challenge": challenge + rng.randbytes(1).hex(),
        "geetest_validate": validate,
        "geetest_seccode": f"{validate}|jordan",
    }


#: How long DataDome's cookie lives (docs.datadome.co's cookie page: one year).
DATADOME_MAX_AGE = 31_536_000


def datadome_cookie(hostname: str, rng: random.Random) -> tuple[str, str]:
    """A DataDome cookie for ``hostname``: its value and the ``Set-Cookie`` line the
    providers hand over (``datadome=<value>; Max-Age=...; Domain=.<site>; Path=/;
    Secure; SameSite=Lax``); an IP address is its own domain, without the dot."""
    value = _clean(lambda: _b64(rng, 96).replace("-", "~"))
    ip = hostname.replace(".", "").isdigit() or ":" in hostname
    domain = hostname if ip else "." + hostname
    line = (
        f"datadome={value}; Max-Age={DATADOME_MAX_AGE}; Domain={domain}; Path=/; Secure; "
        "SameSite=Lax"
    )
    return value, line


def cf_clearance(rng: random.Random) -> str:
    """A ``cf_clearance`` value shaped like Cloudflare's: ``<43 chars>-<epoch>-1.2.1.1-<more>``."""
    return _clean(lambda: f"{_b64(rng, 32)}-{int(time.time())}-1.2.1.1-{_b64(rng, 120)}")


def coordinates_answer(image: bytes) -> list[dict[str, int]]:
    """The points the sandbox clicks on ``image``: with ``digest = sha256(image).digest()``,
    ``1 + digest[0] % 3`` points, point ``i`` at ``x = 1 + digest[2i+1] % 300``,
    ``y = 1 + digest[2i+2] % 200``."""
    digest = hashlib.sha256(image).digest()
    return [
        {"x": 1 + digest[2 * i + 1] % 300, "y": 1 + digest[2 * i + 2] % 200}
        for i in range(1 + digest[0] % 3)
    ]


def grid_answer(image: bytes, tiles: int) -> str:
    """The tiles the sandbox clicks on a grid ``image`` of ``tiles`` tiles, as 2Captcha
    answers them (``click:1/4/7``, numbered from 1): with ``digest = sha256(image).digest()``
    and ``m = min(tiles, 9)``, tile ``1 + digest[i + 1] % m`` for ``i`` below
    ``1 + digest[0] % 3``, each once, in order. Only the first nine tiles are drawn from,
    so one image has one answer as a 3x3 or a 4x4 grid, and at CapSolver, whose task
    names no grid."""
    digest = hashlib.sha256(image).digest()
    m = max(1, min(tiles, 9))
    chosen = sorted({1 + digest[i + 1] % m for i in range(1 + digest[0] % 3)})
    return "click:" + "/".join(str(tile) for tile in chosen)


def funcaptcha_token(publickey: str, rng: random.Random) -> str:
    """An Arkose token: ``<17 hex>.<10 digits>|r=eu-west-1|meta=3|pk=<publickey>|...``."""
    return _clean(
        lambda: (
            f"{rng.randbytes(9).hex()[:17]}.{rng.randrange(10**10):010d}"
            f"|r=eu-west-1|meta=3|pk={publickey}{_FUNCAPTCHA_TAIL}"
        )
    )


def geetest_v4_answer(captcha_id: str, rng: random.Random) -> dict[str, str]:
    """GeeTest v4's five fields, all strings; ``gen_time`` is the current epoch second."""
    return {
        "captcha_id": captcha_id,
        "lot_number": rng.randbytes(16).hex(),
        "pass_token": rng.randbytes(32).hex(),
        "gen_time": str(int(time.time())),
        "captcha_output": _clean(lambda: _b64(rng, 120)),
    }


def tencent_answer(app_id: str, rng: random.Random) -> dict[str, str | int]:
    """Tencent's answer as 2Captcha's TencentTask gives it (python-rucaptcha's example):
    the ``appid``, ``ret`` 0 (passed), the ``ticket`` (``tr03...*``, what the site
    verifies) and the ``randstr`` (``@`` and three characters)."""
    ticket = _clean(lambda: "tr03" + _b64(rng, 150) + "*")
    randstr = "@" + _b64(rng, 3)[:3]
    return {"appid": app_id, "ret": 0, "ticket": ticket, "randstr": randstr}


def aws_waf_answer(rng: random.Random) -> dict[str, str]:
    """2Captcha's AWS WAF pair: a ``captcha_voucher`` (a JWT) and the ``existing_token``
    (the ``aws-waf-token`` cookie's value, ``<uuid>:<b64>:<b64>``, what the cookie
    dialects hand out alone)."""
    voucher = _clean(lambda: "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9." + _b64(rng, 180))
    cookie = _clean(
        lambda: (
            f"{uuid.UUID(int=rng.getrandbits(128), version=4)}:"
            f"{base64.b64encode(rng.randbytes(12)).decode()}:"
            f"{base64.b64encode(rng.randbytes(96)).decode()}"
        )
    )
    return {"captcha_voucher": voucher, "existing_token": cookie}


def _b64(rng: random.Random, size: int) -> str:
    return base64.urlsafe_b64encode(rng.randbytes(size)).decode().rstrip("=")


def _clean(make: Callable[[], str]) -> str:
    """``make()`` until its text has no ``ERROR`` in it (any case)."""
    while True:
        text = make()
        if "ERROR" not in text.upper():
            return text


def _int_hint(raw: str | None) -> int:
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0
