"""What the sandbox's "workers" answer.

Image answers are deterministic so tests can predict them (:func:`image_answer`);
tokens are random (from the sandbox's seeded generator) and never contain ``ERROR``,
because some clients (the official 2captcha-python one) detect errors by that substring.
"""

from __future__ import annotations

import base64
import hashlib
import random
from collections.abc import Mapping

__all__ = ["geetest_answer", "image_answer", "token"]

#: Shape of each kind's token: a realistic prefix and how many random bytes follow.
_TOKEN_SHAPES = {
    "recaptcha_v2": ("03AFcWeA", 240),
    "recaptcha_v3": ("03AFcWeA", 240),
    "turnstile": ("0.", 300),
    "hcaptcha": ("P1_eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9.", 240),
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
    while True:
        text = prefix + base64.urlsafe_b64encode(rng.randbytes(size)).decode().rstrip("=")
        if "ERROR" not in text.upper():
            return text


def geetest_answer(challenge: str, rng: random.Random) -> dict[str, str]:
    """GeeTest v3's three fields: the challenge with two characters appended, as GeeTest
    does once solved, a validate hash, and the seccode derived from it."""
    validate = rng.randbytes(16).hex()
    return {
        "geetest_challenge": challenge + rng.randbytes(1).hex(),
        "geetest_validate": validate,
        "geetest_seccode": f"{validate}|jordan",
    }


def _int_hint(raw: str | None) -> int:
    try:
        return int(raw) if raw else 0
    except ValueError:
        return 0
