"""Every captcha kind, by its ``type`` string (:data:`CAPTCHA_CLASSES`). Each kind is
declared once, in its module of :mod:`captcha_tasks.provider.kinds`: a frozen dataclass
of what to solve (its fields, checked when it is built and again in
:meth:`~.kind.Captcha.validate`, which the client calls before every submit, raising
:class:`~captcha_tasks.errors.InvalidTaskInput` that names the field, so garbage never
reaches the provider), its :class:`~.kind.Timing`, its :class:`~.kind.Offer` at each
provider, and its wire parameters (``classic_params``, ``json_fields``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, cast

from ._images import DEFAULT_MAX_IMAGE_BYTES, MAX_IMAGE_BYTES_CEILING, MIN_IMAGE_BYTES
from .kind import AnswerContext, Captcha, CaptchaType, Solution
from .kinds.altcha import Altcha
from .kinds.aws_waf import AwsWaf
from .kinds.binance import Binance
from .kinds.cloudflare_challenge import CloudflareChallenge
from .kinds.coordinates import Coordinates
from .kinds.datadome import DataDome
from .kinds.friendly_captcha import FriendlyCaptcha
from .kinds.funcaptcha import FunCaptcha
from .kinds.geetest import GeeTest, GeeTestV4
from .kinds.grid import GRID_SIDES, Grid
from .kinds.hcaptcha import HCaptcha
from .kinds.image import Image
from .kinds.mtcaptcha import MtCaptcha
from .kinds.prosopo import Prosopo
from .kinds.recaptcha import RecaptchaV2, RecaptchaV3
from .kinds.tencent import Tencent
from .kinds.turnstile import Turnstile
from .kinds.yidun import Yidun
from .proxy import Proxy, ProxyType

__all__ = [
    "CAPTCHA_CLASSES",
    "DEFAULT_MAX_IMAGE_BYTES",
    "GRID_SIDES",
    "MAX_IMAGE_BYTES_CEILING",
    "MIN_IMAGE_BYTES",
    "Altcha",
    "AwsWaf",
    "Binance",
    "Captcha",
    "CaptchaType",
    "CloudflareChallenge",
    "Coordinates",
    "DataDome",
    "FriendlyCaptcha",
    "FunCaptcha",
    "GeeTest",
    "GeeTestV4",
    "Grid",
    "HCaptcha",
    "Image",
    "MtCaptcha",
    "Prosopo",
    "Proxy",
    "ProxyType",
    "RecaptchaV2",
    "RecaptchaV3",
    "Tencent",
    "Turnstile",
    "Yidun",
    "for_type",
]

#: Every captcha class by its ``type`` (stored jobs name their type by it).
CAPTCHA_CLASSES: Final[Mapping[CaptchaType, type[Captcha]]] = {
    cls.type: cls
    for cls in (
        RecaptchaV2,
        RecaptchaV3,
        Turnstile,
        Image,
        GeeTest,
        HCaptcha,
        FunCaptcha,
        GeeTestV4,
        AwsWaf,
        Coordinates,
        MtCaptcha,
        Prosopo,
        FriendlyCaptcha,
        Grid,
        Altcha,
        DataDome,
        CloudflareChallenge,
        Yidun,
        Binance,
        Tencent,
    )
}


def for_type(
    captcha_type: str,
    solution: Solution,
    grid: tuple[int, int] | None = None,
    *,
    user_agent: str | None = None,
) -> Solution:
    """``solution`` in the shape a result of ``captcha_type`` has, where the answer's
    shape alone could not tell (its kind's :meth:`~.kind.Captcha.shape_answer`): an AWS
    WAF cookie sent as a bare token, a grid's tiles with its ``grid`` (rows, cols), a
    DataDome Set-Cookie line, Tencent's ticket, Cloudflare's cookies with the
    ``user_agent`` they are bound to. An unknown type's answer is left as read."""
    kind = CAPTCHA_CLASSES.get(cast(CaptchaType, captcha_type))
    if kind is None:
        return solution
    return kind.shape_answer(solution, AnswerContext(grid, user_agent))
