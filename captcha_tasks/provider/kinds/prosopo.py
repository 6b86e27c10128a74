"""Prosopo Procaptcha: the whole declaration of the kind (its fields and their checks, its
:class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider, its wire
parameters)."""

from __future__ import annotations

import dataclasses
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _matching, _page_url
from ..kind import Captcha, Offers, Params, SolveCall, Task, Timing, classic, not_offered, task

__all__ = ["Prosopo"]

#: Prosopo's site key: an SS58 account address (``5...``, 48 characters; the providers'
#: own example has an ``l``, which base58 lacks, so any letter or digit is taken).
_PROSOPO_KEY = re.compile(r"^5[A-Za-z0-9]{46,47}$")


@dataclasses.dataclass(frozen=True, slots=True)
class Prosopo(Captcha):
    """Prosopo Procaptcha: the site's ``sitekey`` (an SS58 address, ``5...``)."""

    type: ClassVar[Literal["prosopo"]] = "prosopo"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve a Prosopo Procaptcha (``sitekey``: the site's address, ``5...``): its token
        in ``solution``.""",
        in_php="prosopo",
    )
    # capmonstercloudclient 4.3.1's first read (GetResultTimeouts: 10 s), and it gives up
    # after 180 s. Its token lifetime: @prosopo/server's verification refuses a token
    # older than maxVerifiedTime (60 000 ms by default). No provider states its solve
    # time: its drain ceiling is the upper end CapSolver states for a comparable token
    # widget (5 s to 30 s).
    timing: ClassVar[Timing] = Timing(
        first_poll=10.0, deadline=180.0, token_ttl=60.0, drain_ceiling=30.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 prosopo() (method=prosopo: sitekey, pageurl)",
        ),
        "2captcha-v2": task(
            "ProsopoTaskProxyless",
            "ProsopoTask",
            source="2captcha.com/api-docs/prosopo-procaptcha (ProsopoTaskProxyless, ProsopoTask)",
        ),
        "anticaptcha": task(
            "ProsopoTaskProxyless",
            "ProsopoTask",
            source=(
                "anti-captcha.com/apidoc/task-types/ProsopoTaskProxyless and /ProsopoTask, "
                "anticaptchaofficial 1.0.72 prosopoproxyless / prosopoproxyon"
            ),
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "ProsopoTask",
            "ProsopoTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/prosopo-task (ProsopoTask), "
                "capmonstercloudclient 4.3.1 ProsopoTaskRequest"
            ),
        ),
    }
    sitekey: str
    pageurl: str

    def _check(self, max_image_bytes: int) -> None:
        _matching(
            "Prosopo.sitekey", self.sitekey, _PROSOPO_KEY, "a Prosopo sitekey (an address, 5...)"
        )
        _page_url("Prosopo.pageurl", self.pageurl)

    def classic_params(self) -> Params:
        return {"method": "prosopo", "sitekey": self.sitekey, "pageurl": self.pageurl}

    def json_fields(self, provider: Provider) -> Task:
        return {"websiteURL": self.pageurl, "websiteKey": self.sitekey}
