"""ALTCHA's proof of work, solved at a provider: the whole declaration of the kind (its
fields and their checks, its :class:`~captcha_tasks.provider.kind.Timing`, its offer at
each provider, its wire parameters)."""

from __future__ import annotations

import dataclasses
import sys
from typing import TYPE_CHECKING, ClassVar, Literal

from ...settings.parsing import Provider
from .._checks import _page_url
from ..kind import Captcha, Offers, Params, Task, Timing, classic, not_offered, task

if TYPE_CHECKING:
    from ..altcha import AltchaChallenge

__all__ = ["Altcha"]


@dataclasses.dataclass(frozen=True, slots=True)
class Altcha(Captcha):
    """An Altcha proof of work for a provider to solve: the page and the ALTCHA v1
    challenge JSON its widget fetched (``{"algorithm", "challenge", "maxnumber", "salt",
    "signature"}``, as text); no provider takes v2's. The worker fetches a
    ``challenge_url`` itself before a provider sees it
    (:mod:`captcha_tasks.worker.altcha_tasks`), so every provider gets the same task."""

    type: ClassVar[Literal["altcha"]] = "altcha"
    # capmonstercloudclient 4.3.1's getAltchaTimeouts: first read after 1 s, then every
    # second, given up after 50 s (its drain ceiling); anticaptchaofficial's
    # altchaProxyless waits up to 300 s: the deadline is the shorter, doubled.
    timing: ClassVar[Timing] = Timing(first_poll=3.0, deadline=100.0, drain_ceiling=50.0)
    offers: ClassVar[Offers] = {
        "captchaai": not_offered(
            "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        ),
        "2captcha": classic(
            "2captcha/2captcha-python 2.1.2 altcha() (method=altcha: pageurl, challenge_url or "
            "challenge_json; the answer is the token)",
        ),
        "2captcha-v2": task(
            "AltchaTaskProxyless",
            "AltchaTask",
            source=(
                "2captcha.com/api-docs/altcha (AltchaTaskProxyless, AltchaTask: websiteURL, "
                "challengeURL or challengeJSON; the page shows no solution example: "
                "solution.token assumed, as at Anti-Captcha)"
            ),
        ),
        "anticaptcha": task(
            "AltchaTaskProxyless",
            "AltchaTask",
            source=(
                "anti-captcha.com/apidoc/task-types/AltchaTaskProxyless and /AltchaTask "
                "(websiteURL, challengeURL or challengeJSON; solution token), "
                "anticaptchaofficial 1.0.72 altchaproxyless / altchaproxyon"
            ),
        ),
        "capsolver": not_offered(
            "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 SUPPORT_TASK_TYPE",
        ),
        "capmonster": task(
            "CustomTask",
            "CustomTask",
            source=(
                "capmonstercloudclient 4.3.1 AltchaCustomTaskRequest (CustomTask, class "
                "altcha, websiteKey may be empty, metadata: challenge, iterations, salt, "
                "signature, all strings; no algorithm field, so SHA-256 only)"
            ),
        ),
    }
    pageurl: str
    challenge_json: str

    def _check(self, max_image_bytes: int) -> None:
        _page_url("Altcha.pageurl", self.pageurl)
        self.challenge()

    def challenge(self) -> AltchaChallenge:
        """``challenge_json`` parsed and checked (whatever its ``maxnumber``: the bound is
        the worker's own, a provider's is its business); a v2 challenge is refused
        (``ALTCHA_V2_NOT_OFFERED``)."""
        from ..altcha import parse_challenge  # the proof of work's module: Altcha's alone

        return parse_challenge(self.challenge_json, max_number_bound=sys.maxsize)

    def offer_condition(self, provider: Provider, *, proxied: bool) -> str | None:
        if provider == "capmonster" and self.challenge().algorithm != "SHA-256":
            # Its metadata has no algorithm field: the widget's default, SHA-256, only.
            return f"solves {self.what} with SHA-256 challenges only"
        return None

    def classic_params(self) -> Params:
        # 2captcha-python's altcha(): the page and the challenge (its JSON, which the
        # worker fetched when it was given the URL).
        return {"method": "altcha", "pageurl": self.pageurl, "challenge_json": self.challenge_json}

    def json_fields(self, provider: Provider) -> Task:
        if provider != "capmonster":
            # 2Captcha's and Anti-Captcha's AltchaTask: the challenge JSON as a string.
            return {"websiteURL": self.pageurl, "challengeJSON": self.challenge_json}
        # CapMonster Cloud: CustomTask of class ``altcha`` with the challenge's fields, all
        # strings (capmonstercloudclient's AltchaCustomTaskRequest); ``iterations`` is the
        # search bound, the challenge's ``maxnumber``. Its site key may be empty.
        challenge = self.challenge()
        return {
            "websiteURL": self.pageurl,
            "websiteKey": "",
            "class": "altcha",
            "metadata": {
                "challenge": challenge.challenge,
                "iterations": str(challenge.max_number),
                "salt": challenge.salt,
                "signature": challenge.signature,
            },
        }
