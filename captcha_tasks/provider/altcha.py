"""Altcha's proof of work, solved here: no provider, no thread of the plan, no spend.

An Altcha widget fetches a challenge from its site (``{"algorithm", "challenge",
"maxnumber", "salt", "signature"}``), finds the number ``n`` in ``0..maxnumber`` whose
hash ``HASH(salt + str(n))`` (hex) is ``challenge``, and posts the payload: base64 of
the JSON ``{algorithm, challenge, number, salt, signature, took}`` (``took``: the
milliseconds it spent). The site checks it as the reference library's
``verifySolution`` does: ``challenge`` recomputed from ``salt`` and ``number``, and
``signature`` equal to ``HMAC(hmac_key, challenge)`` under the site's own key.

This module follows the reference implementation (altcha-org/altcha-lib and its ports:
altcha-lib-py ``solve_challenge``; the widget's ``solveChallenge``):

- ``algorithm``: ``SHA-1``, ``SHA-256`` (the default when absent) or ``SHA-512``, the
  three the reference libraries create and verify.
- ``salt`` is hashed exactly as given, parameters and all (``"<hex>?expires=...&"``:
  the site signs them into the challenge). Its ``expires`` (epoch seconds) is when the
  site stops accepting the payload.
- ``maxnumber`` (or ``maxNumber``, as some servers spell it) bounds the search; a
  challenge without one is searched up to 1,000,000, the widget's default.

The search is one core's work for up to ``maxnumber`` hashes (about 2 million a second
per core with hashlib; ``captcha-tasks bench altcha`` measures it): a challenge whose
``maxnumber`` exceeds the caller's bound (``CAPTCHA_TASKS_ALTCHA_MAX_NUMBER``) is
refused before any hashing.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from ..errors import CaptchaUnsolvable, InvalidTaskInput
from ._checks import _page_url

__all__ = [
    "ALGORITHMS",
    "DEFAULT_MAX_NUMBER",
    "AltchaChallenge",
    "AltchaSolution",
    "check_page_url",
    "parse_challenge",
    "solve",
]

#: The hash of each algorithm name a challenge may carry (the reference's three).
ALGORITHMS: dict[str, Callable[..., Any]] = {
    "SHA-1": hashlib.sha1,
    "SHA-256": hashlib.sha256,
    "SHA-512": hashlib.sha512,
}
#: The search bound of a challenge that names none (the widget's own default).
DEFAULT_MAX_NUMBER = 1_000_000
#: Largest challenge JSON accepted (a widget's is about 250 bytes).
MAX_CHALLENGE_BYTES = 4096
_HEX = re.compile(r"[0-9a-f]+")
#: Hex digits of each algorithm's digest.
_DIGEST_HEX = {"SHA-1": 40, "SHA-256": 64, "SHA-512": 128}


def _bad(problem: str) -> InvalidTaskInput:
    return InvalidTaskInput(f"solve_altcha: {problem}", "BAD_ALTCHA_CHALLENGE")


@dataclass(frozen=True)
class AltchaChallenge:
    """A challenge as the widget's challenge endpoint gives it, checked."""

    algorithm: str
    challenge: str
    salt: str
    signature: str
    max_number: int

    @property
    def expires(self) -> float | None:
        """Epoch seconds the site accepts the payload until (the salt's ``expires``),
        or ``None`` when the salt sets none."""
        _, _, query = self.salt.partition("?")
        value = parse_qs(query).get("expires", [""])[0]
        return float(value) if value.isdigit() else None


@dataclass(frozen=True)
class AltchaSolution:
    """The number found and the milliseconds the search took."""

    number: int
    took: int

    def payload(self, challenge: AltchaChallenge) -> str:
        """The string the widget posts (its form field's value): base64 of the JSON the
        reference's ``verifySolution`` decodes."""
        fields = {
            "algorithm": challenge.algorithm,
            "challenge": challenge.challenge,
            "number": self.number,
            "salt": challenge.salt,
            "signature": challenge.signature,
            "took": self.took,
        }
        return base64.b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode()


def _text(fields: Mapping[str, Any], name: str, *, max_len: int = 1024) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise _bad(f"{name!r} must be a non-empty string (at most {max_len} characters)")
    return value


def check_page_url(value: object) -> str:
    """``pageurl`` checked as every solve task's is (an http(s) URL with a host)."""
    return _page_url("solve_altcha: pageurl", value)


def parse_challenge(raw: object, *, max_number_bound: int) -> AltchaChallenge:
    """The challenge of ``raw`` (the endpoint's JSON, as text or already decoded), or
    :class:`InvalidTaskInput`: code ``BAD_ALTCHA_CHALLENGE`` for one that is not a
    challenge, ``ALTCHA_TOO_HARD`` for a ``maxnumber`` over ``max_number_bound``."""
    if isinstance(raw, str | bytes):
        if len(raw) > MAX_CHALLENGE_BYTES:
            raise _bad(f"the challenge JSON is over {MAX_CHALLENGE_BYTES} bytes")
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise _bad(f"the challenge is not JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise _bad(f"the challenge must be a JSON object, got {type(raw).__name__}")
    algorithm = raw.get("algorithm", "SHA-256")
    if algorithm not in ALGORITHMS:
        raise _bad(f"algorithm {algorithm!r:.40} is not one of {', '.join(ALGORITHMS)}")
    challenge = _text(raw, "challenge", max_len=128).lower()
    if not _HEX.fullmatch(challenge) or len(challenge) != _DIGEST_HEX[algorithm]:
        raise _bad(f"'challenge' must be the hex {algorithm} digest the salt hashes to")
    salt = _text(raw, "salt")
    signature = _text(raw, "signature", max_len=256)
    max_number: object = raw.get("maxnumber", raw.get("maxNumber"))
    if max_number is None:
        max_number = DEFAULT_MAX_NUMBER
    if isinstance(max_number, bool) or not isinstance(max_number, int) or max_number < 1:
        raise _bad(f"'maxnumber' must be a positive integer, got {max_number!r:.40}")
    if max_number > max_number_bound:
        raise InvalidTaskInput(
            f"solve_altcha: the challenge's maxnumber {max_number:,} is over "
            f"CAPTCHA_TASKS_ALTCHA_MAX_NUMBER ({max_number_bound:,}): refused unsolved",
            "ALTCHA_TOO_HARD",
        )
    return AltchaChallenge(str(algorithm), challenge, salt, signature, max_number)


def solve(
    challenge: AltchaChallenge, *, clock: Callable[[], float] = time.monotonic
) -> AltchaSolution:
    """Count ``n`` from 0 to ``maxnumber`` until ``HASH(salt + str(n))`` is the
    challenge; :class:`~captcha_tasks.errors.CaptchaUnsolvable` (``ALTCHA_NO_SOLUTION``)
    when no ``n`` in range is."""
    started = clock()
    target = bytes.fromhex(challenge.challenge)
    # The salt's hash state, copied for each number: only the digits are hashed anew.
    copy = ALGORITHMS[challenge.algorithm](challenge.salt.encode()).copy
    for number in range(challenge.max_number + 1):
        state = copy()
        state.update(b"%d" % number)
        if state.digest() == target:
            return AltchaSolution(number, round((clock() - started) * 1000))
    raise CaptchaUnsolvable(
        f"solve_altcha: no number up to {challenge.max_number:,} hashes to the challenge "
        "(a wrong salt or challenge?)",
        "ALTCHA_NO_SOLUTION",
    )
