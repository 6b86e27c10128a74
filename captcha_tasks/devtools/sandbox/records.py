"""What the sandbox remembers of each captcha and token, and how an answer is made."""

from __future__ import annotations

import dataclasses
import random

from .answers import geetest_answer, image_answer, token
from .config import TOKEN_TTL, SandboxConfig
from .protocol import Submission

__all__ = ["CaptchaRecord", "TokenRecord", "make_answer"]


@dataclasses.dataclass
class CaptchaRecord:
    """One submitted captcha, from its submit until it is forgotten."""

    id: int
    kind: str
    ready_at: float
    report_until: float
    unsolvable: bool
    answer: str | dict[str, str]
    cost: float
    token: str | None
    submitted_at: float = 0.0
    #: When a res.php get first handed out the answer (or the unsolvable error).
    answered_at: float | None = None
    #: res.php get requests (id= or ids=) that asked for this captcha.
    polls: int = 0
    reported: bool = False
    #: Hex digest of the submit's parameters (two submits of one job share it).
    fingerprint: str = ""


@dataclasses.dataclass
class TokenRecord:
    """A token the sandbox issued, for ``/siteverify`` to check."""

    kind: str
    ready_at: float
    expires_at: float
    sitekey: str
    hostname: str
    action: str
    score: float | None
    cdata: str
    used: bool = False


def make_answer(
    sub: Submission, ready_at: float, cfg: SandboxConfig, rng: random.Random, unsolvable: bool
) -> tuple[str | dict[str, str], TokenRecord | None]:
    """The answer to ``sub`` and, for a token kind, the token's record (the answer is
    the token; one of an ``unsolvable`` captcha is never handed out, so counts as used)."""
    if sub.kind == "image":
        return image_answer(sub.image or b"", sub.hints), None
    if sub.kind == "geetest":
        return geetest_answer(sub.challenge, rng), None
    answer = token(sub.kind, rng)
    issued = TokenRecord(
        kind=sub.kind,
        ready_at=ready_at,
        expires_at=ready_at + cfg.scaled(TOKEN_TTL[sub.kind]),
        sitekey=sub.sitekey,
        hostname=sub.hostname,
        action=sub.action,
        score=sub.score,
        cdata=sub.cdata,
        used=unsolvable,  # never handed out
    )
    return answer, issued
