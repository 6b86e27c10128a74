"""Answers that say nothing, for both protocols: what they are called, what they mean,
and how a message shows them.

An answer is *unreadable* when it is not the provider's protocol at all: no body,
bytes that are not UTF-8 text, an HTML page (a captive portal, a CDN's challenge) under
HTTP 2xx, JSON cut short or of the wrong shape, a body past the transport's cap
(:data:`~.transport.MAX_RESPONSE_BYTES`). The client cannot know who wrote it nor
whether the provider saw the request first (a portal that never passed it on, or a
provider whose own answer was mangled on its way back):

- a read (res.php, getTaskResult, getbalance, reports) is idempotent: the error is
  :class:`~captcha_tasks.errors.ProviderUnavailable` (transient) with one of
  :data:`UNREADABLE_CODES`, and the caller asks again after ``retry_after``;
- a submit under a 2xx status may have been accepted (and billed):
  :func:`uncertain_submit` makes it :class:`~captcha_tasks.errors.SubmitUncertain`,
  never sent again. Under a refusing status (>= 400 but 504) the status decides, as
  for any error page (:mod:`.transport`).

A message says what came (status, content type, size, the first bytes: text cleaned
of control characters, binary as escapes) with the secrets masked
(:func:`captcha_tasks.redaction.mask_secrets`) before anything is quoted, since a portal
may echo the request (the key, a proxy's password) back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

from ..errors import ProviderUnavailable, SolverError, SubmitUncertain
from ..redaction import MASK, mask_secrets

__all__ = [
    "ANSWER_TOO_BIG",
    "EMPTY_ANSWER",
    "HTML_RETRY",
    "UNREADABLE_CODES",
    "UNRECOGNISED_ANSWER",
    "clean",
    "context",
    "decode",
    "is_unreadable",
    "preview",
    "snippet",
    "too_big",
    "uncertain_submit",
    "unreadable",
    "unreadable_body",
]

#: A body that is not the protocol: HTML, malformed or wrong-shaped JSON, binary noise.
UNRECOGNISED_ANSWER: Final = "UNRECOGNISED_ANSWER"
#: No body at all (or only whitespace).
EMPTY_ANSWER: Final = "EMPTY_ANSWER"
#: A body past the transport's cap: not read to its end, so not read at all.
ANSWER_TOO_BIG: Final = "ANSWER_TOO_BIG"
UNREADABLE_CODES: Final = frozenset({UNRECOGNISED_ANSWER, EMPTY_ANSWER, ANSWER_TOO_BIG})
#: Unscaled seconds before asking again after an HTML page or a huge body (a portal or
#: a CDN in the way), and after other garbage.
HTML_RETRY: Final = 10.0
GARBAGE_RETRY: Final = 5.0

_SNIPPET = 120
_PREVIEW_BYTES = 24
_TITLE_RE = re.compile(r"<title[^>]*>(.*?)</title>", re.I | re.S)


def decode(body: bytes | str) -> str | None:
    """The body as text (a byte-order mark and surrounding whitespace dropped), or
    ``None`` if it is not UTF-8: no answer of either protocol is."""
    if isinstance(body, bytes):
        try:
            body = body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return body.lstrip("\ufeff").strip()


def clean(text: str) -> str:
    """One line of printable characters, at most 120 of them."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in text).split())
    return flat if len(flat) <= _SNIPPET else flat[: _SNIPPET - 3] + "..."


def snippet(text: str) -> str:
    """What a message quotes of a text body: an HTML page's title, else its start."""
    title = _TITLE_RE.search(text) if text.startswith("<") else None
    shown = clean(title.group(1) if title else text)
    return repr(shown) if shown else "(empty body)"


def preview(body: bytes | str, secrets: Iterable[str] = ()) -> str:
    """The first bytes of any body: quoted text, or escapes for what is not text."""
    text = decode(body)
    if text is not None:
        return snippet(mask_secrets(text, secrets))
    raw = body if isinstance(body, bytes) else body.encode("utf-8", "replace")
    for secret in secrets:
        if secret:
            raw = raw.replace(secret.encode("utf-8", "replace"), MASK.encode())
    more = "..." if len(raw) > _PREVIEW_BYTES else ""
    return f"{raw[:_PREVIEW_BYTES]!r}{more}"


def context(status: int, content_type: str, size: int, *, cut: bool = False) -> str:
    """``[HTTP 200, text/html, 1234 bytes]``: what an operator needs besides the body."""
    kind = clean(content_type) or "no content type"
    length = f"over {size} bytes, not read further" if cut else f"{size} bytes"
    return f"[HTTP {status}, {kind}, {length}]"


def unreadable(
    what: str, shown: str, *, code: str = UNRECOGNISED_ANSWER, html: bool = False
) -> ProviderUnavailable:
    """The transient error of an unreadable answer: ``what`` it is, then ``shown`` (its
    :func:`preview`, and :func:`context` where the caller has it). An HTML page or a
    huge body (something in the way, a portal or a CDN) waits longer before the next try."""
    retry = HTML_RETRY if html or code == ANSWER_TOO_BIG else GARBAGE_RETRY
    return ProviderUnavailable(f"{what}: {shown}" if shown else what, code, retry)


def too_big(
    body: bytes, status: int, content_type: str, limit: int, secrets: Iterable[str]
) -> ProviderUnavailable:
    """An answer the transport stopped reading at ``limit`` bytes."""
    head = body[:4096]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:  # cut mid-character is still text
        head = head[: exc.start] if exc.start >= len(head) - 3 else head
    shown = f"{preview(head, secrets)} {context(status, content_type, limit, cut=True)}"
    return unreadable("an answer too big to be one", shown, code=ANSWER_TOO_BIG)


def unreadable_body(
    status: int, content_type: str, body: bytes, secrets: Iterable[str], *, cut: bool
) -> ProviderUnavailable:
    """The error of a body the transport cut at its cap (``cut``), or that is not UTF-8."""
    if cut:
        return too_big(body, status, content_type, len(body), secrets)
    shown = f"{preview(body, secrets)} {context(status, content_type, len(body))}"
    return unreadable("binary data, not text", shown)


def is_unreadable(error: SolverError) -> bool:
    """Whether ``error`` says the answer was not the protocol (not a provider's code)."""
    return isinstance(error, ProviderUnavailable) and error.code in UNREADABLE_CODES


def uncertain_submit(call: str, error: SolverError | str) -> SubmitUncertain:
    """A submit answered by something unreadable under a 2xx status, or by a readable
    answer without a captcha id: it may have been accepted. ``call`` names it
    (``submit to https://.../in.php``), ``error`` says what came."""
    return SubmitUncertain(
        f"{call}: an answer that cannot be read ({error}): {SubmitUncertain.consequence}"
    )
