"""Which provider solves which captcha kind (and Turnstile's challenge mode, and which
through a proxy): the one place the solve tasks and both clients ask.

Every cell comes from the kinds' declarations: each captcha class's ``offers`` says, per
provider, whether it is offered, under which task names at a JSON provider (its dialect's
``task_types`` are read from them), and the public source. For the classic providers
that is :data:`CLASSIC_OFFERS`. A kind a provider has withdrawn is in :data:`WITHDRAWN`
with the source that says so: refused before anything is sent, even where a dialect
still knows its task names (what a stale catalogue would send). Every cell's source is
in :data:`SOURCES` (:func:`catalogue`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from typing import Final, Literal, get_args

from ..errors import ConfigurationError, InvalidTaskInput
from ..settings import PROTOCOLS, PROVIDERS, Provider
from ..settings.providers import ProviderConfig, variable
from .captchas import (
    CAPTCHA_CLASSES,
    Captcha,
    CaptchaType,
    Coordinates,
    Grid,
    Image,
    RecaptchaV2,
    Turnstile,
)
from .json_dialects import JsonDialect, dialect_for
from .kind import Offer, TaskNames

__all__ = [
    "CLASSIC_OFFERS",
    "NEVER_SOLVED",
    "PROVIDER_SOURCES",
    "SOURCES",
    "TURNSTILE_CHALLENGE",
    "WITHDRAWN",
    "Cell",
    "catalogue",
    "check_configured",
    "check_offered",
    "json_names",
    "offer_matrix",
    "offered_by",
    "refusal",
    "withdrawal",
]

#: The feature name of Turnstile's challenge mode (``Turnstile.pagedata`` set).
TURNSTILE_CHALLENGE: Final = "turnstile_challenge"

#: Each provider's own docs and SDK: the source of a cell whose kind's declaration (its
#: class's ``offers``) names none.
PROVIDER_SOURCES: Final[Mapping[Provider, str]] = {
    "captchaai": "pypi.org/project/captchaai (v1.0.1), docs.captchaai.com",
    "2captcha": "2captcha.com/2captcha-api, 2captcha/2captcha-python",
    "2captcha-v2": "2captcha.com/api-docs/create-task",
    "anticaptcha": "anti-captcha.com/apidoc/task-types, anti-captcha/anticaptcha-python",
    "capsolver": "docs.capsolver.com/guide/api-support",
    "capmonster": "docs.capmonster.cloud/docs/captchas/",
}

#: Turnstile's challenge mode where a provider's own docs do not settle it: CaptchaAI's
#: ``cloudflare_challenge`` and CapSolver's AntiCloudflareTask are other products than
#: 2Captcha's Turnstile ``pagedata`` (not offered; a JSON dialect says so in
#: ``turnstile_challenge``). 2Captcha's in.php takes it.
_CHALLENGE_SOURCES: Final[Mapping[Provider, str]] = {
    "captchaai": "blog.captchaai.com/cloudflare-waf-rules-trigger-captcha "
    "(cloudflare_challenge: another product)",
    "capsolver": "docs.capsolver.com/guide/captcha/cloudflare_challenge "
    "(AntiCloudflareTask: another product)",
}
_CLASSIC_CHALLENGE: Final = frozenset({"2captcha"})


def _kinds(provider: Provider, state: str) -> dict[str, Offer]:
    offers = {kind: cls.offers[provider] for kind, cls in CAPTCHA_CLASSES.items()}
    return {kind: offer for kind, offer in offers.items() if offer.state == state}


#: What the in.php / res.php providers solve: the kinds whose declarations offer them,
#: plus :data:`TURNSTILE_CHALLENGE` where it is. A withdrawn kind stays listed, as it was
#: once offered: :data:`WITHDRAWN` refuses it first, and a stale catalogue without that
#: would send it (the provider's answer is then a permanent error).
CLASSIC_OFFERS: Final[Mapping[Provider, frozenset[str]]] = {
    provider: frozenset(_kinds(provider, "offered") | _kinds(provider, "withdrawn"))
    | ({TURNSTILE_CHALLENGE} if provider in _CLASSIC_CHALLENGE else frozenset())
    for provider in PROVIDERS
    if PROTOCOLS[provider] == "classic"
}

#: Kinds a provider has withdrawn, with the public source that says so (from the kinds'
#: declarations): refused, whatever a dialect or :data:`CLASSIC_OFFERS` still name.
WITHDRAWN: Final[Mapping[Provider, Mapping[str, str]]] = {
    provider: {kind: offer.source or "" for kind, offer in gone.items()}
    for provider in PROVIDERS
    if (gone := _kinds(provider, "withdrawn"))
}


#: The kinds each provider solves in no variant (never offered, or withdrawn), from the
#: kinds' declarations: a provider's ``_TYPES`` naming one is a mistake
#: (:func:`check_configured`).
NEVER_SOLVED: Final[Mapping[Provider, frozenset[str]]] = {
    provider: frozenset(
        kind for kind, cls in CAPTCHA_CLASSES.items() if cls.offers[provider].state != "offered"
    )
    for provider in PROVIDERS
}


def check_configured(configs: Iterable[ProviderConfig]) -> None:
    """Raise :class:`ConfigurationError`, naming the variable, for a provider whose
    ``_TYPES`` names a kind its protocol never solves (:data:`NEVER_SOLVED`). The app's
    configuration runs it when it reads the settings, in workers and callers alike."""
    for config in configs:
        for kind in config.types:
            if kind in NEVER_SOLVED[config.protocol]:
                raise ConfigurationError(
                    f"{variable(config.name, 'TYPES')}: protocol {config.protocol} does not "
                    f"solve {kind} captchas"
                )


def _sources(provider: Provider) -> dict[str, str]:
    sources = {"*": PROVIDER_SOURCES[provider]}
    for kind, cls in CAPTCHA_CLASSES.items():
        offer = cls.offers[provider]
        if offer.source and offer.state != "withdrawn":
            sources[kind] = offer.source
    if provider in _CHALLENGE_SOURCES:
        sources[TURNSTILE_CHALLENGE] = _CHALLENGE_SOURCES[provider]
    return sources


#: The source of each provider's other cells: ``"*"`` for any cell whose declaration
#: names none, else by kind (or :data:`TURNSTILE_CHALLENGE`). Withdrawn cells cite
#: :data:`WITHDRAWN`.
SOURCES: Final[Mapping[Provider, Mapping[str, str]]] = {p: _sources(p) for p in PROVIDERS}

CellState = Literal["offered", "not offered", "withdrawn"]


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell of the catalogue: whether ``provider`` solves a kind, and who says so."""

    state: CellState
    source: str


#: Read from their bytes: a proxy has nothing to load, so it is dropped, never refused.
_NO_PROXY = (Image, Coordinates, Grid)


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


def _feature(captcha: Captcha) -> str:
    if isinstance(captcha, Turnstile) and captcha.challenge:
        return TURNSTILE_CHALLENGE
    return captcha.type


def withdrawal(provider: Provider, captcha: Captcha) -> str | None:
    """The source saying ``provider`` withdrew ``captcha``'s kind, or ``None``."""
    withdrawn = WITHDRAWN.get(provider, {})
    return withdrawn.get(_feature(captcha)) or withdrawn.get(captcha.type)


def offered_by(captcha: Captcha, providers: Collection[Provider] = PROVIDERS) -> list[Provider]:
    """Which of ``providers`` offer ``captcha``'s kind in some variant (proxied or not)."""
    return [
        provider
        for provider in providers
        if refusal(provider, captcha, proxied=False) is None
        or refusal(provider, captcha, proxied=True) is None
    ]


def refusal(provider: Provider, captcha: Captcha, *, proxied: bool = False) -> str | None:
    """Why ``provider`` cannot take ``captcha`` (through a proxy if ``proxied``), or
    ``None`` when it can."""
    what = captcha.what
    if isinstance(captcha, Turnstile) and captcha.challenge:
        what += " in challenge mode (pagedata)"
    source = withdrawal(provider, captcha)
    if source is not None:
        return f"provider {provider} withdrew {what} ({source})"
    if PROTOCOLS.get(provider) == "json":
        names = json_names(dialect_for(provider), captcha)
        if names is None:
            return (
                f"provider {provider} does not solve {what} "
                "(docs/PROVIDERS.md, type x provider matrix)"
            )
        condition = captcha.offer_condition(provider, proxied=proxied)
        if condition is not None:
            return f"provider {provider} {condition}"
        if isinstance(captcha, _NO_PROXY):
            return None
        if proxied and names.proxy is None:
            return f"provider {provider} does not solve {what} through a proxy"
        if not proxied and names.proxyless is None:
            return f"provider {provider} does not solve {what} without a proxy"
        return None
    feature = _feature(captcha)
    if feature not in CLASSIC_OFFERS.get(provider, frozenset()):
        return f"provider {provider} does not solve {what} (provider/offers.py, CLASSIC_OFFERS)"
    condition = captcha.offer_condition(provider, proxied=proxied)
    return None if condition is None else f"provider {provider} {condition}"


def check_offered(provider: Provider, captcha: Captcha, *, proxied: bool = False) -> None:
    """Raise :class:`~captcha_tasks.errors.InvalidTaskInput` (code ``TYPE_NOT_OFFERED``),
    naming the provider and the type, when ``provider`` does not offer ``captcha``."""
    reason = refusal(provider, captcha, proxied=proxied)
    if reason is not None:
        raise InvalidTaskInput(f"{reason}; nothing was sent", "TYPE_NOT_OFFERED")


def catalogue() -> dict[Provider, dict[str, Cell]]:
    """Per provider, per kind (and challenge mode): its state and its source, what the
    docs' matrix shows."""
    out: dict[Provider, dict[str, Cell]] = {}
    for provider, row in offer_matrix().items():
        sources = SOURCES[provider]
        cells: dict[str, Cell] = {}
        for feature, value in row.items():
            withdrawn = WITHDRAWN.get(provider, {}).get(feature)
            if withdrawn is not None:
                cells[feature] = Cell("withdrawn", withdrawn)
                continue
            state: CellState = "not offered" if value == "not offered" else "offered"
            cells[feature] = Cell(state, sources.get(feature, sources["*"]))
        out[provider] = cells
    return out


def offer_matrix() -> dict[Provider, dict[str, str]]:
    """Per provider, per kind (and challenge mode): how it is offered, for docs and
    ``captcha-tasks`` diagnostics. JSON: ``proxyless / proxy`` names (``-``: none)."""
    features = [*get_args(CaptchaType), TURNSTILE_CHALLENGE]
    out: dict[Provider, dict[str, str]] = {}
    for provider in PROVIDERS:
        row: dict[str, str] = {}
        for feature in features:
            if feature in WITHDRAWN.get(provider, {}):
                row[feature] = "not offered"
                continue
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
