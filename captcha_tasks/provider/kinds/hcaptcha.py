"""hCaptcha: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _matching, _page_url
from ..kind import Captcha, Offers, Params, SolveCall, Task, TaskNames, Timing, classic, withdrawn

__all__ = ["HCaptcha"]

_HCAPTCHA_KEY = re.compile(r"^[0-9a-fA-F]{8}(-?[0-9a-fA-F]{4}){3}-?[0-9a-fA-F]{12}$")


@dataclasses.dataclass(frozen=True, slots=True)
class HCaptcha(Captcha):
    """hCaptcha (2Captcha; CaptchaAI's support is unclear)."""

    type: ClassVar[Literal["hcaptcha"]] = "hcaptcha"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve an hCaptcha (where the provider supports it): its token in ``solution``.""",
        in_php="hcaptcha",
    )
    timing: ClassVar[Timing] = Timing(
        first_poll=15.0, deadline=180.0, token_ttl=120.0, drain_ceiling=60.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(
            "unverified: not in CaptchaAI's own lists (docs.captchaai.com, pypi captchaai); no "
            "withdrawal found either",
        ),
        "2captcha": withdrawn(
            "2captcha/2captcha-python#128, Furry/2captcha#55 (gone from 2Captcha's docs), "
            "Furry/2captcha#58 (in.php answers ERROR_METHOD_CALL)",
        ),
        "2captcha-v2": withdrawn(
            "2captcha/2captcha-python#128, Furry/2captcha#55 (gone from 2captcha.com/api-docs), "
            "NopeCHALLC/nopecha-python#37",
            names=TaskNames("HCaptchaTaskProxyless", "HCaptchaTask"),
        ),
        "anticaptcha": withdrawn(
            "anti-captcha/anticaptcha-python#6 (createTask answers ERROR_TASK_TYPE_DEPRECATED, "
            "2025-02)",
            names=TaskNames("HCaptchaTaskProxyless", "HCaptchaTask"),
        ),
        "capsolver": withdrawn(
            'capsolver/capsolver-python#15 ("We do not support hcaptcha", 2025-10)',
        ),
        "capmonster": withdrawn(
            "CapMonsterCloud/capmonster-python-captcha-solver#30 (createTask answers "
            "ERROR_TASK_NOT_SUPPORTED; its hCaptcha docs page is gone)",
            names=TaskNames("HCaptchaTask", "HCaptchaTask"),
        ),
    }
    sitekey: str
    pageurl: str

    def _check(self, max_image_bytes: int) -> None:
        _matching("HCaptcha.sitekey", self.sitekey, _HCAPTCHA_KEY, "an hCaptcha sitekey (a UUID)")
        _page_url("HCaptcha.pageurl", self.pageurl)

    def classic_params(self) -> Params:
        return {"method": "hcaptcha", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        return {"websiteURL": self.pageurl, "websiteKey": self.sitekey}
