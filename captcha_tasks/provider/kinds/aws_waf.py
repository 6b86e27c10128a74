"""AWS WAF's captcha: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _matching, _optional_url, _page_url
from ..kind import (
    AnswerContext,
    Captcha,
    Offers,
    Params,
    Solution,
    SolveCall,
    Task,
    Timing,
    classic,
    not_offered,
    task,
)

__all__ = ["AwsWaf"]

_AWS_KEY = re.compile(r"^[A-Za-z0-9+/=_-]{20,2048}$")
_AWS_IV = re.compile(r"^[A-Za-z0-9+/=_-]{8,256}$")
_AWS_CONTEXT = re.compile(r"^[A-Za-z0-9+/=_-]{8,8192}$")


@dataclasses.dataclass(frozen=True, slots=True)
class AwsWaf(Captcha):
    """An AWS WAF CAPTCHA: ``sitekey`` (the page's key), ``iv`` and ``context`` (fresh per
    page load), and the challenge / captcha script URLs where the page has them."""

    type: ClassVar[Literal["aws_waf"]] = "aws_waf"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve an AWS WAF CAPTCHA. ``solution``: ``{"aws_waf_token": ...}`` where the
        provider gives the cookie, else ``{"captcha_voucher": ..., "existing_token": ...}``.""",
        result="AwsWafResult",
        in_php="amazon_waf",
    )
    # Its token lifetime: AWS WAF's default immunity time, how long the aws-waf-token
    # cookie is honoured. Its drain ceiling: a puzzle of GeeTest's sort, 12 s typical,
    # GeeTest's 1.2 times.
    timing: ClassVar[Timing] = Timing(
        first_poll=10.0, deadline=120.0, token_ttl=300.0, drain_ceiling=15.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(),
        "2captcha": classic(),
        "2captcha-v2": task("AmazonTaskProxyless", "AmazonTask"),
        "anticaptcha": task("AmazonTaskProxyless", "AmazonTask"),
        "capsolver": task("AntiAwsWafTaskProxyLess", "AntiAwsWafTask"),
        "capmonster": task("AmazonTask", "AmazonTask"),
    }
    sitekey: str
    iv: str
    context: str = dataclasses.field(repr=False)  # long, and one page load's
    pageurl: str
    challenge_script: str | None = None
    captcha_script: str | None = None

    @classmethod
    def shape_answer(cls, solution: Solution, context: AnswerContext) -> Solution:
        # Anti-Captcha sends the cookie as a bare ``token``, which reads as any token
        # until the type is known.
        return {"aws_waf_token": solution} if isinstance(solution, str) else solution

    def _check(self, max_image_bytes: int) -> None:
        _matching("AwsWaf.sitekey", self.sitekey, _AWS_KEY, "an AWS WAF key", max_len=2048)
        _matching("AwsWaf.iv", self.iv, _AWS_IV, "an AWS WAF iv", max_len=256)
        _matching("AwsWaf.context", self.context, _AWS_CONTEXT, "an AWS WAF context", max_len=8192)
        _page_url("AwsWaf.pageurl", self.pageurl)
        _optional_url("AwsWaf.challenge_script", self.challenge_script)
        _optional_url("AwsWaf.captcha_script", self.captcha_script)

    def classic_params(self) -> Params:
        return {
            "method": "amazon_waf",
            "sitekey": self.sitekey,
            "iv": self.iv,
            "context": self.context,
            "pageurl": self.pageurl,
            "challenge_script": self.challenge_script,
            "captcha_script": self.captcha_script,
        }

    def json_fields(self, provider: Provider) -> Task:
        if provider == "capsolver":  # its own names (PROVIDERS.md D9)
            return {
                "websiteURL": self.pageurl,
                "awsKey": self.sitekey,
                "awsIv": self.iv,
                "awsContext": self.context,
                "awsChallengeJS": self.challenge_script,
                "awsApiJs": self.captcha_script,
            }
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "iv": self.iv,
            "context": self.context,
            "challengeScript": self.challenge_script,
            "captchaScript": self.captcha_script,
            # CapMonster answers the voucher pair unless asked for the cookie itself.
            "cookieSolution": True if provider == "capmonster" else None,
        }
