"""Which provider solves which captcha kind (and Turnstile's challenge mode, and which
through a proxy): the one place the solve tasks and both clients ask.

For the JSON providers the answer is read from their dialects (a kind with task type
names is offered; a proxied variant needs a proxy name), so there is no second table
to drift. For the classic ones it is :data:`CLASSIC_OFFERS`. A kind a provider has
withdrawn is in :data:`WITHDRAWN` with the public source that says so: refused before
anything is sent, even where a dialect still knows its task names (what a stale
catalogue would send). Every cell's source is in :data:`SOURCES` (:func:`catalogue`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Final, Literal, get_args

from ..errors import InvalidTaskInput
from ..settings import PROTOCOLS, PROVIDERS, Provider
from .captchas import (
    Altcha,
    Captcha,
    CaptchaType,
    Coordinates,
    DataDome,
    FriendlyCaptcha,
    Grid,
    Image,
    RecaptchaV2,
    Turnstile,
)
from .json_dialects import JsonDialect, TaskNames, dialect_for

__all__ = [
    "CLASSIC_OFFERS",
    "SOURCES",
    "TURNSTILE_CHALLENGE",
    "WITHDRAWN",
    "Cell",
    "catalogue",
    "check_offered",
    "json_names",
    "offer_matrix",
    "offered_by",
    "refusal",
    "withdrawal",
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
    "captchaai": _EXISTING | {"grid"},
}

#: Kinds (or :data:`TURNSTILE_CHALLENGE`) a provider has withdrawn: refused, whatever its
#: dialect or :data:`CLASSIC_OFFERS` still name, with the public source that says so.
WITHDRAWN: Final[Mapping[Provider, Mapping[str, str]]] = {
    "2captcha": {
        "hcaptcha": "2captcha/2captcha-python#128, Furry/2captcha#55 (gone from 2Captcha's "
        "docs), Furry/2captcha#58 (in.php answers ERROR_METHOD_CALL)",
    },
    "2captcha-v2": {
        "hcaptcha": "2captcha/2captcha-python#128, Furry/2captcha#55 (gone from "
        "2captcha.com/api-docs), NopeCHALLC/nopecha-python#37",
    },
    "anticaptcha": {
        "hcaptcha": "anti-captcha/anticaptcha-python#6 (createTask answers "
        "ERROR_TASK_TYPE_DEPRECATED, 2025-02)",
    },
    "capsolver": {
        "hcaptcha": 'capsolver/capsolver-python#15 ("We do not support hcaptcha", 2025-10)',
        "funcaptcha": "docs.capsolver.com/guide/api-support (no FunCaptcha in the list), "
        "d60/twikit#234",
    },
    "capmonster": {
        "hcaptcha": "CapMonsterCloud/capmonster-python-captcha-solver#30 (createTask answers "
        "ERROR_TASK_NOT_SUPPORTED; its hCaptcha docs page is gone)",
    },
}

#: The source of each provider's other cells: ``"*"`` for any cell not named, else by
#: kind (or :data:`TURNSTILE_CHALLENGE`). Withdrawn cells cite :data:`WITHDRAWN`.
SOURCES: Final[Mapping[Provider, Mapping[str, str]]] = {
    "captchaai": {
        "*": "pypi.org/project/captchaai (v1.0.1), docs.captchaai.com",
        "hcaptcha": "unverified: not in CaptchaAI's own lists (docs.captchaai.com, pypi "
        "captchaai); no withdrawal found either",
        "geetest_v4": "blog.captchaai.com/captchaai-api-quick-reference-card "
        "(method=geetest&version=4: another encoding, not built)",
        TURNSTILE_CHALLENGE: "blog.captchaai.com/cloudflare-waf-rules-trigger-captcha "
        "(cloudflare_challenge: another product)",
        "mtcaptcha": "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        "prosopo": "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        "friendly_captcha": "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        "grid": "pypi captchaai v1.0.1 (Grid/BLS in its list of types), blog.captchaai.com/"
        "how-grid-image-captchas-work (tiles numbered from 1); in.php as 2Captcha's",
        "altcha": "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
        "datadome": "not in CaptchaAI's lists (docs.captchaai.com, pypi captchaai v1.0.1)",
    },
    "2captcha": {
        "*": "2captcha.com/2captcha-api, 2captcha/2captcha-python",
        "mtcaptcha": "2captcha/2captcha-python 2.1.2 mtcaptcha() (method=mt_captcha: "
        "sitekey, pageurl)",
        "prosopo": "2captcha/2captcha-python 2.1.2 prosopo() (method=prosopo: sitekey, pageurl)",
        "friendly_captcha": "2captcha/2captcha-python 2.1.2 friendly_captcha() "
        "(method=friendly_captcha: sitekey, pageurl)",
        "grid": "2captcha/2captcha-python 2.1.2 grid() (recaptcha=1, recaptcharows, "
        "recaptchacols, textinstructions; answer click:1/4/7)",
        "altcha": "2captcha/2captcha-python 2.1.2 altcha() (method=altcha: pageurl, "
        "challenge_url or challenge_json; the answer is the token)",
        "datadome": "2captcha/2captcha-python 2.1.2 datadome() (method=datadome: captcha_url, "
        "pageurl, userAgent, proxy: all required), 2captcha/2captcha-php examples/datadome.php",
    },
    "2captcha-v2": {
        "*": "2captcha.com/api-docs/create-task",
        "mtcaptcha": "2captcha.com/api-docs/mtcaptcha (MtCaptchaTaskProxyless, MtCaptchaTask)",
        "prosopo": "2captcha.com/api-docs/prosopo-procaptcha (ProsopoTaskProxyless, ProsopoTask)",
        "friendly_captcha": "2captcha.com/api-docs/friendly-captcha "
        "(FriendlyCaptchaTaskProxyless, FriendlyCaptchaTask; 2captcha/2captcha-javascript)",
        "grid": "2captcha.com/api-docs/grid (GridTask: body, rows, columns, comment; "
        '"1 is top left tile"; its recaptcha-grid page says 0: tiles read as 1-based)',
        "altcha": "2captcha.com/api-docs/altcha (AltchaTaskProxyless, AltchaTask: websiteURL, "
        "challengeURL or challengeJSON; the page shows no solution example: solution.token "
        "assumed, as at Anti-Captcha)",
        "datadome": "2captcha.com/api-docs/datadome-slider-captcha (DataDomeSliderTask: "
        "websiteURL, captchaUrl, userAgent, proxy fields; no proxyless variant), "
        "2captcha/2captcha-javascript",
    },
    "anticaptcha": {
        "*": "anti-captcha.com/apidoc/task-types, anti-captcha/anticaptcha-python",
        "mtcaptcha": "not in anti-captcha.com/apidoc/task-types nor anticaptchaofficial 1.0.72",
        "prosopo": "anti-captcha.com/apidoc/task-types/ProsopoTaskProxyless and /ProsopoTask, "
        "anticaptchaofficial 1.0.72 prosopoproxyless / prosopoproxyon",
        "friendly_captcha": "anti-captcha.com/apidoc/task-types/FriendlyCaptchaTaskProxyless "
        "and /FriendlyCaptchaTask (websiteURL, websiteKey), anticaptchaofficial 1.0.72 "
        "friendlycaptchaproxyless / friendlycaptchaproxyon",
        "grid": "not in anti-captcha.com/apidoc/task-types, anticaptchaofficial 1.0.72 nor "
        "python-anticaptcha 2.0.0 tasks (only a legacy get_cells_numbers reader)",
        "altcha": "anti-captcha.com/apidoc/task-types/AltchaTaskProxyless and /AltchaTask "
        "(websiteURL, challengeURL or challengeJSON; solution token), anticaptchaofficial "
        "1.0.72 altchaproxyless / altchaproxyon",
        "datadome": "not in anticaptchaofficial 1.0.72 nor python-anticaptcha 2.0.0 (no DataDome "
        "task in either official SDK)",
    },
    "capsolver": {
        "*": "docs.capsolver.com/guide/api-support",
        TURNSTILE_CHALLENGE: "docs.capsolver.com/guide/captcha/cloudflare_challenge "
        "(AntiCloudflareTask: another product)",
        "mtcaptcha": "docs.capsolver.com/guide/captcha/MtCaptcha (MtCaptchaTaskProxyLess, "
        "MtCaptchaTask), capsolver 1.0.7 SUPPORT_TASK_TYPE",
        "prosopo": "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 "
        "SUPPORT_TASK_TYPE",
        "friendly_captcha": "docs.capsolver.com/guide/captcha/FriendlyCaptcha "
        "(FriendlyCaptchaTaskProxyless only; not yet in capsolver 1.0.7 SUPPORT_TASK_TYPE)",
        "grid": "docs.capsolver.com/guide/recognition/ReCaptchaClassification "
        "(ReCaptchaV2Classification: image, question as a /m/ id; answered at createTask; "
        "objects from 0), capsolver 1.0.7 check.py",
        "altcha": "not in docs.capsolver.com/guide/api-support nor capsolver 1.0.7 "
        "SUPPORT_TASK_TYPE",
        "datadome": "docs.capsolver.com/guide/captcha/datadome (DatadomeSliderTask: captchaUrl "
        "with t=fe, userAgent, proxy: all required; t=bv: the IP is banned), capsolver 1.0.7 "
        "SUPPORT_TASK_TYPE DataDomeSliderTask",
    },
    "capmonster": {
        "*": "docs.capmonster.cloud/docs/captchas/",
        "mtcaptcha": "docs.capmonster.cloud/docs/captchas/mtcaptcha-task (MTCaptchaTask, "
        "pageAction, isInvisible), capmonstercloudclient 4.3.1 MTCaptchaRequest",
        "prosopo": "docs.capmonster.cloud/docs/captchas/prosopo-task (ProsopoTask), "
        "capmonstercloudclient 4.3.1 ProsopoTaskRequest",
        "friendly_captcha": "capmonstercloudclient 4.3.1 FriendlyCustomTaskRequest "
        "(CustomTask, class friendly, metadata.apiGetLib: the widget script's URL, "
        "required)",
        "grid": "capmonstercloudclient 4.3.1 RecaptchaComplexImageTaskRequest "
        "(ComplexImageTask, class recaptcha, imagesBase64 of one image, metadata Grid and "
        "Task or TaskDefinition); answer as one boolean per tile (docs.capmonster.cloud "
        "recaptcha-click, not re-read here)",
        "altcha": "capmonstercloudclient 4.3.1 AltchaCustomTaskRequest (CustomTask, class "
        "altcha, websiteKey may be empty, metadata: challenge, iterations, salt, signature, "
        "all strings; no algorithm field, so SHA-256 only)",
        "datadome": "docs.capmonster.cloud/docs/captchas/datadome (CustomTask, class DataDome, "
        "metadata.captchaUrl, metadata.datadomeCookie), capmonstercloudclient 4.3.1 "
        "DataDomeCustomTaskRequest (own proxy and datadomeCookie required)",
    },
}

CellState = Literal["offered", "not offered", "withdrawn"]


@dataclasses.dataclass(frozen=True)
class Cell:
    """One cell of the catalogue: whether ``provider`` solves a kind, and who says so."""

    state: CellState
    source: str


#: Read from their bytes: a proxy has nothing to load, so it is dropped, never refused.
_NO_PROXY = (Image, Coordinates, Grid)
#: The grids CapSolver's and CapMonster Cloud's reCAPTCHA classification reads: 3x3,
#: 4x4 and the 1x1 of one replaced tile (capmonstercloudclient's metadata.Grid values).
_RECAPTCHA_GRIDS = frozenset({(1, 1), (3, 3), (4, 4)})


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
    what = f"{type(captcha).__name__} captchas"
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
        if isinstance(captcha, Grid):
            return _grid_refusal(provider, captcha, what)
        if isinstance(captcha, _NO_PROXY):
            return None
        if (
            isinstance(captcha, FriendlyCaptcha)
            and provider == "capmonster"
            and captcha.module_script_url is None
        ):
            # Its CustomTask tells v1 from v2 by the widget script's URL, required.
            return (
                f"provider {provider} solves {what} only with module_script_url (the "
                "widget script the page loads: metadata.apiGetLib)"
            )
        if (
            isinstance(captcha, Altcha)
            and provider == "capmonster"
            and captcha.challenge().algorithm != "SHA-256"
        ):
            # Its metadata has no algorithm field: the widget's default, SHA-256, only.
            return f"provider {provider} solves {what} with SHA-256 challenges only"
        if (
            isinstance(captcha, DataDome)
            and provider == "capmonster"
            and captcha.datadome_cookie is None
        ):
            # Its CustomTask takes the challenge's cookie with the captcha's URL, required.
            return (
                f"provider {provider} solves {what} only with datadome_cookie (the "
                "datadome cookie the challenged page set: metadata.datadomeCookie)"
            )
        if proxied and names.proxy is None:
            return f"provider {provider} does not solve {what} through a proxy"
        if not proxied and names.proxyless is None:
            return f"provider {provider} does not solve {what} without a proxy"
        return None
    feature = _feature(captcha)
    if feature not in CLASSIC_OFFERS.get(provider, frozenset()):
        return f"provider {provider} does not solve {what} (provider/offers.py, CLASSIC_OFFERS)"
    if isinstance(captcha, DataDome) and not proxied:
        # in.php's method=datadome takes a proxy, required (SOURCES).
        return f"provider {provider} does not solve {what} without a proxy"
    return None


def _grid_refusal(provider: Provider, captcha: Grid, what: str) -> str | None:
    """CapSolver and CapMonster Cloud classify reCAPTCHA grids only; CapSolver's question
    is an object id from its list, never the text."""
    if provider not in ("capsolver", "capmonster"):
        return None
    if (captcha.rows, captcha.cols) not in _RECAPTCHA_GRIDS:
        return (
            f"provider {provider} solves {what} of 3x3, 4x4 or 1x1 tiles only, not "
            f"{captcha.rows}x{captcha.cols}"
        )
    if provider == "capsolver" and not captcha.is_object_id:
        return (
            f"provider {provider} solves {what} only with reCAPTCHA's object id as the "
            "instruction (/m/..., its question list), not the text"
        )
    return None


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
