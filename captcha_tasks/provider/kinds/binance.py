"""Binance's captcha: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _matching, _optional_text, _page_url
from ..kind import (
    Captcha,
    Offers,
    Params,
    SolveCall,
    Task,
    Timing,
    classic,
    in_php,
    not_offered,
    task,
)

__all__ = ["Binance"]

#: Binance's site key: the page's ``bizId`` / ``bizType`` / ``bizCode``, a word such as
#: ``login`` (CapMonster Cloud's binance page).
_BINANCE_KEY = re.compile(r"^[A-Za-z0-9_.-]{2,64}$")
#: This challenge's ``validateId`` (``securityId``, ``securityCheckResponseValidateId``):
#: hex digits in the providers' examples, taken as letters, digits, ``_`` and ``-``.
_VALIDATE_ID = re.compile(r"^[A-Za-z0-9_-]{8,128}$")


@dataclasses.dataclass(frozen=True, slots=True)
class Binance(Captcha):
    """Binance's captcha: the page's ``sitekey`` (its ``bizId``, ``bizType`` or
    ``bizCode``, such as ``login``), the ``pageurl``, and ``validate_id``, this challenge's
    ``validateId`` (or ``securityId``); ``user_agent``: the browser to solve it as."""

    type: ClassVar[Literal["binance"]] = "binance"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a Binance captcha (``sitekey``: the page's ``bizId``, ``bizType`` or
        ``bizCode``, such as ``login``; ``validate_id``: this challenge's ``validateId``,
        ``securityId`` or ``securityCheckResponseValidateId``, new for each one): its token
        in ``solution``. The providers solve it for logging in to one's own account.

        ``user_agent``: the browser to solve it as; the result's ``user_agent`` names the
        one the provider used, where it says. ``proxy_id``, ``provider``, ``exclude``: as
        for :func:`solve_recaptcha_v2`.""",
        in_php="binance",
    )
    # capmonstercloudclient 4.3.1's getBinanceTimeouts: first read after 1 s, then every
    # second, given up after 20 s (its drain ceiling); 2captcha-python's solve() waits
    # up to its default 120 s: the deadline is the shorter, doubled. Its token lifetime is
    # in no source found: none.
    timing: ClassVar[Timing] = Timing(first_poll=3.0, deadline=40.0, drain_ceiling=20.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1, "
            "CaptchaAI/CaptchaAI-Examples' methods)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 binance() (method=binance: pageurl, sitekey, "
            "validate_id; useragent)",
        ),
        "2captcha-v2": task(
            "BinanceTaskProxyless",
            "BinanceTask",
            source=(
                "third party: AndreiDrang/python-rucaptcha 6.8.0 binance_captcha.py "
                "(BinanceTaskProxyless, BinanceTask: websiteURL, websiteKey, validateId, "
                "userAgent; solution token, userAgent; citing 2captcha.com/api-docs, of which "
                "no copy was read; another third-party list spells it BinanceTaskproxyless)"
            ),
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types nor anticaptchaofficial 1.0.72",
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "BinanceTask",
            "BinanceTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/binance (BinanceTask: websiteURL, "
                "websiteKey, validateId, userAgent, proxy optional; solution token, userAgent; "
                '"use only to log in with your account"), capmonstercloudclient 4.3.1 '
                "BinanceTaskRequest"
            ),
        ),
    }
    sitekey: str
    pageurl: str
    validate_id: str
    user_agent: str | None = dataclasses.field(default=None, metadata=in_php("useragent"))

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "Binance.sitekey",
            self.sitekey,
            _BINANCE_KEY,
            "a Binance sitekey (its bizId, such as login)",
        )
        _page_url("Binance.pageurl", self.pageurl)
        _matching(
            "Binance.validate_id",
            self.validate_id,
            _VALIDATE_ID,
            "a Binance validateId (letters and digits)",
            max_len=128,
        )
        _optional_text("Binance.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        # 2captcha-python's binance(): the page, the key and the challenge's id.
        return {
            "method": "binance",
            "sitekey": self.sitekey,
            "pageurl": self.pageurl,
            "validate_id": self.validate_id,
            "useragent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        # The same names at 2Captcha (python-rucaptcha) and CapMonster Cloud.
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "validateId": self.validate_id,
            "userAgent": self.user_agent,
        }
