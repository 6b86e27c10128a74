"""ALTCHA v2: a key-derivation proof of work, solved with the official ``altcha`` library.

A v2 challenge endpoint answers the library's ``Challenge.to_dict()``: ``{"parameters":
{"algorithm", "nonce", "salt", "cost", "keyLength", "keyPrefix", ...}, "signature"}``
(altcha-lib's server helpers add a ``configuration`` for the widget: ignored here). The
widget counts ``counter`` up from 0 until ``KDF(password=nonce + uint32be(counter),
salt)`` starts with ``keyPrefix`` (hex), then posts base64 of ``{"challenge":
{"parameters", "signature"}, "solution": {"counter", "derivedKey", "time"}}``. The
site's ``verify_solution`` checks the signature over the parameters' canonical JSON and
re-derives the key (or checks it against ``keySignature``).

The search is the library's own ``solve_challenge`` (it is the reference the sites verify
against), given what is left of the solve's deadline as its ``timeout``. Before it runs,
:meth:`AltchaChallengeV2.memory_bytes` and :meth:`AltchaChallengeV2.estimated_seconds`
say what the challenge costs, from its parameters alone:

- memory: scrypt's ``128 * r * (N + p)`` bytes (``cost`` is N, ``memoryCost`` r,
  ``parallelism`` p), Argon2id's ``memoryCost`` KiB (the whole of its memory, shared by
  its ``parallelism`` lanes); the SHA and PBKDF2 derivations need none to speak of;
- time: the derivations expected times the seconds one takes. A prefix of ``h`` hex
  digits matches one key in ``16**h``: that many derivations are expected when ``h``
  is at most 8. A longer prefix (deterministic mode: the site derived the key of a
  counter it chose, and the prefix is half that key) is found at that counter only,
  which the challenge does not tell: one derivation is all that is known, and the
  deadline bounds the rest. One derivation's seconds scale with its parameters (SHA:
  ``cost`` hashes; PBKDF2: ``cost`` iterations per digest block of the key; scrypt:
  ``N * r * p``; Argon2id: ``cost * memoryCost``), at a rate this process measures
  once per algorithm with small parameters (a few milliseconds).

Only the 32-bit big-endian counter of the widget and of the library's default is solved
(``counterMode`` ``uint32``): a challenge does not say which mode its site verifies with.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import math
import re
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import altcha
import argon2.exceptions
from altcha.v2 import (
    ChallengeParameters,
    derive_key_argon2id,
    derive_key_pbkdf2,
    derive_key_scrypt,
    derive_key_sha,
)

from ..errors import InvalidTaskInput, SolveTimeout

__all__ = ["ALGORITHMS_V2", "AltchaChallengeV2", "parse_v2", "seconds_per_unit"]

#: Each v2 algorithm the official library (altcha 2.3, ``altcha/v2.py``) derives keys
#: for, exactly as it spells them: its family and the digest it hashes with. Other
#: names fall back to iterated SHA-256 in the library; here they are refused.
ALGORITHMS_V2: dict[str, tuple[str, str]] = {
    "SHA-256": ("sha", "sha256"),
    "SHA-384": ("sha", "sha384"),
    "SHA-512": ("sha", "sha512"),
    "PBKDF2/SHA-256": ("pbkdf2", "sha256"),
    "PBKDF2/SHA-384": ("pbkdf2", "sha384"),
    "PBKDF2/SHA-512": ("pbkdf2", "sha512"),
    "SCRYPT": ("scrypt", ""),
    "ARGON2ID": ("argon2id", ""),
}
#: The library's defaults for what a challenge may leave out.
DEFAULT_KEY_LENGTH = 32
DEFAULT_KEY_PREFIX = "00"
ARGON2_DEFAULT_MEMORY_KIB = 65_536
SCRYPT_DEFAULT_R = 8
#: Longest prefix (hex digits) whose expected derivations the challenge tells: 16**8 is
#: the whole 32-bit counter.
_RANDOM_PREFIX_DIGITS = 8
_HEX = re.compile(r"[0-9a-fA-F]*")
_DERIVE: dict[str, Callable[[ChallengeParameters, bytes, bytes], bytes]] = {
    "sha": derive_key_sha,
    "pbkdf2": derive_key_pbkdf2,
    "scrypt": derive_key_scrypt,
    "argon2id": derive_key_argon2id,
}


def _bad(problem: str) -> InvalidTaskInput:
    return InvalidTaskInput(f"solve_altcha: {problem}", "BAD_ALTCHA_CHALLENGE")


def _hex(fields: Mapping[str, Any], name: str, *, even: bool, max_len: int = 1024) -> str:
    value = fields.get(name)
    if not isinstance(value, str) or len(value) > max_len or not _HEX.fullmatch(value):
        raise _bad(f"parameters.{name} must be a hex string (at most {max_len} digits)")
    if even and (not value or len(value) % 2):
        raise _bad(f"parameters.{name} must be whole bytes of hex")
    return value


def _count(fields: Mapping[str, Any], name: str, default: int | None, low: int, high: int) -> int:
    value = fields.get(name)
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise _bad(f"parameters.{name} must be an integer in {low:,}..{high:,}, got {value!r:.40}")
    return value


@dataclass(frozen=True)
class AltchaChallengeV2:
    """A v2 challenge as the widget's challenge endpoint gives it, checked. ``raw`` is
    the endpoint's object with its parameters as given: the payload carries them back
    unchanged, so that the signature over them still holds."""

    raw: Mapping[str, Any]
    algorithm: str
    cost: int
    key_length: int
    key_prefix: str
    memory_cost: int | None
    parallelism: int | None

    @property
    def parameters(self) -> Mapping[str, Any]:
        parameters: Mapping[str, Any] = self.raw["parameters"]
        return parameters

    @property
    def expires(self) -> float | None:
        """Epoch seconds the site accepts the payload until (``expiresAt``), or ``None``."""
        value = self.parameters.get("expiresAt")
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def captcha_id(self) -> str:
        """What names the challenge, as altcha-lib's verifier names it to refuse a second
        use: ``data.challengeId`` if the site set one, else the nonce."""
        data = self.parameters.get("data")
        if isinstance(data, Mapping) and data.get("challengeId"):
            return str(data["challengeId"])[:128]
        return str(self.parameters["nonce"])

    @property
    def expected_derivations(self) -> int | None:
        """Derivations a search is expected to take, or ``None`` when the challenge does not
        tell (a prefix longer than :data:`_RANDOM_PREFIX_DIGITS`: deterministic mode)."""
        digits = len(self.key_prefix)
        return 16**digits if digits <= _RANDOM_PREFIX_DIGITS else None

    @property
    def memory_bytes(self) -> int:
        """Memory one derivation allocates."""
        family, _ = ALGORITHMS_V2[self.algorithm]
        if family == "scrypt":
            r = self.memory_cost or SCRYPT_DEFAULT_R
            return 128 * r * (self.cost + (self.parallelism or 1))
        if family == "argon2id":
            return (self.memory_cost or ARGON2_DEFAULT_MEMORY_KIB) * 1024
        return 0

    def _units(self) -> float:
        """One derivation's work, in its family's unit (see :func:`seconds_per_unit`)."""
        family, digest = ALGORITHMS_V2[self.algorithm]
        if family == "sha":
            return self.cost
        if family == "pbkdf2":
            return self.cost * math.ceil(self.key_length / hashlib.new(digest).digest_size)
        if family == "scrypt":
            return self.cost * (self.memory_cost or SCRYPT_DEFAULT_R) * (self.parallelism or 1)
        return self.cost * (self.memory_cost or ARGON2_DEFAULT_MEMORY_KIB)

    def seconds_per_derivation(self) -> float:
        """What one derivation is expected to take this process (measured rates)."""
        return _attempt_overhead() + self._units() * seconds_per_unit(
            *ALGORITHMS_V2[self.algorithm]
        )

    def estimated_seconds(self) -> float:
        """Seconds the search is expected to take on one core: the expected derivations'
        (one, when unknown)."""
        return (self.expected_derivations or 1) * self.seconds_per_derivation()

    def solve(self, *, deadline: float, clock: Callable[[], float] = time.monotonic) -> str:
        """The payload the widget posts, found by the library's ``solve_challenge`` before
        ``deadline`` (on ``clock``), or :class:`SolveTimeout` (``ALTCHA_DEADLINE``)."""
        left = deadline - clock()
        challenge = altcha.Challenge.from_dict(dict(self.raw))
        try:
            solution = altcha.solve_challenge(challenge, timeout=left) if left > 0 else None
        except (ValueError, struct.error, argon2.exceptions.Argon2Error) as exc:
            # Parameters the key derivation itself refuses (the library's own limits).
            raise _bad(f"the key derivation refused the parameters ({exc})") from None
        if solution is None:
            raise SolveTimeout(
                "solve_altcha: no key found before the deadline, "
                "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS: given up",
                "ALTCHA_DEADLINE",
            )
        echoed: dict[str, Any] = {"parameters": self.parameters}
        if self.raw.get("signature") is not None:
            echoed["signature"] = self.raw["signature"]
        payload = {"challenge": echoed, "solution": solution.to_dict()}
        return base64.b64encode(json.dumps(payload).encode()).decode()


def parse_v2(raw: Mapping[str, Any]) -> AltchaChallengeV2:
    """The v2 challenge of ``raw`` (the endpoint's decoded object, with ``parameters``),
    or :class:`InvalidTaskInput` (``BAD_ALTCHA_CHALLENGE``) naming what is wrong."""
    fields = raw.get("parameters")
    if not isinstance(fields, Mapping):
        raise _bad("'parameters' must be a JSON object")
    algorithm = fields.get("algorithm")
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS_V2:
        raise _bad(f"algorithm {algorithm!r:.40} is not one of {', '.join(ALGORITHMS_V2)}")
    signature = raw.get("signature")
    if signature is not None and (not isinstance(signature, str) or len(signature) > 256):
        raise _bad("'signature' must be a string (at most 256 characters)")
    _hex(fields, "nonce", even=True)
    salt = _hex(fields, "salt", even=True)
    family, digest = ALGORITHMS_V2[algorithm]
    key_length = _count(fields, "keyLength", DEFAULT_KEY_LENGTH, 1, 1024)
    prefix = (
        DEFAULT_KEY_PREFIX
        if fields.get("keyPrefix") is None
        else _hex(fields, "keyPrefix", even=False)
    ).lower()
    # The SHA family's key is its digest, cut to keyLength.
    derived = min(key_length, hashlib.new(digest).digest_size) if family == "sha" else key_length
    if len(prefix) > 2 * derived:
        raise _bad(f"keyPrefix is longer than the {derived}-byte key: no counter can match it")
    cost = _count(fields, "cost", None, 1, 2**32 - 1)
    memory_cost = parallelism = None
    if fields.get("memoryCost") is not None:
        memory_cost = _count(fields, "memoryCost", None, 1, 2**32 - 1)
    if fields.get("parallelism") is not None:
        parallelism = _count(fields, "parallelism", None, 1, 2**24 - 1)
    if family == "scrypt" and (cost < 2 or cost & (cost - 1)):
        raise _bad(f"SCRYPT's cost (N) must be a power of 2 above 1, got {cost:,}")
    if family == "argon2id":
        if (memory_cost or ARGON2_DEFAULT_MEMORY_KIB) < 8 * (parallelism or 1):
            raise _bad("ARGON2ID's memoryCost must be at least 8 KiB per lane of parallelism")
        if key_length < 4 or len(salt) < 16:
            raise _bad("ARGON2ID needs a keyLength of 4 or more and a salt of 8 bytes or more")
    return AltchaChallengeV2(raw, algorithm, cost, key_length, prefix, memory_cost, parallelism)


#: What :func:`seconds_per_unit` times: each family's ``cost``, ``memoryCost`` and
#: ``parallelism``, and the units of work they make.
_MEASURES: dict[str, tuple[int, int | None, int | None, int]] = {
    "sha": (2_000, None, None, 2_000),
    "pbkdf2": (2_000, None, None, 2_000),
    "scrypt": (1_024, 8, 1, 1_024 * 8),
    "argon2id": (1, 4_096, 1, 4_096),
}


def _best_of(runs: int, work: Callable[[], object]) -> float:
    best = math.inf
    for _ in range(runs):
        started = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - started)
    return best


@functools.cache
def seconds_per_unit(family: str, digest: str) -> float:
    """Seconds one unit of a family's work takes in this process, measured once with the
    library's own derivation: a SHA hash or a PBKDF2 iteration (of ``digest``), a scrypt
    ``N * r * p`` unit, an Argon2id KiB pass."""
    cost, memory_cost, parallelism, units = _MEASURES[family]
    name = next(name for name, spec in ALGORITHMS_V2.items() if spec == (family, digest))
    parameters = ChallengeParameters(
        name, "00" * 16, "00" * 16, cost, memory_cost=memory_cost, parallelism=parallelism
    )
    derive = _DERIVE[family]
    seconds = _best_of(3, lambda: derive(parameters, b"\0" * 16, b"\0" * 20))
    return seconds / units


@functools.cache
def _attempt_overhead() -> float:
    """Seconds the library's search spends on a counter besides its derivation's work
    (a one-hash derivation, timed a hundred times over)."""
    parameters = ChallengeParameters("SHA-256", "00" * 16, "00" * 16, 1)

    def hundred() -> None:
        for _ in range(100):
            derive_key_sha(parameters, b"\0" * 16, b"\0" * 20)

    return _best_of(3, hundred) / 100
