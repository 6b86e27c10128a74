"""NetEase Yidun (NECaptcha): the whole declaration of the kind (its fields and their
checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its
wire parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _hostname, _int, _matching, _optional_text, _optional_url, _page_url
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

__all__ = ["Yidun"]

#: Yidun's site key: the widget's ``captchaId`` (32 letters and digits on the pages the
#: providers show; taken between 16 and 64, no other character).
_YIDUN_KEY = re.compile(r"^[A-Za-z0-9]{16,64}$")
#: Highest ``hct`` taken: a timestamp in milliseconds fits well below it.
_MAX_HCT = 2**53


@dataclasses.dataclass(frozen=True, slots=True)
class Yidun(Captcha):
    """NetEase Yidun (NECaptcha): the widget's ``sitekey`` (its ``captchaId``) and the
    ``pageurl``; the Enterprise variant's ``challenge``, ``hcg`` and ``hct`` with the
    widget's ``script_url`` (its get lib script) and ``api_server`` (its API server's
    host), where the page sets them; ``user_agent``: the browser to solve it as."""

    type: ClassVar[Literal["yidun"]] = "yidun"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a NetEase Yidun captcha (``sitekey``: the widget's ``captchaId``): its
        token in ``solution``.

        ``script_url`` (the widget's get lib script, a full URL), ``api_server`` (its API
        server's host, without ``https://``), ``challenge``, ``hcg`` and ``hct`` (an
        integer): the Enterprise variant's, from the requests the widget makes;
        ``user_agent``: the browser to solve it as. ``proxy_id``, ``provider``,
        ``exclude``: as for :func:`solve_recaptcha_v2`.""",
        in_php="yidun",
    )
    # capmonstercloudclient 4.3.1's getYidunTimeouts: first read after 10 s (1 s from its
    # cache), then every 3 s, given up after 180 s. No provider states its solve time nor
    # its token's lifetime: its drain ceiling is the upper end CapSolver states for a
    # comparable token widget (5 s to 30 s).
    timing: ClassVar[Timing] = Timing(first_poll=10.0, deadline=180.0, drain_ceiling=30.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1, "
            "CaptchaAI/CaptchaAI-Examples' methods)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 yidun() (method=yidun: sitekey, pageurl; "
            "yidun_get_lib, yidun_api_server_subdomain, challenge, hcg, hct, useragent)",
        ),
        "2captcha-v2": task(
            "YidunTaskProxyless",
            "YidunTask",
            source=(
                "third party: AndreiDrang/python-rucaptcha 6.8.0 yidun_captcha.py "
                "(YidunTaskProxyless, YidunTask: websiteURL, websiteKey, userAgent, "
                "yidunGetLib, yidunApiServerSubdomain, challenge, hcg, hct; solution token; "
                "citing 2captcha.com/api-docs/yidun, of which no copy was read)"
            ),
        ),
        "anticaptcha": not_offered(
            "not in anti-captcha.com/apidoc/task-types nor anticaptchaofficial 1.0.72",
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "YidunTask",
            "YidunTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/yidun-task (YidunTask, proxy optional; "
                "solution token), capmonstercloudclient 4.3.1 YidunRequest"
            ),
        ),
    }
    sitekey: str
    pageurl: str
    script_url: str | None = dataclasses.field(default=None, metadata=in_php("yidun_get_lib"))
    api_server: str | None = dataclasses.field(
        default=None, metadata=in_php("yidun_api_server_subdomain")
    )
    challenge: str | None = None
    hcg: str | None = None
    hct: int | None = None
    user_agent: str | None = dataclasses.field(default=None, metadata=in_php("useragent"))

    def _check(self, max_image_bytes: int) -> None:
        _matching("Yidun.sitekey", self.sitekey, _YIDUN_KEY, "a Yidun sitekey (its captchaId)")
        _page_url("Yidun.pageurl", self.pageurl)
        _optional_url("Yidun.script_url", self.script_url)
        if self.api_server is not None:
            _hostname("Yidun.api_server", self.api_server)
        _optional_text("Yidun.challenge", self.challenge, max_len=256)
        _optional_text("Yidun.hcg", self.hcg, max_len=256)
        if self.hct is not None:
            _int("Yidun.hct", self.hct, 0, _MAX_HCT)
        _optional_text("Yidun.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        # 2captcha-python's yidun(): the key and the page, its options under in.php's
        # own names.
        return {
            "method": "yidun",
            "sitekey": self.sitekey,
            "pageurl": self.pageurl,
            "yidun_get_lib": self.script_url,
            "yidun_api_server_subdomain": self.api_server,
            "challenge": self.challenge,
            "hcg": self.hcg,
            "hct": None if self.hct is None else str(self.hct),
            "useragent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        # The same names at 2Captcha (python-rucaptcha) and CapMonster Cloud; hct a number.
        return {
            "websiteURL": self.pageurl,
            "websiteKey": self.sitekey,
            "yidunGetLib": self.script_url,
            "yidunApiServerSubdomain": self.api_server,
            "challenge": self.challenge,
            "hcg": self.hcg,
            "hct": self.hct,
            "userAgent": self.user_agent,
        }
