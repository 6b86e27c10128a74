"""Friendly Captcha: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...errors import InvalidTaskInput
from ...settings.parsing import Provider
from .._checks import _matching, _optional_url, _page_url
from ..kind import Captcha, Offers, Params, SolveCall, Task, Timing, classic, not_offered, task

__all__ = ["FriendlyCaptcha"]

#: Friendly Captcha's site key: the widget's ``data-sitekey`` (``FCMDESUD3M34857N`` in
#: Anti-Captcha's and CapSolver's examples); letters and digits, as no source fixes a length.
_FRIENDLY_KEY = re.compile(r"^[A-Za-z0-9]{8,64}$")


@dataclasses.dataclass(frozen=True, slots=True)
class FriendlyCaptcha(Captcha):
    """Friendly Captcha: the widget's ``sitekey`` and, where the provider needs it to tell
    v1 from v2 (CapMonster Cloud's ``metadata.apiGetLib``), ``module_script_url``: the
    widget script the page loads (v1 ``friendly-challenge@X.Y.Z/widget.module.min.js``,
    v2 ``@friendlycaptcha/sdk@X.Y.Z/site.min.js``)."""

    type: ClassVar[Literal["friendly_captcha"]] = "friendly_captcha"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a Friendly Captcha (``sitekey``: the widget's ``data-sitekey``;
        ``module_script_url``: the widget script the page loads, which CapMonster Cloud needs
        to tell v1 from v2 and the others ignore): its token (the ``frc-captcha-solution``
        field's value) in ``solution``.""",
        in_php="friendly_captcha",
    )
    # capmonstercloudclient 4.3.1's getFriendlyTimeouts: first read after 1 s, then every
    # 3 s, given up after 180 s; a proof of work solved in seconds, not by a person. No
    # provider states a solve time: its drain ceiling is the upper end CapSolver states
    # for a comparable token widget (5 s to 30 s).
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=180.0, drain_ceiling=30.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 friendly_captcha() (method=friendly_captcha: sitekey, "
            "pageurl)",
        ),
        "2captcha-v2": task(
            "FriendlyCaptchaTaskProxyless",
            "FriendlyCaptchaTask",
            source=(
                "2captcha.com/api-docs/friendly-captcha (FriendlyCaptchaTaskProxyless, "
                "FriendlyCaptchaTask; 2captcha/2captcha-javascript)"
            ),
        ),
        "anticaptcha": task(
            "FriendlyCaptchaTaskProxyless",
            "FriendlyCaptchaTask",
            source=(
                "anti-captcha.com/apidoc/task-types/FriendlyCaptchaTaskProxyless and "
                "/FriendlyCaptchaTask (websiteURL, websiteKey), anticaptchaofficial 1.0.72 "
                "friendlycaptchaproxyless / friendlycaptchaproxyon"
            ),
        ),
        "capsolver": task(
            "FriendlyCaptchaTaskProxyless",
            None,
            source=(
                "docs.capsolver.com/guide/captcha/FriendlyCaptcha "
                "(FriendlyCaptchaTaskProxyless only; not yet in capsolver 1.0.7 "
                "SUPPORT_TASK_TYPE)"
            ),
        ),
        "capmonster": task(
            "CustomTask",
            "CustomTask",
            source=(
                "capmonstercloudclient 4.3.1 FriendlyCustomTaskRequest (CustomTask, class "
                "friendly, metadata.apiGetLib: the widget script's URL, required)"
            ),
        ),
    }
    sitekey: str
    pageurl: str
    module_script_url: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "FriendlyCaptcha.sitekey",
            self.sitekey,
            _FRIENDLY_KEY,
            "a Friendly Captcha sitekey (letters and digits)",
        )
        _page_url("FriendlyCaptcha.pageurl", self.pageurl)
        _optional_url("FriendlyCaptcha.module_script_url", self.module_script_url)

    def offer_condition(self, provider: Provider, *, proxied: bool) -> str | None:
        if provider == "capmonster" and self.module_script_url is None:
            # Its CustomTask tells v1 from v2 by the widget script's URL, required.
            return (
                f"solves {self.what} only with module_script_url (the widget script the "
                "page loads: metadata.apiGetLib)"
            )
        return None

    def classic_params(self) -> Params:
        # 2captcha-python's friendly_captcha(): the key and the page; the script URL is
        # CapMonster's.
        return {"method": "friendly_captcha", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"websiteURL": self.pageurl, "websiteKey": self.sitekey}
        if provider != "capmonster":
            return task
        # CapMonster Cloud: CustomTask of class ``friendly``, which tells v1 from v2 by the
        # widget script's URL in ``metadata.apiGetLib`` (required: capmonstercloudclient's
        # FriendlyCustomTaskRequest refuses a task without it).
        if self.module_script_url is None:
            raise InvalidTaskInput(
                "provider capmonster: Friendly Captcha needs module_script_url (the widget "
                "script the page loads: widget.module.min.js for v1, site.min.js for v2)"
            )
        task.update({"class": "friendly", "metadata": {"apiGetLib": self.module_script_url}})
        return task
