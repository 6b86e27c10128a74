"""FunCaptcha (Arkose Labs): the whole declaration of the kind (its fields and their
checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider,
its wire parameters)."""

from __future__ import annotations

import dataclasses
import json
import re
from typing import ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _host_of, _matching, _optional_text, _page_url
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
    withdrawn,
)

__all__ = ["FunCaptcha"]

_UUID = re.compile(r"^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$")


@dataclasses.dataclass(frozen=True, slots=True)
class FunCaptcha(Captcha):
    """Arkose Labs FunCaptcha: the site's ``publickey``; ``surl`` is the Arkose API host
    (``https://host`` or ``host``, kept as given), ``data_blob`` the page's ``data[blob]``."""

    type: ClassVar[Literal["funcaptcha"]] = "funcaptcha"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve an Arkose Labs FunCaptcha (``surl``: the Arkose API host; ``data_blob``:
        the page's ``data[blob]``): its token in ``solution``.""",
        in_php="funcaptcha",
    )
    # Its drain ceiling: a worker's image puzzle like reCAPTCHA v2 and hCaptcha (their
    # 60 s), 20 s typical, the slowest of the sandbox's kinds.
    timing: ClassVar[Timing] = Timing(
        first_poll=15.0, deadline=180.0, token_ttl=120.0, drain_ceiling=60.0
    )
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(),
        "2captcha": classic(),
        "2captcha-v2": task("FunCaptchaTaskProxyless", "FunCaptchaTask"),
        "anticaptcha": task("FunCaptchaTaskProxyless", "FunCaptchaTask"),
        "capsolver": withdrawn(
            "docs.capsolver.com/guide/api-support (no FunCaptcha in the list), d60/twikit#234",
        ),
        "capmonster": task("FunCaptchaTask", "FunCaptchaTask"),
    }
    publickey: str
    pageurl: str
    surl: str | None = None
    # One page load's (not shown in a repr).
    data_blob: str | None = dataclasses.field(
        default=None, repr=False, metadata=in_php("data[blob]")
    )
    user_agent: str | None = dataclasses.field(default=None, metadata=in_php("userAgent"))

    @property
    def surl_host(self) -> str | None:
        """``surl`` without its scheme: what the JSON APIs take."""
        return None if self.surl is None else _host_of("FunCaptcha.surl", self.surl)

    def _check(self, max_image_bytes: int) -> None:
        _matching("FunCaptcha.publickey", self.publickey, _UUID, "a FunCaptcha public key (a UUID)")
        _page_url("FunCaptcha.pageurl", self.pageurl)
        if self.surl is not None:
            _host_of("FunCaptcha.surl", self.surl)
        _optional_text("FunCaptcha.data_blob", self.data_blob, max_len=16384)
        _optional_text("FunCaptcha.user_agent", self.user_agent, max_len=512, spaces=True)

    def classic_params(self) -> Params:
        return {
            "method": "funcaptcha",
            "publickey": self.publickey,
            "pageurl": self.pageurl,
            "surl": None if self.surl_host is None else f"https://{self.surl_host}",
            "data[blob]": self.data_blob,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        blob = self.data_blob
        return {
            "websiteURL": self.pageurl,
            "websitePublicKey": self.publickey,
            "funcaptchaApiJSSubdomain": self.surl_host,
            # A JSON string, not an object (PROVIDERS.md D10).
            "data": None if blob is None else json.dumps({"blob": blob}, separators=(",", ":")),
            "userAgent": self.user_agent if provider == "capmonster" else None,
        }
