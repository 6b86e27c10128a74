"""A provider answering garbage (``garbage_rate``): what replaces an answer.

The request takes effect first, as with ``slow_rate``: a submit is accepted (a thread
taken, the captcha billed), a read counts and may collect the answer; only the answer
on its way back is replaced. That is the worst case for a client, and the one it
cannot tell from a portal that never passed the request on: a submit answered with
garbage may be at the provider, so it must never be sent again blindly.

Kinds (:data:`GARBAGE_KINDS`), every one with the answer's own HTTP status:

- ``truncated``: the real answer cut short (a strict prefix; ``Content-Length`` says
  the cut length, so the framing is sound and only the document is broken). A JSON
  document cut short is never valid JSON; a plain-text answer cut short can look valid
  (``OK|33976``): the client asks for ``json=1``.
- ``huge``: the real answer followed by whitespace up to :data:`HUGE_BYTES`, past the
  client's read cap (1 MiB): a document whose end the client never sees.
- ``content_type``: the real answer, labelled ``application/octet-stream`` or
  ``image/png``.
- ``html``: a captive portal's or a CDN's HTML page, HTTP 200.
- ``empty``: no body at all.
- ``noise``: random bytes (never valid UTF-8 at the start) under the real content type.
- ``wrong_shape``: JSON of the wrong shape: ``{"status": "banana"}``, a list, or the
  protocol's fields all ``null`` (a solution whose token is ``null``).
"""

from __future__ import annotations

import dataclasses
import json
import random
from typing import Final, Literal

__all__ = ["GARBAGE_KINDS", "HUGE_BYTES", "Garbage", "GarbageKind"]

GarbageKind = Literal["truncated", "huge", "content_type", "html", "empty", "noise", "wrong_shape"]
GARBAGE_KINDS: Final[tuple[GarbageKind, ...]] = (
    "truncated",
    "huge",
    "content_type",
    "html",
    "empty",
    "noise",
    "wrong_shape",
)
#: Size of a ``huge`` answer: several times the client's ``MAX_RESPONSE_BYTES``.
HUGE_BYTES: Final = 3 * 1024 * 1024

_WRONG_TYPES: Final = ("application/octet-stream", "image/png")
_HTML: Final = "text/html; charset=utf-8"
_JSON: Final = "application/json"
_PAGES: Final = (
    b"<!DOCTYPE html>\n<html><head><title>Welcome to Guest Wi-Fi</title></head><body>\n"
    b'<h1>Please accept the terms of use</h1>\n<form method="post" action="/login">'
    b'<input type="checkbox" name="terms"> I agree <button>Connect</button></form>\n'
    b"</body></html>\n",
    b'<!DOCTYPE html><html lang="en-US"><head><title>Just a moment...</title>'
    b'<meta http-equiv="refresh" content="360"></head><body><div class="main-wrapper">'
    b"<noscript>Enable JavaScript and cookies to continue</noscript></div>"
    b'<script src="/cdn-cgi/challenge-platform/orchestrate/jsch/v1"></script></body></html>\n',
)
_SHAPES: Final = ({"status": "banana"}, ["OK", 3397637370, None])
#: Every field of the protocol's answer present and ``null``, or a token that is.
_NULLS: Final = {
    "classic": {"status": 1, "request": {"geetest_challenge": None, "geetest_validate": None}},
    "json": {
        "errorId": 0,
        "errorCode": None,
        "taskId": None,
        "status": "ready",
        "solution": {"gRecaptchaResponse": None, "token": None, "text": None},
    },
}


@dataclasses.dataclass(frozen=True)
class Garbage:
    """One garbage answer to be served: its kind, and the seed of its random parts (the
    cut, the noise, the page), drawn from the sandbox's seeded generator."""

    kind: GarbageKind
    seed: int

    def garble(self, payload: bytes, content_type: str, protocol: str) -> tuple[bytes, str]:
        """The body and content type that replace ``payload`` (of ``content_type``);
        ``protocol`` (``classic`` or ``json``) picks the wrong shapes."""
        rng = random.Random(self.seed)
        kind = self.kind
        if kind == "truncated":
            cut = rng.randint(1, len(payload) - 1) if len(payload) > 1 else 0
            return payload[:cut], content_type
        if kind == "huge":
            return payload + b" " * max(0, HUGE_BYTES - len(payload) - 1) + b"\n", content_type
        if kind == "content_type":
            return payload, rng.choice(_WRONG_TYPES)
        if kind == "html":
            return rng.choice(_PAGES), _HTML
        if kind == "empty":
            return b"", content_type
        if kind == "noise":
            noise = bytes([0x80 | rng.getrandbits(7)]) + rng.randbytes(rng.randint(15, 2047))
            return noise, content_type
        shape = rng.choice((*_SHAPES, _NULLS["json" if protocol == "json" else "classic"]))
        return json.dumps(shape, separators=(",", ":")).encode(), _JSON
