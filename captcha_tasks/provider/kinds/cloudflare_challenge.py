"""Cloudflare's challenge page ("Just a moment..."): the whole declaration of the kind
(its fields and their checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer
at each provider, its wire parameters)."""

from __future__ import annotations

import base64
import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _fail, _optional_text, _page_url
from ..answers import CF_CLEARANCE, cf_cookies, malformed
from ..kind import (
    AnswerContext,
    Captcha,
    Offers,
    Solution,
    SolutionShape,
    SolveCall,
    Task,
    Timing,
    not_offered,
    task,
)

__all__ = ["MAX_HTML", "CloudflareChallenge"]

#: The longest challenge page taken, in characters: Cloudflare's "Just a moment..." pages
#: weigh 5-40 kB; a megabyte of HTML is no challenge page.
MAX_HTML = 1_000_000
_NUL = re.compile("\x00")


def _html(where: str, value: object) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        _fail(where, f"must be a string, got {type(value).__name__}")
    if not value.strip():
        _fail(where, "must not be empty")
    if len(value) > MAX_HTML:
        _fail(where, f"must be at most {MAX_HTML} characters, got {len(value)}")
    if _NUL.search(value):
        _fail(where, "must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        _fail(where, "must be valid Unicode text (no lone surrogates)")


@dataclasses.dataclass(frozen=True, slots=True)
class CloudflareChallenge(Captcha):
    """Cloudflare's full-page challenge in front of ``pageurl``, passed through a proxy
    (required: its ``cf_clearance`` cookie is bound to that IP and to ``user_agent``);
    ``html``: the challenge page as loaded (the 403 "Just a moment..." body)."""

    type: ClassVar[Literal["cloudflare_challenge"]] = "cloudflare_challenge"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Pass Cloudflare's challenge page ("Just a moment...") in front of ``pageurl``;
        ``proxy_id``: the pool proxy the page was loaded through, required (the
        ``cf_clearance`` cookie is bound to that IP and to the user agent);
        ``user_agent``: the browser's, which CapMonster Cloud requires; ``html``: the
        challenge page as loaded, which CapMonster Cloud requires.

        ``solution``: ``cookies`` to set (``cf_clearance`` among them) and ``headers`` to
        send with them (``User-Agent`` among them); ``user_agent`` and ``proxy_id`` in the
        result name the identity they are good for.""",
        result="CloudflareChallengeResult",
        solution=SolutionShape(
            "CloudflareChallengeSolution",
            """What passes Cloudflare's challenge page: ``cookies`` to set for the site
            (``cf_clearance`` always, any others the provider gave) and ``headers`` to send
            with them (``User-Agent`` always: the browser the challenge was passed as). The
            result's ``user_agent`` and ``proxy_id`` name the identity they are good for:
            send them from that user agent through that proxy, or Cloudflare challenges
            again.""",
            (("cookies", "dict[str, str]"), ("headers", "dict[str, str]")),
        ),
        proxy="required",
        proxy_why="its cf_clearance cookie is bound to the IP that passed the challenge",
    )
    # CapSolver's Cloudflare challenge page: "usually takes 3-10 s", a solve given up after
    # 120 s like its other tasks; CapMonster Cloud's turnstile-challenge-task page gives no
    # time. cf_clearance lives as the site's "Challenge Passage" setting says (30 minutes
    # by default: developers.cloudflare.com/waf/tools/challenge-passage).
    timing: ClassVar[Timing] = Timing(
        first_poll=5.0, deadline=120.0, drain_ceiling=30.0, token_ttl=1800.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "CaptchaAI/CaptchaAI-Examples solve.py (method=cloudflare_challenge) and "
            "CaptchaAI/captchaai-workflow-doctor browser.py read two different answers "
            "(a bare cf_clearance against a JSON cookies object); no docs page settles it",
        ),
        "2captcha": not_offered(
            "2captcha/2captcha-javascript README: only a Turnstile token for a challenge "
            "page, no cf_clearance",
        ),
        "2captcha-v2": not_offered(
            "2captcha/2captcha-javascript README: only a Turnstile token for a challenge "
            "page, no cf_clearance",
        ),
        "anticaptcha": not_offered(
            "anti-captcha.com/apidoc/task-types/AntiBotCookieTask: a generic anti-bot "
            "cookie task sold by subscription, not Cloudflare's challenge as a task type",
        ),
        "capsolver": task(
            None,
            "AntiCloudflareTask",
            source=(
                "docs.capsolver.com/en/guide/captcha/cloudflare_challenge (AntiCloudflareTask: "
                "websiteURL, proxy required; userAgent, html optional); its solution "
                "(cookies.cf_clearance, token, userAgent) as third-party code reads it"
            ),
        ),
        "capmonster": task(
            None,
            "TurnstileTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/turnstile-challenge-task (TurnstileTask, "
                'cloudflareTaskType "cf_clearance": htmlPageBase64, userAgent and an own proxy '
                "required; solution.cf_clearance), capmonstercloudclient 4.3.1 TurnstileRequest"
            ),
        ),
    }
    pageurl: str
    user_agent: str | None = None
    html: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def shape_answer(cls, solution: Solution, context: AnswerContext) -> Solution:
        """Its cookies (or a bare ``cf_clearance`` value) with the ``User-Agent`` header
        they are bound to."""
        if isinstance(solution, str):
            solution = {CF_CLEARANCE: solution}
        found = cf_cookies(solution) if isinstance(solution, dict) else None
        if found is None or not context.user_agent:
            raise malformed("Cloudflare challenge", solution)
        return {**found, "headers": {"User-Agent": context.user_agent}}

    def _check(self, max_image_bytes: int) -> None:
        _page_url("CloudflareChallenge.pageurl", self.pageurl)
        _optional_text("CloudflareChallenge.user_agent", self.user_agent, max_len=512, spaces=True)
        _html("CloudflareChallenge.html", self.html)

    def offer_condition(self, provider: Provider, *, proxied: bool) -> str | None:
        if not proxied:
            return f"does not solve {self.what} without a proxy"
        if provider == "capmonster" and (self.user_agent is None or self.html is None):
            # Its TurnstileTask in cf_clearance mode refuses a task without either.
            return (
                f"solves {self.what} only with user_agent and html (userAgent and "
                "htmlPageBase64 are required in its cf_clearance mode)"
            )
        return None

    def json_fields(self, provider: Provider) -> Task:
        if provider == "capmonster":
            # websiteKey is required by the task type and ignored in this mode ("any
            # string", its page says).
            html = self.html or ""
            return {
                "websiteURL": self.pageurl,
                "websiteKey": "cf_clearance",
                "cloudflareTaskType": "cf_clearance",
                "userAgent": self.user_agent,
                "htmlPageBase64": base64.b64encode(html.encode()).decode("ascii"),
            }
        # CapSolver's AntiCloudflareTask: the page; the user agent and the challenge's
        # HTML where given.
        return {"websiteURL": self.pageurl, "userAgent": self.user_agent, "html": self.html}
