"""GeeTest v3 and v4: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _hostname, _matching, _page_url
from ..kind import Captcha, Offers, Params, SolveCall, Task, Timing, classic, not_offered, task

__all__ = ["GeeTest", "GeeTestV4"]

_GT = re.compile(r"^[0-9a-fA-F]{32}$")
_CHALLENGE = re.compile(r"^[0-9A-Za-z_-]{32,128}$")


@dataclasses.dataclass(frozen=True, slots=True)
class GeeTest(Captcha):
    """GeeTest v3: ``gt`` is fixed per site, ``challenge`` is fresh for every page load."""

    type: ClassVar[Literal["geetest"]] = "geetest"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a GeeTest v3. ``solution`` is a dict: geetest_challenge, geetest_validate,
        geetest_seccode.""",
        result="GeeTestResult",
        proxy="none",
        in_php="geetest",
    )
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=120.0, drain_ceiling=12.0)
    offers: ClassVar[Offers] = {
        "captchaai": classic(),
        "2captcha": classic(),
        "2captcha-v2": task("GeeTestTaskProxyless", "GeeTestTask"),
        "anticaptcha": task("GeeTestTaskProxyless", "GeeTestTask"),
        "capsolver": task("GeeTestTaskProxyLess", None),
        "capmonster": task("GeeTestTask", "GeeTestTask"),
    }
    gt: str
    challenge: str
    pageurl: str
    api_server: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching("GeeTest.gt", self.gt, _GT, "a GeeTest gt (32 hex characters)")
        _matching("GeeTest.challenge", self.challenge, _CHALLENGE, "a GeeTest challenge")
        _page_url("GeeTest.pageurl", self.pageurl)
        if self.api_server is not None:
            _hostname("GeeTest.api_server", self.api_server)

    def classic_params(self) -> Params:
        return {
            "method": "geetest",
            "gt": self.gt,
            "challenge": self.challenge,
            "pageurl": self.pageurl,
            "api_server": self.api_server,
        }

    def json_fields(self, provider: Provider) -> Task:
        return {
            "websiteURL": self.pageurl,
            "gt": self.gt,
            "challenge": self.challenge,
            "geetestApiServerSubdomain": self.api_server,
        }


@dataclasses.dataclass(frozen=True, slots=True)
class GeeTestV4(Captcha):
    """GeeTest v4: only the site's ``captcha_id`` (no per-load challenge, unlike v3)."""

    type: ClassVar[Literal["geetest_v4"]] = "geetest_v4"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a GeeTest v4. ``solution`` is a dict: captcha_id, lot_number, pass_token,
        gen_time, captcha_output.""",
        result="GeeTestV4Result",
        in_php="geetest_v4",
    )
    # Its drain ceiling: v3's (same 10 s typical solve, same deadline).
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=120.0, drain_ceiling=12.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "blog.captchaai.com/captchaai-api-quick-reference-card (method=geetest&version=4: "
            "another encoding, not built)",
        ),
        "2captcha": classic(),
        "2captcha-v2": task("GeeTestTaskProxyless", "GeeTestTask"),
        "anticaptcha": task("GeeTestTaskProxyless", "GeeTestTask"),
        "capsolver": task("GeeTestTaskProxyLess", None),
        "capmonster": task("GeeTestTask", "GeeTestTask"),
    }
    captcha_id: str
    pageurl: str
    api_server: str | None = None

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "GeeTestV4.captcha_id",
            self.captcha_id,
            _GT,
            "a GeeTest v4 captcha_id (32 hex characters)",
        )
        _page_url("GeeTestV4.pageurl", self.pageurl)
        if self.api_server is not None:
            _hostname("GeeTestV4.api_server", self.api_server)

    def classic_params(self) -> Params:
        return {
            "method": "geetest_v4",
            "captcha_id": self.captcha_id,
            "pageurl": self.pageurl,
            "api_server": self.api_server,
        }

    def json_fields(self, provider: Provider) -> Task:
        task: Task = {"websiteURL": self.pageurl, "geetestApiServerSubdomain": self.api_server}
        # The v4 id is CapSolver's captchaId, the others' gt with version 4 (PROVIDERS.md D8).
        if provider == "capsolver":
            task["captchaId"] = self.captcha_id
            return task
        task.update(gt=self.captcha_id, version=4)
        if provider == "2captcha-v2":
            task["initParameters"] = {"captcha_id": self.captcha_id}
        return task
