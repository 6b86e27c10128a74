"""Cloudflare Turnstile: the whole declaration of the kind (its fields and their checks,
its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _fail, _matching, _optional_text, _page_url
from ..kind import Captcha, Offers, Params, SolveCall, Task, Timing, classic, in_php, task

__all__ = ["Turnstile"]

_TURNSTILE_KEY = re.compile(r"^[0-9]x[A-Za-z0-9_-]{6,98}$")


@dataclasses.dataclass(frozen=True, slots=True)
class Turnstile(Captcha):
    """Cloudflare Turnstile; ``action`` and ``cdata`` when the widget sets them.

    Challenge mode (the widget on a Cloudflare challenge page) is ``pagedata`` set, and
    then ``action`` and ``cdata`` are required; its token is bound to ``user_agent``
    (or to the one the provider answers with).
    """

    type: ClassVar[Literal["turnstile"]] = "turnstile"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a Cloudflare Turnstile: its token in ``solution``.

        ``action`` and ``cdata``: the widget's, where it sets them. On a Cloudflare
        challenge page, ``pagedata`` too (challenge mode: ``action``, ``cdata`` and
        ``pagedata`` from its ``turnstile.render`` call, all three needed); the result then
        names the browser to use the token with in ``user_agent``. ``proxy_id``,
        ``provider``, ``exclude``: as for :func:`solve_recaptcha_v2`.""",
        in_php="turnstile",
    )
    timing: ClassVar[Timing] = Timing(
        first_poll=8.0, deadline=120.0, token_ttl=300.0, drain_ceiling=10.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("TurnstileTaskProxyless", "TurnstileTask"),
        "anticaptcha": task("TurnstileTaskProxyless", "TurnstileTask"),
        "capsolver": task("AntiTurnstileTaskProxyLess", None),
        "capmonster": task("TurnstileTask", "TurnstileTask"),
    }
    sitekey: str
    pageurl: str
    action: str | None = None
    cdata: str | None = dataclasses.field(default=None, metadata=in_php("data"))
    pagedata: str | None = dataclasses.field(default=None, repr=False)  # one page load's
    user_agent: str | None = dataclasses.field(default=None, metadata=in_php("userAgent"))

    @property
    def challenge(self) -> bool:
        """Whether this is challenge mode (``pagedata`` set)."""
        return self.pagedata is not None

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "Turnstile.sitekey", self.sitekey, _TURNSTILE_KEY, "a Turnstile sitekey (0x4AAA...)"
        )
        _page_url("Turnstile.pageurl", self.pageurl)
        _optional_text("Turnstile.action", self.action)
        _optional_text("Turnstile.cdata", self.cdata, max_len=255)
        _optional_text("Turnstile.pagedata", self.pagedata, max_len=4096)
        _optional_text("Turnstile.user_agent", self.user_agent, max_len=512, spaces=True)
        if self.pagedata is not None:
            for name in ("action", "cdata"):
                if getattr(self, name) is None:
                    _fail(f"Turnstile.{name}", "is required in challenge mode (pagedata set)")

    def classic_params(self) -> Params:
        return {
            "method": "turnstile",
            "sitekey": self.sitekey,
            "pageurl": self.pageurl,
            "action": self.action,
            "data": self.cdata,
            "pagedata": self.pagedata,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"websiteURL": self.pageurl, "websiteKey": self.sitekey}
        # The same widget values under four spellings (PROVIDERS.md D7); userAgent only
        # where documented. CapSolver takes no challenge mode (refused before this).
        if provider == "capsolver":
            metadata = {"action": self.action, "cdata": self.cdata}
            metadata = {name: value for name, value in metadata.items() if value is not None}
            task["metadata"] = metadata or None
        elif provider == "anticaptcha":
            task.update(action=self.action, cData=self.cdata, chlPageData=self.pagedata)
        elif provider == "capmonster":
            task.update(
                pageAction=self.action,
                data=self.cdata,
                pageData=self.pagedata,
                userAgent=self.user_agent,
            )
            if self.challenge:
                task["cloudflareTaskType"] = "token"
        else:
            task.update(
                action=self.action,
                data=self.cdata,
                pagedata=self.pagedata,
                userAgent=self.user_agent,
            )
        return task
