"""What the sandbox remembers of each captcha and token, and how an answer is made."""

from __future__ import annotations

import dataclasses
import random

from .answers import (
    DEFAULT_USER_AGENT,
    altcha_answer,
    aws_waf_answer,
    cf_clearance,
    coordinates_answer,
    datadome_cookie,
    funcaptcha_token,
    geetest_answer,
    geetest_v4_answer,
    grid_answer,
    image_answer,
    tencent_answer,
    token,
)
from .config import TOKEN_TTL, SandboxConfig
from .submission import Submission

__all__ = [
    "AGENT_BOUND",
    "Answer",
    "CaptchaRecord",
    "TokenRecord",
    "challenge_user_agent",
    "make_answer",
]

#: A solved captcha's answer: text or token, GeeTest / AWS WAF / Tencent fields, or
#: coordinates.
Answer = str | dict[str, str] | dict[str, str | int] | list[dict[str, int]]


@dataclasses.dataclass
class CaptchaRecord:
    """One submitted captcha, from its submit until it is forgotten."""

    id: int
    kind: str
    ready_at: float
    report_until: float
    unsolvable: bool
    answer: Answer
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
    #: Turnstile challenge mode: the user agent res.php's ``json=1`` answer carries.
    useragent: str = ""
    #: The page's host name: the same for a job sent over either wire format, so a test
    #: with two sandboxes as two providers finds a job submitted to both.
    hostname: str = ""


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
    #: DataDome and Cloudflare's challenge: the user agent the cookie was solved as (and
    #: is good for only).
    user_agent: str = ""


#: Kinds whose answer is a cookie good only for the user agent it was solved as.
AGENT_BOUND = frozenset({"datadome", "cloudflare_challenge"})


def make_answer(
    sub: Submission, ready_at: float, cfg: SandboxConfig, rng: random.Random, unsolvable: bool
) -> tuple[Answer, tuple[str, TokenRecord] | None]:
    """The answer to ``sub`` and, for a kind whose answer holds a token (AWS WAF: its
    cookie), that token and its record (one of an ``unsolvable`` captcha is never
    handed out, so counts as used)."""
    answer: Answer
    if sub.kind == "image":
        return image_answer(sub.image or b"", sub.hints), None
    if sub.kind == "coordinates":
        return coordinates_answer(sub.image or b""), None
    if sub.kind == "grid":
        return grid_answer(sub.image or b"", int(sub.hints.get("tiles", "9"))), None
    if sub.kind == "geetest":
        return geetest_answer(sub.challenge, rng), None
    if sub.kind == "geetest_v4":
        return geetest_v4_answer(sub.captcha_id, rng), None
    if sub.kind == "aws_waf":
        answer = aws_waf_answer(rng)
        issued = answer["existing_token"]
    elif sub.kind == "altcha":
        answer = issued = altcha_answer(sub.challenge) or ""  # "": unsolvable, never sent
    elif sub.kind == "datadome":
        issued, answer = datadome_cookie(sub.hostname, rng)
    elif sub.kind == "cloudflare_challenge":
        answer = issued = cf_clearance(rng)
    elif sub.kind == "tencent":
        tencent = tencent_answer(sub.sitekey, rng)
        answer, issued = tencent, str(tencent["ticket"])  # the ticket: what the site verifies
    elif sub.kind == "funcaptcha":
        answer = issued = funcaptcha_token(sub.publickey, rng)
    else:
        answer = issued = token(sub.kind, rng)
    record = TokenRecord(
        kind=sub.kind,
        ready_at=ready_at,
        expires_at=ready_at + cfg.scaled(TOKEN_TTL[sub.kind]),
        sitekey=sub.sitekey,
        hostname=sub.hostname,
        action=sub.action,
        score=sub.score,
        cdata=sub.cdata,
        used=unsolvable,  # never handed out
        user_agent=sub.user_agent if sub.kind in AGENT_BOUND else "",
    )
    return answer, (issued, record)


def challenge_user_agent(sub: Submission) -> str:
    """The user agent a Turnstile challenge-mode answer carries ('' outside that mode)."""
    if sub.kind != "turnstile" or not sub.pagedata:
        return ""
    return sub.user_agent or DEFAULT_USER_AGENT
