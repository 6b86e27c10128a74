"""Which provider solves which captcha kind (and Turnstile's challenge mode, and which
through a proxy): the one place the solve tasks and both clients ask.

For the JSON providers the answer is read from their dialects (a kind with task type
names is offered; a proxied variant needs a proxy name), so there is no second table
to drift. For the classic ones it is :data:`CLASSIC_OFFERS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, get_args

from ..errors import InvalidTaskInput
from ..settings import PROTOCOLS, PROVIDERS, Provider
from .captchas import Captcha, CaptchaType, Coordinates, Image, RecaptchaV2, Turnstile
from .json_dialects import JsonDialect, TaskNames, dialect_for

__all__ = [
    "CLASSIC_OFFERS",
    "TURNSTILE_CHALLENGE",
    "check_offered",
    "json_names",
    "offer_matrix",
    "refusal",
]

#: The feature name of Turnstile's challenge mode (``Turnstile.pagedata`` set).
TURNSTILE_CHALLENGE: Final = "turnstile_challenge"

_EXISTING: frozenset[str] = frozenset(
    {"recaptcha_v2", "recaptcha_v3", "turnstile", "image", "geetest", "hcaptcha"}
)

#: What the in.php / res.php providers solve: kinds plus :data:`TURNSTILE_CHALLENGE`.
#: CaptchaAI: its official SDK (pypi.org/project/captchaai, release v1.0.1) lists
#: reCAPTCHA v2/v3/Enterprise, Turnstile and Cloudflare Challenge, GeeTest v3, Grid/BLS
#: and images; no FunCaptcha, AWS WAF or coordinates. Its blog's GeeTest v4
#: (``method=geetest&version=4``) and ``cloudflare_challenge`` are other encodings /
#: other products than 2Captcha's ``geetest_v4`` and Turnstile ``pagedata``: not offered.
CLASSIC_OFFERS: Final[Mapping[Provider, frozenset[str]]] = {
    "2captcha": frozenset(get_args(CaptchaType)) | {TURNSTILE_CHALLENGE},
    "captchaai": _EXISTING,
}

#: Read from their bytes: a proxy has nothing to load, so it is dropped, never refused.
_NO_PROXY = (Image, Coordinates)


def json_names(dialect: JsonDialect, captcha: Captcha) -> TaskNames | None:
    """The task type names ``dialect`` takes for ``captcha`` (Enterprise and challenge
    mode included); ``None``: not offered."""
    names = dialect.task_types.get(captcha.type)
    if names is None:
        return None
    if isinstance(captcha, Turnstile) and captcha.challenge and not dialect.turnstile_challenge:
        return None
    if getattr(captcha, "enterprise", False):
        if isinstance(captcha, RecaptchaV2):
            return dialect.enterprise_v2
        if dialect.enterprise_v3 is not None:
            return dialect.enterprise_v3
    return names


def refusal(provider: Provider, captcha: Captcha, *, proxied: bool = False) -> str | None:
    """Why ``provider`` cannot take ``captcha`` (through a proxy if ``proxied``), or
    ``None`` when it can."""
    what = f"{type(captcha).__name__} captchas"
    if isinstance(captcha, Turnstile) and captcha.challenge:
        what += " in challenge mode (pagedata)"
    if PROTOCOLS.get(provider) == "json":
        names = json_names(dialect_for(provider), captcha)
        if names is None:
            return (
                f"provider {provider} does not solve {what} "
                "(docs/PROVIDERS.md, type x provider matrix)"
            )
        if isinstance(captcha, _NO_PROXY):
            return None
        if proxied and names.proxy is None:
            return f"provider {provider} does not solve {what} through a proxy"
        if not proxied and names.proxyless is None:
            return f"provider {provider} does not solve {what} without a proxy"
        return None
    feature = (
        TURNSTILE_CHALLENGE
        if isinstance(captcha, Turnstile) and captcha.challenge
        else captcha.type
    )
    if feature not in CLASSIC_OFFERS.get(provider, frozenset()):
        return f"provider {provider} does not solve {what} (provider/offers.py, CLASSIC_OFFERS)"
    return None


def check_offered(provider: Provider, captcha: Captcha, *, proxied: bool = False) -> None:
    """Raise :class:`~captcha_tasks.errors.InvalidTaskInput` (code ``TYPE_NOT_OFFERED``),
    naming the provider and the type, when ``provider`` does not offer ``captcha``."""
    reason = refusal(provider, captcha, proxied=proxied)
    if reason is not None:
        raise InvalidTaskInput(f"{reason}; nothing was sent", "TYPE_NOT_OFFERED")


def offer_matrix() -> dict[Provider, dict[str, str]]:
    """Per provider, per kind (and challenge mode): how it is offered, for docs and
    ``captcha-tasks`` diagnostics. JSON: ``proxyless / proxy`` names (``-``: none)."""
    features = [*get_args(CaptchaType), TURNSTILE_CHALLENGE]
    out: dict[Provider, dict[str, str]] = {}
    for provider in PROVIDERS:
        row: dict[str, str] = {}
        for feature in features:
            if PROTOCOLS[provider] == "classic":
                offered = feature in CLASSIC_OFFERS.get(provider, frozenset())
                row[feature] = "offered" if offered else "not offered"
                continue
            dialect = dialect_for(provider)
            kind = "turnstile" if feature == TURNSTILE_CHALLENGE else feature
            names = next((n for k, n in dialect.task_types.items() if k == kind), None)
            if feature == TURNSTILE_CHALLENGE and not dialect.turnstile_challenge:
                names = None
            row[feature] = (
                "not offered"
                if names is None
                else f"{names.proxyless or '-'} / {names.proxy or '-'}"
            )
        out[provider] = row
    return out
