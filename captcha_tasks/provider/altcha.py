"""ALTCHA's proof of work, solved here: no provider, no thread of the plan, no spend.

Two versions of the challenge exist, and :func:`read_challenge` takes both as a site's
challenge endpoint serves them to the widget:

**v1** (:class:`AltchaChallenge`): ``{"algorithm", "challenge", "maxnumber", "salt",
"signature"}``. The widget finds the number ``n`` in ``0..maxnumber`` whose hash
``HASH(salt + str(n))`` (hex) is ``challenge``, and posts base64 of the JSON
``{algorithm, challenge, number, salt, signature, took}`` (``took``: the milliseconds it
spent). The site checks it as the official library's ``verify_solution_v1`` does:
``challenge`` recomputed from ``salt`` and ``number``, and ``signature`` equal to
``HMAC(hmac_key, challenge)`` under the site's own key.

- ``algorithm``: ``SHA-1``, ``SHA-256`` (the default when absent) or ``SHA-512``, the
  three the library creates and verifies.
- ``salt`` is hashed exactly as given, parameters and all (``"<hex>?expires=...&"``:
  the site signs them into the challenge). Its ``expires`` (epoch seconds) is when the
  site stops accepting the payload.
- ``maxnumber`` (or ``maxNumber``, as the library's ``Challenge.to_dict`` spells it)
  bounds the search; a challenge without one is searched up to 1,000,000, the widget's
  default.

The v1 search here is the library's ``solve_challenge_v1`` loop (the same numbers, in
the same order, hashed the same way), written to hash only each number's digits onto a
copy of the salt's hash state and to stop at a deadline: the library's hashes each whole
string anew (``captcha-tasks-dev bench altcha`` shows both) and has no deadline.

**v2** (:class:`~.altcha_v2.AltchaChallengeV2`, :mod:`.altcha_v2`): a key derivation
(iterated SHA, PBKDF2, scrypt, Argon2id) searched by the library's own ``solve_challenge``.

What a solve may cost is bounded (:class:`AltchaBounds`, from the settings) before any
work, from the challenge alone (:func:`check_bounds`): v1's ``maxnumber``; the memory a
v2 derivation allocates; the seconds the search is expected to take on one core (v1: the
whole range, its worst case; v2: the derivations its prefix makes expected). The search
itself stops at the deadline those seconds set (:class:`~captcha_tasks.errors.
SolveTimeout`, ``ALTCHA_DEADLINE``).
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from ..errors import CaptchaUnsolvable, InvalidTaskInput, SolveTimeout
from ._checks import _page_url
from .altcha_v2 import ALGORITHMS_V2, AltchaChallengeV2, parse_v2

if TYPE_CHECKING:
    from ..settings import Settings

__all__ = [
    "ALGORITHMS",
    "ALGORITHMS_V2",
    "DEFAULT_MAX_NUMBER",
    "AltchaBounds",
    "AltchaChallenge",
    "AltchaChallengeV2",
    "AltchaSolution",
    "Challenge",
    "check_bounds",
    "check_page_url",
    "parse_challenge",
    "read_challenge",
    "solve",
    "solve_payload",
]

#: The hash of each algorithm name a v1 challenge may carry (the library's three).
ALGORITHMS: dict[str, Callable[..., Any]] = {
    "SHA-1": hashlib.sha1,
    "SHA-256": hashlib.sha256,
    "SHA-512": hashlib.sha512,
}
#: The search bound of a v1 challenge that names none (the widget's own default).
DEFAULT_MAX_NUMBER = 1_000_000
#: Largest challenge JSON accepted (a v1 widget's is about 250 bytes, a v2 one's about
#: 400 plus the site's ``data``).
MAX_CHALLENGE_BYTES = 16_384
#: Numbers the v1 search counts between two looks at the clock.
_DEADLINE_STRIDE = 1 << 16
_HEX = re.compile(r"[0-9a-f]+")
#: Hex digits of each algorithm's digest.
_DIGEST_HEX = {"SHA-1": 40, "SHA-256": 64, "SHA-512": 128}


def _bad(problem: str) -> InvalidTaskInput:
    return InvalidTaskInput(f"solve_altcha: {problem}", "BAD_ALTCHA_CHALLENGE")


def _deadline_passed() -> SolveTimeout:
    return SolveTimeout(
        "solve_altcha: no solution found before the deadline, "
        "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS: given up",
        "ALTCHA_DEADLINE",
    )


@dataclass(frozen=True)
class AltchaChallenge:
    """A v1 challenge as the widget's challenge endpoint gives it, checked."""

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

    @property
    def captcha_id(self) -> str:
        """What names the challenge: its hash."""
        return self.challenge

    @property
    def memory_bytes(self) -> int:
        return 0

    def estimated_seconds(self) -> float:
        """Seconds the whole range takes on one core (the worst case: the number is the
        site's draw in ``0..maxnumber``)."""
        return (self.max_number + 1) * _seconds_per_hash(self.algorithm)

    def solve(self, *, deadline: float, clock: Callable[[], float] = time.monotonic) -> str:
        """The payload the widget posts (see :func:`solve`)."""
        return solve(self, deadline=deadline, clock=clock).payload(self)


#: A challenge of either version, as :func:`read_challenge` gives it.
Challenge = AltchaChallenge | AltchaChallengeV2


@dataclass(frozen=True)
class AltchaSolution:
    """The number found and the milliseconds the search took."""

    number: int
    took: int

    def payload(self, challenge: AltchaChallenge) -> str:
        """The string the widget posts (its form field's value): base64 of the JSON the
        library's ``verify_solution_v1`` decodes."""
        fields = {
            "algorithm": challenge.algorithm,
            "challenge": challenge.challenge,
            "number": self.number,
            "salt": challenge.salt,
            "signature": challenge.signature,
            "took": self.took,
        }
        return base64.b64encode(json.dumps(fields, separators=(",", ":")).encode()).decode()


@dataclass(frozen=True)
class AltchaBounds:
    """What the worker spends on one challenge at most (the settings'
    ``CAPTCHA_TASKS_ALTCHA_MAX_*``)."""

    #: A v1 challenge's largest ``maxnumber``.
    max_number: int = 10_000_000
    #: Seconds of one core a search may take: expected before it starts, and its deadline.
    max_seconds: float = 20.0
    #: MiB one derivation may allocate.
    max_memory_mib: int = 256

    @classmethod
    def of(cls, settings: Settings) -> AltchaBounds:
        return cls(
            settings.altcha_max_number, settings.altcha_max_seconds, settings.altcha_max_memory_mib
        )


def _text(fields: Mapping[str, Any], name: str, *, max_len: int = 1024) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise _bad(f"{name!r} must be a non-empty string (at most {max_len} characters)")
    return value


def check_page_url(value: object) -> str:
    """``pageurl`` checked as every solve task's is (an http(s) URL with a host)."""
    return _page_url("solve_altcha: pageurl", value)


def _decoded(raw: object) -> Mapping[str, Any]:
    if isinstance(raw, str | bytes):
        if len(raw) > MAX_CHALLENGE_BYTES:
            raise _bad(f"the challenge JSON is over {MAX_CHALLENGE_BYTES} bytes")
        try:
            raw = json.loads(raw)
        except ValueError as exc:
            raise _bad(f"the challenge is not JSON ({exc})") from None
    if not isinstance(raw, Mapping):
        raise _bad(f"the challenge must be a JSON object, got {type(raw).__name__}")
    return raw


def read_challenge(raw: object) -> Challenge:
    """The challenge of ``raw`` (the endpoint's JSON, as text or already decoded): v2
    when it has ``parameters``, else v1; or :class:`InvalidTaskInput`
    (``BAD_ALTCHA_CHALLENGE``) for one that is neither."""
    fields = _decoded(raw)
    if "parameters" in fields:
        return parse_v2(fields)
    return _parse_v1(fields)


def parse_challenge(raw: object, *, max_number_bound: int = sys.maxsize) -> AltchaChallenge:
    """The v1 challenge of ``raw``, what a provider is sent: as :func:`read_challenge`,
    and :class:`InvalidTaskInput` for a v2 one (``ALTCHA_V2_NOT_OFFERED``: no provider
    documents v2, see :mod:`captcha_tasks.worker.altcha_tasks`) or a ``maxnumber`` over
    ``max_number_bound`` (``ALTCHA_TOO_HARD``)."""
    challenge = read_challenge(raw)
    if isinstance(challenge, AltchaChallengeV2):
        raise InvalidTaskInput(
            "solve_altcha: an ALTCHA v2 challenge (key derivation), which no provider takes",
            "ALTCHA_V2_NOT_OFFERED",
        )
    _check_max_number(challenge, max_number_bound)
    return challenge


def _parse_v1(raw: Mapping[str, Any]) -> AltchaChallenge:
    algorithm = raw.get("algorithm", "SHA-256")
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
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
    return AltchaChallenge(algorithm, challenge, salt, signature, max_number)


def _check_max_number(challenge: AltchaChallenge, bound: int) -> None:
    if challenge.max_number > bound:
        raise InvalidTaskInput(
            f"solve_altcha: the challenge's maxnumber {challenge.max_number:,} is over "
            f"CAPTCHA_TASKS_ALTCHA_MAX_NUMBER ({bound:,}): refused unsolved",
            "ALTCHA_TOO_HARD",
        )


def check_bounds(challenge: Challenge, bounds: AltchaBounds) -> None:
    """Refuse, before any work, a challenge the worker would spend more on than
    ``bounds`` allow: :class:`InvalidTaskInput` with ``ALTCHA_TOO_MUCH_MEMORY`` for a
    derivation over ``max_memory_mib``, ``ALTCHA_TOO_HARD`` for a v1 ``maxnumber`` over
    ``max_number`` or a search expected to take over ``max_seconds``."""
    memory = challenge.memory_bytes
    if memory > bounds.max_memory_mib * 2**20:
        raise InvalidTaskInput(
            f"solve_altcha: the challenge's {challenge.algorithm} needs "
            f"{math.ceil(memory / 2**20):,} MiB per derivation, over "
            f"CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB ({bounds.max_memory_mib:,}): refused unsolved",
            "ALTCHA_TOO_MUCH_MEMORY",
        )
    if isinstance(challenge, AltchaChallenge):
        _check_max_number(challenge, bounds.max_number)
    seconds = challenge.estimated_seconds()
    if seconds > bounds.max_seconds:
        what = (
            "the whole range"
            if isinstance(challenge, AltchaChallenge)
            else "the derivations expected"
            if challenge.expected_derivations
            else "one derivation"
        )
        raise InvalidTaskInput(
            f"solve_altcha: {what} of the challenge's {challenge.algorithm} would take about "
            f"{seconds:,.3g} s of one core, over CAPTCHA_TASKS_ALTCHA_MAX_SECONDS "
            f"({bounds.max_seconds:g}): refused unsolved",
            "ALTCHA_TOO_HARD",
        )


def solve_payload(
    challenge: Challenge, bounds: AltchaBounds, *, clock: Callable[[], float] = time.monotonic
) -> str:
    """The payload the widget posts for ``challenge``, found within ``bounds``: checked
    (:func:`check_bounds`), then searched until ``max_seconds`` from now."""
    check_bounds(challenge, bounds)
    return challenge.solve(deadline=clock() + bounds.max_seconds, clock=clock)


def solve(
    challenge: AltchaChallenge,
    *,
    deadline: float = math.inf,
    clock: Callable[[], float] = time.monotonic,
) -> AltchaSolution:
    """Count ``n`` from 0 to ``maxnumber`` until ``HASH(salt + str(n))`` is the
    challenge; :class:`~captcha_tasks.errors.CaptchaUnsolvable` (``ALTCHA_NO_SOLUTION``)
    when no ``n`` in range is, :class:`~captcha_tasks.errors.SolveTimeout`
    (``ALTCHA_DEADLINE``) when ``deadline`` (on ``clock``) passes first."""
    started = clock()
    target = bytes.fromhex(challenge.challenge)
    # The salt's hash state, copied for each number: only the digits are hashed anew.
    copy = ALGORITHMS[challenge.algorithm](challenge.salt.encode()).copy
    end = challenge.max_number + 1
    for first in range(0, end, _DEADLINE_STRIDE):
        if clock() > deadline:
            raise _deadline_passed()
        for number in range(first, min(first + _DEADLINE_STRIDE, end)):
            state = copy()
            state.update(b"%d" % number)
            if state.digest() == target:
                return AltchaSolution(number, round((clock() - started) * 1000))
    raise CaptchaUnsolvable(
        f"solve_altcha: no number up to {challenge.max_number:,} hashes to the challenge "
        "(a wrong salt or challenge?)",
        "ALTCHA_NO_SOLUTION",
    )


@functools.cache
def _seconds_per_hash(algorithm: str) -> float:
    """Seconds :func:`solve` spends on a number of ``algorithm``, measured once in this
    process over a range of 8,192 (a few milliseconds)."""
    last = 8_191
    salt = "0" * 24 + "?expires=0&"
    digest = ALGORITHMS[algorithm](f"{salt}{last}".encode()).hexdigest()
    probe = AltchaChallenge(algorithm, digest, salt, "", last)
    best = math.inf
    for _ in range(3):
        started = time.perf_counter()
        solve(probe)
        best = min(best, time.perf_counter() - started)
    return best / (last + 1)
