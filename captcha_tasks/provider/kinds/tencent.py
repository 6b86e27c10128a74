"""Tencent's captcha (TenDI, TCaptcha): the whole declaration of the kind (its fields and
their checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each
provider, its wire parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _matching, _optional_text, _optional_url, _page_url
from ..answers import exact_fields, malformed
from ..kind import (
    AnswerContext,
    Captcha,
    Offers,
    Params,
    Solution,
    SolutionShape,
    SolveCall,
    Task,
    Timing,
    classic,
    not_offered,
    task,
)

__all__ = ["Tencent"]

#: Tencent's app id (``CaptchaAppId``, the ``aid``): digits, nine in the providers'
#: examples (``189123456``, ``190014885``).
_APP_ID = re.compile(r"^[0-9]{5,20}$")


@dataclasses.dataclass(frozen=True, slots=True)
class Tencent(Captcha):
    """Tencent's captcha (TenDI): the page's ``app_id`` (its ``CaptchaAppId``) and the
    ``pageurl``; ``script_url``: the captcha script the page loads (``TCaptcha.js``,
    ``TCaptcha-global.js``), where it is not the default; ``user_agent``: the browser to
    solve it as, where the provider takes one (CapMonster Cloud)."""

    type: ClassVar[Literal["tencent"]] = "tencent"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a Tencent captcha (TenDI; ``app_id``: the page's ``CaptchaAppId``, digits).
        ``solution``: ``{"ticket": ..., "randstr": ...}``, what the captcha's callback gives
        the page, whatever the provider.

        ``script_url``: the captcha script the page loads (``TCaptcha.js``,
        ``TCaptcha-global.js``), where it is not the default; ``user_agent``: the browser
        to solve it as (CapMonster Cloud takes it; the result's ``user_agent`` names the
        one a provider used, where it says). ``proxy_id``, ``provider``, ``exclude``: as
        for :func:`solve_recaptcha_v2`.""",
        result="TencentResult",
        solution=SolutionShape(
            "TencentSolution",
            """What a solved Tencent captcha (TenDI) gives its page's callback, whatever
            the provider: the ``ticket`` and the ``randstr`` the site verifies it with.""",
            (("ticket", "str"), ("randstr", "str")),
        ),
        in_php="tencent",
    )
    # capmonstercloudclient 4.3.1's getTenDiTimeouts: first read after 10 s (1 s from its
    # cache), then every 3 s, given up after 180 s. No provider states its solve time nor
    # its ticket's lifetime: its drain ceiling is the upper end CapSolver states for a
    # comparable token widget (5 s to 30 s).
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=180.0, drain_ceiling=30.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1, "
            "CaptchaAI/CaptchaAI-Examples' methods)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 tencent() (method=tencent: app_id, pageurl), "
            "2captcha/2captcha-javascript renameParams (appId: app_id); res.php's answer "
            'is "the response in JSON" (2captcha-javascript), its fields in no source: '
            "the JSON API's assumed",
        ),
        "2captcha-v2": task(
            "TencentTaskProxyless",
            "TencentTask",
            source=(
                "third party: AndreiDrang/python-rucaptcha 6.8.0 tencent.py "
                "(TencentTaskProxyless, TencentTask: websiteURL, appId, captchaScript; "
                "solution appid, ret, ticket, randstr; citing 2captcha.com/api-docs, of "
                "which no copy was read)"
            ),
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types nor anticaptchaofficial 1.0.72",
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "CustomTask",
            "CustomTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/tendi (CustomTask, class TenDI: "
                "websiteURL, websiteKey the app id, userAgent, metadata.captchaUrl; proxy "
                "optional; solution data.ticket, data.randstr, headers.User-Agent), "
                "capmonstercloudclient 4.3.1 TenDiCustomTaskRequest"
            ),
        ),
    }
    app_id: str
    pageurl: str
    script_url: str | None = None
    user_agent: str | None = None

    @classmethod
    def shape_answer(cls, solution: Solution, context: AnswerContext) -> Solution:
        """The ticket and randstr of a Tencent answer: CapMonster's (``data`` unwrapped by
        :func:`~..answers.json_solution`) or 2Captcha's, whose ``appid`` and ``ret`` are left
        out; a ``ret`` other than 0 is Tencent's own refusal, no answer."""
        if not isinstance(solution, dict) or solution.get("ret", 0) not in (0, "0"):
            raise malformed("Tencent", solution)
        return exact_fields("Tencent", solution, ("ticket", "randstr"))

    def _check(self, max_image_bytes: int) -> None:
        _matching("Tencent.app_id", self.app_id, _APP_ID, "a Tencent app id (CaptchaAppId, digits)")
        _page_url("Tencent.pageurl", self.pageurl)
        _optional_url("Tencent.script_url", self.script_url)
        _optional_text("Tencent.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        # 2captcha-python's tencent(): the app id and the page, no other field.
        return {"method": "tencent", "app_id": self.app_id, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        if provider != "capmonster":
            # 2Captcha's TencentTask (python-rucaptcha): the app id as appId, the script
            # as captchaScript.
            return {
                "websiteURL": self.pageurl,
                "appId": self.app_id,
                "captchaScript": self.script_url,
            }
        # CapMonster Cloud: CustomTask of class TenDI, the app id as its websiteKey and the
        # script in metadata.captchaUrl (capmonstercloudclient's TenDiCustomTaskRequest).
        return {
            "class": "TenDI",
            "websiteURL": self.pageurl,
            "websiteKey": self.app_id,
            "userAgent": self.user_agent,
            "metadata": None if self.script_url is None else {"captchaUrl": self.script_url},
        }
