"""reCAPTCHA v2 and v3: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _brief, _fail, _flag, _matching, _optional_text, _page_url, _set, _text
from ..kind import Captcha, Offers, Params, SolveCall, Task, Timing, classic, in_php, task

__all__ = ["RecaptchaV2", "RecaptchaV3"]

_RECAPTCHA_KEY = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


def _cookie_list(cookies: str | None) -> list[dict[str, str]] | None:
    """``name=value; ...`` cookies (browsers' form, or in.php's ``name:value``) as a list
    of ``{name, value}``."""
    if cookies is None:
        return None
    out: list[dict[str, str]] = []
    for part in cookies.split(";"):
        separator = "=" if "=" in part else ":"
        name, _, value = part.strip().partition(separator)
        if name:
            out.append({"name": name, "value": value})
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class RecaptchaV2(Captcha):
    """reCAPTCHA v2 (checkbox or invisible), optionally Enterprise."""

    type: ClassVar[Literal["recaptcha_v2"]] = "recaptcha_v2"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a reCAPTCHA v2: its token in ``solution``.

        ``invisible``: the invisible widget; ``enterprise``: reCAPTCHA Enterprise, with the
        page's ``data-s`` value in ``data_s`` where it has one; ``cookies`` and
        ``user_agent``: the browser's, for the provider to solve as. ``proxy_id``: a proxy
        of the pool (``captcha-tasks proxies``) the provider solves through. ``provider``:
        solve at that configured provider only; ``exclude``: never at these.""",
    )
    timing: ClassVar[Timing] = Timing(
        first_poll=15.0, deadline=180.0, token_ttl=120.0, drain_ceiling=60.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("RecaptchaV2TaskProxyless", "RecaptchaV2Task"),
        "anticaptcha": task("RecaptchaV2TaskProxyless", "RecaptchaV2Task"),
        "capsolver": task("ReCaptchaV2TaskProxyLess", "ReCaptchaV2Task"),
        "capmonster": task("RecaptchaV2Task", "RecaptchaV2Task"),
    }
    sitekey: str = dataclasses.field(metadata=in_php("googlekey"))
    pageurl: str
    invisible: bool = False
    enterprise: bool = False
    data_s: str | None = dataclasses.field(default=None, metadata=in_php("data-s"))
    cookies: str | None = dataclasses.field(default=None, repr=False)  # session secrets
    user_agent: str | None = dataclasses.field(default=None, metadata=in_php("userAgent"))

    def _check(self, max_image_bytes: int) -> None:
        _matching("RecaptchaV2.sitekey", self.sitekey, _RECAPTCHA_KEY, "a reCAPTCHA sitekey")
        _page_url("RecaptchaV2.pageurl", self.pageurl)
        _set(self, "invisible", _flag("RecaptchaV2.invisible", self.invisible))
        _set(self, "enterprise", _flag("RecaptchaV2.enterprise", self.enterprise))
        _optional_text("RecaptchaV2.data_s", self.data_s, max_len=4096)
        _optional_text("RecaptchaV2.cookies", self.cookies, max_len=4096, spaces=True)
        _optional_text("RecaptchaV2.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        return {
            "method": "userrecaptcha",
            "googlekey": self.sitekey,
            "pageurl": self.pageurl,
            "invisible": "1" if self.invisible else None,
            "enterprise": "1" if self.enterprise else None,
            "data-s": self.data_s,
            "cookies": self.cookies,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "isInvisible": True if self.invisible else None,
            "userAgent": self.user_agent,
            "cookies": self.cookies,
        }
        if self.data_s is not None and self.enterprise:
            task["enterprisePayload"] = {"s": self.data_s}
        elif self.data_s is not None:
            task["recaptchaDataSValue"] = self.data_s
        if provider == "capsolver":
            # CapSolver takes cookies as a list of {name, value} and documents no userAgent.
            task["cookies"] = _cookie_list(self.cookies)
            task["userAgent"] = None
        return task


@dataclasses.dataclass(frozen=True, slots=True)
class RecaptchaV3(Captcha):
    """reCAPTCHA v3: a score-based token for ``action``."""

    type: ClassVar[Literal["recaptcha_v3"]] = "recaptcha_v3"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a reCAPTCHA v3 for ``action`` with at least ``min_score`` (``enterprise``:
        reCAPTCHA Enterprise). ``proxy_id``, ``provider``, ``exclude``: as for
        :func:`solve_recaptcha_v2`.""",
    )
    timing: ClassVar[Timing] = Timing(
        first_poll=5.0, deadline=90.0, token_ttl=120.0, drain_ceiling=4.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("RecaptchaV3TaskProxyless", None),
        "anticaptcha": task("RecaptchaV3TaskProxyless", None),
        "capsolver": task("ReCaptchaV3TaskProxyLess", "ReCaptchaV3Task"),
        "capmonster": task("RecaptchaV3TaskProxyless", None),
    }
    sitekey: str = dataclasses.field(metadata=in_php("googlekey"))
    pageurl: str
    action: str = "verify"
    min_score: float = 0.3
    enterprise: bool = False

    def _check(self, max_image_bytes: int) -> None:
        _matching("RecaptchaV3.sitekey", self.sitekey, _RECAPTCHA_KEY, "a reCAPTCHA sitekey")
        _page_url("RecaptchaV3.pageurl", self.pageurl)
        _text("RecaptchaV3.action", self.action)
        score = self.min_score
        if isinstance(score, bool) or not isinstance(score, int | float):
            _fail("RecaptchaV3.min_score", f"must be a number, got {type(score).__name__}")
        # Range first: math.isfinite() overflows on integers too big for a float.
        if not (0 < score <= 1 and math.isfinite(score)):
            _fail(
                "RecaptchaV3.min_score",
                f"must be in (0, 1] (typically 0.1-0.9), got {_brief(score)}",
            )
        _set(self, "min_score", float(score))
        _set(self, "enterprise", _flag("RecaptchaV3.enterprise", self.enterprise))

    def classic_params(self) -> Params:
        return {
            "method": "userrecaptcha",
            "version": "v3",
            "googlekey": self.sitekey,
            "pageurl": self.pageurl,
            "action": self.action,
            "min_score": f"{self.min_score:g}",
            "enterprise": "1" if self.enterprise else None,
        }

    def json_fields(self, provider: Provider) -> Task:
        if provider == "capsolver":
            # Enterprise is its own type there; minScore is not a documented field.
            return {
                "websiteURL": self.pageurl,
                "websiteKey": self.sitekey,
                "pageAction": self.action,
            }
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "minScore": self.min_score,
            "pageAction": self.action,
            "isEnterprise": True if self.enterprise else None,  # same type, flagged
        }
