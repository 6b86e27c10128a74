"""MTCaptcha: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _flag, _matching, _optional_text, _page_url, _set
from ..kind import Captcha, Offers, Params, SolveCall, Task, Timing, classic, not_offered, task

__all__ = ["MtCaptcha"]

#: MTCaptcha's site key: ``MTPublic-`` and the key (docs.capsolver.com's MtCaptcha page).
_MTCAPTCHA_KEY = re.compile(r"^MTPublic-[A-Za-z0-9]{4,64}$")


@dataclasses.dataclass(frozen=True, slots=True)
class MtCaptcha(Captcha):
    """MTCaptcha: the site's ``sitekey`` (``MTPublic-...``); ``action`` and ``invisible``
    as the page's ``mtcaptchaConfig`` sets them (sent where the provider takes them:
    CapMonster Cloud's ``pageAction`` and ``isInvisible``)."""

    type: ClassVar[Literal["mtcaptcha"]] = "mtcaptcha"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve an MTCaptcha (``sitekey``: ``MTPublic-...``; ``action`` and ``invisible`` as
        the page's ``mtcaptchaConfig`` sets them, sent where the provider takes them): its
        token (the ``mtcaptcha-verifiedtoken`` field's value) in ``solution``.""",
        in_php="mt_captcha",
    )
    # capmonstercloudclient 4.3.1's first read (GetResultTimeouts: 10 s), and it gives up
    # after 180 s; CapSolver's MtCaptcha page: "results in 5s to 30s" (the upper end: its
    # drain ceiling). Its token lifetime is in no source found: none.
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=180.0, drain_ceiling=30.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 mtcaptcha() (method=mt_captcha: sitekey, pageurl)",
        ),
        "2captcha-v2": task(
            "MtCaptchaTaskProxyless",
            "MtCaptchaTask",
            source="2captcha.com/api-docs/mtcaptcha (MtCaptchaTaskProxyless, MtCaptchaTask)",
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types nor anticaptchaofficial 1.0.72",
        ),
        "capsolver": task(
            "MtCaptchaTaskProxyLess",
            "MtCaptchaTask",
            source=(
                "docs.capsolver.com/guide/captcha/MtCaptcha (MtCaptchaTaskProxyLess, "
                "MtCaptchaTask), capsolver 1.0.7 SUPPORT_TASK_TYPE"
            ),
        ),
        "capmonster": task(
            "MTCaptchaTask",
            "MTCaptchaTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/mtcaptcha-task (MTCaptchaTask, "
                "pageAction, isInvisible), capmonstercloudclient 4.3.1 MTCaptchaRequest"
            ),
        ),
    }
    sitekey: str
    pageurl: str
    action: str | None = None
    invisible: bool = False

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "MtCaptcha.sitekey", self.sitekey, _MTCAPTCHA_KEY, "an MTCaptcha sitekey (MTPublic-...)"
        )
        _page_url("MtCaptcha.pageurl", self.pageurl)
        _optional_text("MtCaptcha.action", self.action)
        _set(self, "invisible", _flag("MtCaptcha.invisible", self.invisible))

    def classic_params(self) -> Params:
        # 2Captcha's in.php takes the key and the page only (2captcha-python's
        # mtcaptcha()): action and invisible are CapMonster's.
        return {"method": "mt_captcha", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        # pageAction and isInvisible: CapMonster Cloud's MTCaptchaTask only; the other
        # dialects document the key and the page alone.
        mine = provider == "capmonster"
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "pageAction": self.action if mine else None,
            "isInvisible": True if mine and self.invisible else None,
        }
