"""Altcha's server side as the reference implementation does it (altcha-org/altcha-lib's
``createChallenge`` / ``verifySolution``, and the Python port altcha-lib-py's
``create_challenge`` / ``verify_solution``), written here independently of the package,
for tests to make challenges with a known number and key and to check payloads.

- ``challenge`` = hex HASH(salt + str(number)); ``signature`` = hex HMAC-HASH(key,
  challenge); HASH one of SHA-1, SHA-256, SHA-512.
- The salt's parameters (``?expires=...``) are part of what is hashed, and the Python
  port ends the salt with ``&`` (so no parameter can be spliced onto it).
- Verification decodes the base64 JSON payload, recomputes the challenge from its salt
  and number, and compares challenge and signature (an expired salt fails).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any
from urllib.parse import parse_qs, parse_qsl, urlencode

HASHES = {"SHA-1": hashlib.sha1, "SHA-256": hashlib.sha256, "SHA-512": hashlib.sha512}


def _digest(algorithm: str, text: str) -> str:
    return str(HASHES[algorithm](text.encode()).hexdigest())


def _signature(algorithm: str, challenge: str, key: str) -> str:
    return hmac.new(key.encode(), challenge.encode(), HASHES[algorithm]).hexdigest()


def _salt(salt: str, expires: int | None = None) -> str:
    """The salt as the reference writes it: its parameters re-encoded, ``&`` last."""
    params: dict[str, str] = {}
    if "?" in salt:
        salt, query = salt.split("?", 1)
        params = dict(parse_qsl(query))
    if expires is not None:
        params["expires"] = str(expires)
    if params:
        salt += "?" + urlencode(params)
    return salt if salt.endswith("&") else salt + "&"


def create_challenge(
    key: str,
    number: int,
    *,
    salt: str = "5a7c1e0b9d3f2a6c4e8b0d1f",
    algorithm: str = "SHA-256",
    max_number: int = 100_000,
    expires: int | None = None,
    field: str = "maxnumber",
) -> dict[str, Any]:
    """The challenge endpoint's JSON for a known ``number`` (``field``: how the server
    spells the bound, ``maxnumber`` as altcha-lib does or ``maxNumber`` as the Python
    port's ``to_dict``)."""
    salted = _salt(salt, expires)
    challenge = _digest(algorithm, salted + str(number))
    return {
        "algorithm": algorithm,
        "challenge": challenge,
        field: max_number,
        "salt": salted,
        "signature": _signature(algorithm, challenge, key),
    }


def verify_solution(payload: str, key: str, *, check_expires: bool = True) -> bool:
    """Whether the site accepts ``payload`` (the widget's posted value)."""
    try:
        fields = json.loads(base64.b64decode(payload, validate=True).decode())
    except ValueError:
        return False
    if not isinstance(fields, dict):
        return False
    required = ("algorithm", "challenge", "number", "salt", "signature")
    if any(name not in fields for name in required) or fields["algorithm"] not in HASHES:
        return False
    salt = str(fields["salt"])
    expires = parse_qs(salt.partition("?")[2]).get("expires")
    if check_expires and expires and int(expires[0]) < time.time():
        return False
    algorithm = fields["algorithm"]
    challenge = _digest(algorithm, _salt(salt) + str(fields["number"]))
    return hmac.compare_digest(challenge, str(fields["challenge"])) and hmac.compare_digest(
        _signature(algorithm, challenge, key), str(fields["signature"])
    )
