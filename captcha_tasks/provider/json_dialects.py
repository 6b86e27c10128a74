"""What differs between the providers that speak the JSON task API (createTask /
getTaskResult): one frozen :class:`JsonDialect` per provider, from docs/PROVIDERS.md.

A dialect says which task type names it takes for each captcha type (with and
without a proxy), how a proxy is written, which report methods exist, which statuses
mean "still working", and which error class each ``errorCode`` is. Errors are read
from ``errorCode`` only: CapMonster and CapSolver send ``errorId: 1`` for every error
(PROVIDERS.md D1). The field mapping of the tasks themselves is :mod:`.json_tasks`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final, Literal, get_args

from ..errors import (
    BadImage,
    BadRequest,
    CaptchaUnsolvable,
    ClientError,
    InsufficientFunds,
    InvalidApiKey,
    NoSlotAvailable,
    ProviderUnavailable,
    ProxyRejected,
    RateLimited,
)
from ..settings import Provider
from .captchas import CAPTCHA_CLASSES, CaptchaType
from .kind import TaskNames
from .protocol import ErrorRule, _rules  # one builder of error-table rows for both protocols

__all__ = [
    "DIALECTS",
    "JSON_ERRORS",
    "NOT_READY_CODES",
    "UNKNOWN_RULE",
    "JsonDialect",
    "ProxyEncoding",
    "TaskNames",
    "dialect_for",
]

#: ``fields``: proxyType / proxyAddress / proxyPort / proxyLogin / proxyPassword;
#: ``string``: one ``proxy`` field, ``type:host:port[:login:password]`` (CapSolver).
ProxyEncoding = Literal["fields", "string"]


#: Every ``errorCode`` PROVIDERS.md §6 lists, with the class to raise and the unscaled
#: back-off. One table serves the four dialects: no code means two things across them.
JSON_ERRORS: Final[Mapping[str, ErrorRule]] = {
    # Overload codes feed the provider-limit learning, as ERROR_NO_SLOT_AVAILABLE does.
    **_rules(
        NoSlotAvailable,
        5.0,
        "no free worker at the provider",
        "ERROR_NO_SLOT_AVAILABLE",
        "ERROR_SERVICE_UNAVALIABLE",
        "ERROR_SERVICE_UNAVAILABLE",
    ),
    **_rules(
        InsufficientFunds,
        60.0,
        "no funds on the account",
        "ERROR_ZERO_BALANCE",
        "ERROR_SETTLEMENT_FAILED",
    ),
    **_rules(
        InvalidApiKey,
        None,
        "the API key is wrong or refused",
        "ERROR_KEY_DOES_NOT_EXIST",
        "ERROR_KEY_DENIED_ACCESS",
        "ERROR_WRONG_USER_KEY",
    ),
    # An allowlist on the account that excludes this address: waiting does not help.
    **_rules(
        InvalidApiKey, None, "this address is not allowed to use the key", "ERROR_IP_NOT_ALLOWED"
    ),
    **_rules(
        CaptchaUnsolvable,
        None,
        "workers could not solve the captcha",
        "ERROR_CAPTCHA_UNSOLVABLE",
        "ERROR_TASK_TIMEOUT",
        "ERROR_RECAPTCHA_TIMEOUT",
        "ERROR_BAD_DUPLICATES",
    ),
    **_rules(
        ClientError,
        None,
        "no such task (unknown, or its result expired)",
        "ERROR_NO_SUCH_CAPCHA_ID",
        "WRONG_CAPTCHA_ID",
        "ERROR_WRONG_CAPTCHA_ID",
        "ERROR_TASKID_INVALID",
        "ERROR_TASK_NOT_FOUND",
    ),
    **_rules(
        RateLimited,
        10.0,
        "too many requests: the account is throttled",
        "ERROR_TOO_MUCH_REQUESTS",
        "ERROR_RATE_LIMIT",
    ),
    **_rules(
        RateLimited,
        300.0,
        "this address or key is blocked for a while",
        "ERROR_IP_BLOCKED",
        "ERROR_IP_BANNED",
        "ERROR_KEY_TEMP_BLOCKED",
    ),
    **_rules(
        BadRequest,
        None,
        "the provider rejected the task's parameters",
        "ERROR_TASK_ABSENT",
        "ERROR_NO_SUCH_METHOD",
        "ERROR_INVALID_TASK_DATA",
        "ERROR_BAD_REQUEST",
        "ERROR_BAD_PARAMETERS",
        "ERROR_RECAPTCHA_INVALID_SITEKEY",
        "ERROR_RECAPTCHA_INVALID_DOMAIN",
        "ERROR_TOKEN_EXPIRED",
        "ERROR_WRONG_USERAGENT",
        "ERROR_DOMAIN_NOT_ALLOWED",
        "ERROR_PROXY_MISSING",
        "ERROR_INCORRECT_SESSION_DATA",
    ),
    # A task type the provider does not take (any more): Anti-Captcha's answer for a
    # withdrawn type, CapMonster's and 2Captcha's for any type they do not solve.
    **_rules(
        BadRequest,
        None,
        "the provider does not solve this task type (withdrawn or never offered)",
        "ERROR_TASK_TYPE_DEPRECATED",
        "ERROR_TASK_NOT_SUPPORTED",
    ),
    **_rules(
        BadImage,
        None,
        "the provider rejected the image",
        "ERROR_ZERO_CAPTCHA_FILESIZE",
        "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
        "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
        "ERROR_INVALID_IMAGE",
        "ERROR_PARSE_IMAGE_FAIL",
    ),
    **_rules(
        ProxyRejected,
        5.0,
        "the provider could not use the proxy: rotate it",
        "ERROR_PROXY_CONNECT_REFUSED",
        "ERROR_PROXY_CONNECTION_FAILED",
        "ERROR_PROXY_BANNED",
        "ERROR_PROXY_NOT_AUTHORISED",
        "ERROR_PROXY_READ_TIMEOUT",
        "ERROR_PROXY_TIMEOUT",
        "ERROR_BAD_PROXY",
        "ERROR_PROXY_TRANSPARENT",
    ),
    **_rules(
        ProviderUnavailable,
        10.0,
        "the provider failed",
        "ERROR_SERVER_ERROR",
        "ERROR_INTERNAL_SERVER_ERROR",
    ),
}

#: An unknown code: permanent, like the classic table's default (a code we do not know
#: may mean the task is wrong, and resending a wrong task risks a ban).
UNKNOWN_RULE: Final = ErrorRule(ClientError, None, "unknown provider error")

#: ``errorCode`` values that mean "not ready yet" rather than an error (CapMonster).
NOT_READY_CODES: Final = frozenset({"CAPTCHA_NOT_READY", "CAPCHA_NOT_READY"})


@dataclasses.dataclass(frozen=True)
class JsonDialect:
    """One JSON-task-API provider's differences (docs/PROVIDERS.md §1, §3, §5, §6)."""

    name: Provider
    #: Task type names per captcha type, from each kind's declaration; a type missing
    #: here is not offered.
    task_types: Mapping[CaptchaType, TaskNames]
    #: reCAPTCHA v2 Enterprise's names (``RecaptchaV2.enterprise``).
    enterprise_v2: TaskNames
    proxy_encoding: ProxyEncoding
    #: Report methods by captcha type; a type missing here is not reported (no request).
    report_incorrect: Mapping[CaptchaType, str]
    report_correct: Mapping[CaptchaType, str]
    #: Whether reports carry ``result: {invalid: ...}`` (CapSolver's ``feedbackTask``).
    report_result: bool = False
    #: reCAPTCHA v3 Enterprise's own names where it has some; else ``isEnterprise: true``.
    enterprise_v3: TaskNames | None = None
    #: getTaskResult statuses meaning "still working".
    working: frozenset[str] = frozenset({"processing"})
    #: Codes whose meaning differs from :data:`JSON_ERRORS` at this provider.
    error_overrides: Mapping[str, ErrorRule] = dataclasses.field(default_factory=dict)
    #: Whether Turnstile's challenge mode (``pagedata``) is offered by the Turnstile types.
    turnstile_challenge: bool = True

    def rule(self, code: str) -> ErrorRule:
        """The rule for ``errorCode`` ``code`` (unknown codes: :data:`UNKNOWN_RULE`)."""
        return self.error_overrides.get(code) or JSON_ERRORS.get(code) or UNKNOWN_RULE


def _task_types(provider: Provider) -> dict[CaptchaType, TaskNames]:
    """The task names the kinds' declarations give ``provider`` (offered ones, and withdrawn
    ones that still have names: a stale catalogue's, refused before anything is sent)."""
    offers = {kind: cls.offers[provider] for kind, cls in CAPTCHA_CLASSES.items()}
    return {kind: offer.names for kind, offer in offers.items() if offer.names is not None}


#: Every kind: 2Captcha's reports take any task.
_ALL_KINDS: tuple[CaptchaType, ...] = get_args(CaptchaType)

TWOCAPTCHA_V2: Final = JsonDialect(
    name="2captcha-v2",
    task_types=_task_types("2captcha-v2"),
    enterprise_v2=TaskNames("RecaptchaV2EnterpriseTaskProxyless", "RecaptchaV2EnterpriseTask"),
    proxy_encoding="fields",
    # 2Captcha's reports take any task: one method each way.
    report_incorrect=dict.fromkeys(_ALL_KINDS, "reportIncorrect"),
    report_correct=dict.fromkeys(_ALL_KINDS, "reportCorrect"),
)

ANTICAPTCHA: Final = JsonDialect(
    name="anticaptcha",
    task_types=_task_types("anticaptcha"),
    enterprise_v2=TaskNames("RecaptchaV2EnterpriseTaskProxyless", "RecaptchaV2EnterpriseTask"),
    proxy_encoding="fields",
    report_incorrect={
        "recaptcha_v2": "reportIncorrectRecaptcha",
        "recaptcha_v3": "reportIncorrectRecaptcha",
        "hcaptcha": "reportIncorrectHcaptcha",
        "image": "reportIncorrectImageCaptcha",
    },
    report_correct={
        "recaptcha_v2": "reportCorrectRecaptcha",
        "recaptcha_v3": "reportCorrectRecaptcha",
    },
)

_CAPSOLVER_TYPES = _task_types("capsolver")

CAPSOLVER: Final = JsonDialect(
    name="capsolver",
    task_types=_CAPSOLVER_TYPES,
    enterprise_v2=TaskNames("ReCaptchaV2EnterpriseTaskProxyLess", "ReCaptchaV2EnterpriseTask"),
    proxy_encoding="string",
    # feedbackTask takes any of its tasks.
    report_incorrect=dict.fromkeys(_CAPSOLVER_TYPES, "feedbackTask"),
    report_correct=dict.fromkeys(_CAPSOLVER_TYPES, "feedbackTask"),
    report_result=True,
    enterprise_v3=TaskNames("ReCaptchaV3EnterpriseTaskProxyLess", "ReCaptchaV3EnterpriseTask"),
    working=frozenset({"processing", "idle"}),
    # Its challenge pages are AntiCloudflareTask, another product (PROVIDERS.md D7).
    turnstile_challenge=False,
)

CAPMONSTER: Final = JsonDialect(
    name="capmonster",
    # Current docs: one type per captcha, proxy fields optional (PROVIDERS.md D4).
    task_types=_task_types("capmonster"),
    enterprise_v2=TaskNames("RecaptchaV2EnterpriseTask", "RecaptchaV2EnterpriseTask"),
    proxy_encoding="fields",
    report_incorrect={
        **dict.fromkeys(
            ("recaptcha_v2", "recaptcha_v3", "turnstile", "geetest"), "reportIncorrectTokenCaptcha"
        ),
        "image": "reportIncorrectImageCaptcha",
    },
    report_correct={},
)

DIALECTS: Final[Mapping[Provider, JsonDialect]] = {
    dialect.name: dialect for dialect in (TWOCAPTCHA_V2, ANTICAPTCHA, CAPSOLVER, CAPMONSTER)
}


def dialect_for(provider: Provider) -> JsonDialect:
    """The dialect of a JSON provider; :class:`KeyError` for a classic one."""
    return DIALECTS[provider]
