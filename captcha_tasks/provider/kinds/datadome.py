"""DataDome's slider captcha: the whole declaration of the kind (its fields and their
checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at each provider,
its wire parameters)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal
from urllib.parse import parse_qs, urlsplit

from ...errors import InvalidTaskInput
from ...settings.parsing import Provider
from .._checks import _fail, _page_url, _set, _shown, _text
from ..answers import datadome_cookie
from ..kind import (
    AnswerContext,
    Captcha,
    Offers,
    Params,
    Solution,
    SolveCall,
    Task,
    Timing,
    classic,
    in_php,
    not_offered,
    task,
)

__all__ = ["DATADOME_BANNED", "DATADOME_SOLVABLE", "DataDome"]


#: DataDome's captcha host: ``geo.captcha-delivery.com`` and its sister hosts.
_DATADOME_HOST = "captcha-delivery.com"


#: ``t=`` of a captcha URL: ``fe`` a captcha to solve, ``bv`` a banned IP (CapSolver's
#: DataDome page: "If t=bv means that your ip is directly banned").
DATADOME_SOLVABLE = "fe"


DATADOME_BANNED = "bv"


def _datadome_url(where: str, value: object) -> None:
    url = _page_url(where, value)
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    if (
        parts.scheme.lower() != "https"
        or not (host == _DATADOME_HOST or host.endswith("." + _DATADOME_HOST))
        or not parts.path.startswith("/captcha")
    ):
        _fail(
            where,
            "must be DataDome's captcha URL (https://geo.captcha-delivery.com/captcha/?...), "
            f"got {_shown(url)}",
        )
    kind = parse_qs(parts.query).get("t", [""])[-1]
    if kind == DATADOME_BANNED:
        raise InvalidTaskInput(
            f"{where}: t=bv: DataDome banned this IP (no captcha to solve); change the "
            "proxy and load the page again. Nothing was sent",
            "DATADOME_IP_BANNED",
        )
    if kind != DATADOME_SOLVABLE:
        _fail(where, f"t must be fe (a captcha to solve), got t={kind or '(none)'}")


@dataclasses.dataclass(frozen=True, slots=True)
class DataDome(Captcha):
    """DataDome's slider captcha: ``captcha_url`` (the captcha iframe's address,
    ``https://geo.captcha-delivery.com/captcha/?...&t=fe...``), the ``pageurl`` that
    answered with it, the browser's ``user_agent`` and, where the provider needs it
    (CapMonster Cloud's ``metadata.datadomeCookie``), ``datadome_cookie``: the
    ``datadome`` cookie the challenge set. Its cookie is bound to the user agent and the
    IP (the proxy) that solved it, so a proxy is required wherever it is offered."""

    type: ClassVar[Literal["datadome"]] = "datadome"
    solve_call: ClassVar[SolveCall] = SolveCall(
        """Solve DataDome's slider captcha: ``captcha_url`` (the captcha iframe's address,
        ``t=fe``), the ``pageurl`` that answered with it, the browser's ``user_agent``;
        ``proxy_id``: the pool proxy the page was loaded through, required (the cookie is
        bound to that IP and that user agent); ``datadome_cookie``: the ``datadome`` cookie
        the challenge set, which CapMonster Cloud needs. A ``t=bv`` URL (DataDome banned the
        IP) is refused with code ``DATADOME_IP_BANNED``, nothing sent.

        ``solution``: the cookie to set (``name``, ``value``, ``set_cookie``, ``domain``);
        ``user_agent`` and ``proxy_id`` in the result name the identity to send it with.""",
        result="DataDomeResult",
        proxy="required",
        proxy_why=(
            "every provider that solves it requires a proxy, and its cookie is bound to that IP"
        ),
        in_php="datadome",
    )
    # capmonstercloudclient 4.3.1's getDatadomeTimeouts: first read after 1 s, then every
    # 3 s, given up after 180 s; CapSolver's DataDome page: "within 1s to 20s" (the upper
    # end: its drain ceiling).
    timing: ClassVar[Timing] = Timing(first_poll=5.0, deadline=180.0, drain_ceiling=20.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 datadome() (method=datadome: captcha_url, pageurl, "
            "userAgent, proxy: all required), 2captcha/2captcha-php examples/datadome.php",
        ),
        "2captcha-v2": task(
            None,
            "DataDomeSliderTask",
            source=(
                "2captcha.com/api-docs/datadome-slider-captcha (DataDomeSliderTask: "
                "websiteURL, captchaUrl, userAgent, proxy fields; no proxyless variant), "
                "2captcha/2captcha-javascript"
            ),
        ),
        "anticaptcha": not_offered(
            "not in anticaptchaofficial 1.0.72 nor python-anticaptcha 2.0.0 (no DataDome task in "
            "either official SDK)",
        ),
        # capsolver 1.0.7's SUPPORT_TASK_TYPE spells it DataDomeSliderTask (its docs'
        # examples DatadomeSliderTask).
        "capsolver": task(
            None,
            "DataDomeSliderTask",
            source=(
                "docs.capsolver.com/guide/captcha/datadome (DatadomeSliderTask: captchaUrl "
                "with t=fe, userAgent, proxy: all required; t=bv: the IP is banned), capsolver "
                "1.0.7 SUPPORT_TASK_TYPE DataDomeSliderTask"
            ),
        ),
        "capmonster": task(
            None,
            "CustomTask",
            source=(
                "docs.capmonster.cloud/docs/captchas/datadome (CustomTask, class DataDome, "
                "metadata.captchaUrl, metadata.datadomeCookie), capmonstercloudclient 4.3.1 "
                "DataDomeCustomTaskRequest (own proxy and datadomeCookie required)"
            ),
        ),
    }
    captcha_url: str
    pageurl: str
    user_agent: str = dataclasses.field(metadata=in_php("userAgent"))
    datadome_cookie: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def shape_answer(cls, solution: Solution, context: AnswerContext) -> Solution:
        # res.php's answer: the Set-Cookie line.
        return datadome_cookie(solution) if isinstance(solution, str) else solution

    def _check(self, max_image_bytes: int) -> None:
        _datadome_url("DataDome.captcha_url", self.captcha_url)
        _page_url("DataDome.pageurl", self.pageurl)
        _text("DataDome.user_agent", self.user_agent, max_len=512, spaces=True)
        if self.datadome_cookie is not None:
            cookie = _text("DataDome.datadome_cookie", self.datadome_cookie, max_len=4096)
            if not cookie.startswith("datadome="):
                _set(self, "datadome_cookie", f"datadome={cookie}")

    def offer_condition(self, provider: Provider, *, proxied: bool) -> str | None:
        if provider == "capmonster" and self.datadome_cookie is None:
            # Its CustomTask takes the challenge's cookie with the captcha's URL, required.
            return (
                f"solves {self.what} only with datadome_cookie (the datadome cookie the "
                "challenged page set: metadata.datadomeCookie)"
            )
        if not proxied:
            # Every provider that offers it solves it through a proxy (in.php's
            # method=datadome and the JSON dialects' task names alike).
            return f"does not solve {self.what} without a proxy"
        return None

    def classic_params(self) -> Params:
        # 2captcha-python's datadome(): captcha_url, pageurl, userAgent and the proxy
        # (proxy_params, which the client adds).
        return {
            "method": "datadome",
            "captcha_url": self.captcha_url,
            "pageurl": self.pageurl,
            "userAgent": self.user_agent,
        }

    def json_fields(self, provider: Provider) -> Task:
        if provider != "capmonster":
            # 2Captcha's DataDomeSliderTask and CapSolver's: the page, the captcha's URL and
            # the user agent the cookie will be used with (all required, with the proxy).
            return {
                "websiteURL": self.pageurl,
                "captchaUrl": self.captcha_url,
                "userAgent": self.user_agent,
            }
        # CapMonster Cloud: CustomTask of class DataDome, the captcha's URL and the cookie
        # the challenge set in ``metadata`` (capmonstercloudclient's
        # DataDomeCustomTaskRequest refuses a task without either).
        if self.datadome_cookie is None:
            raise InvalidTaskInput(
                "provider capmonster: DataDome needs datadome_cookie (the datadome cookie the "
                "challenged page set)"
            )
        return {
            "class": "DataDome",
            "websiteURL": self.pageurl,
            "userAgent": self.user_agent,
            "metadata": {
                "captchaUrl": self.captcha_url,
                "datadomeCookie": self.datadome_cookie,
            },
        }
