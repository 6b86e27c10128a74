"""Reading the provider's answers: one parser for every in.php / res.php call.

:func:`parse_response` turns an HTTP answer into a value (a captcha id, a token, a
GeeTest dict, a balance, ``OK_REPORT_RECORDED``), the :data:`NOT_READY` sentinel, or
raises the :class:`~captcha_tasks.errors.SolverError` subclass that
:data:`ERROR_TABLE` assigns to the provider's code. It accepts both wire forms
(``json=1`` and plain text) whatever was asked for, because providers do not always
honour ``json=1`` (``getbalance`` answers a bare decimal, proxies answer HTML).
"""

from __future__ import annotations

import dataclasses
import decimal
import enum
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

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
    SolverError,
)
from ..redaction import mask_secrets
from ..settings import Provider
from .unreadable import (
    EMPTY_ANSWER,
    HTML_RETRY,
    clean,
    context,
    decode,
    preview,
    snippet,
    unreadable,
    unreadable_body,
)

__all__ = [
    "DIALECTS",
    "ERROR_TABLE",
    "NOT_READY",
    "ErrorRule",
    "NotReady",
    "Parsed",
    "WithUserAgent",
    "error_for",
    "parse_many",
    "parse_response",
    "rule_for",
]


class NotReady(enum.Enum):
    """The captcha is still being solved (``CAPCHA_NOT_READY``): poll again later."""

    NOT_READY = "CAPCHA_NOT_READY"

    def __repr__(self) -> str:
        return "NOT_READY"


NOT_READY: Final = NotReady.NOT_READY


@dataclasses.dataclass(frozen=True)
class WithUserAgent:
    """An answer that came with the browser it was made in (json=1's ``useragent``)."""

    value: str | dict[str, Any] | list[Any]
    user_agent: str


#: What :func:`parse_response` returns: an id, token or balance; a dict (GeeTest) or list
#: (coordinates); either with the user agent where the provider sent one; or NOT_READY.
Parsed = str | dict[str, Any] | list[Any] | WithUserAgent | NotReady


@dataclasses.dataclass(frozen=True)
class ErrorRule:
    """How one provider code is raised: the error class and its suggested back-off."""

    error: type[SolverError]
    retry_after: float | None
    meaning: str


def _rules(
    error: type[SolverError], retry_after: float | None, meaning: str, *codes: str
) -> dict[str, ErrorRule]:
    return dict.fromkeys(codes, ErrorRule(error, retry_after, meaning))


#: Every error code of the classic API's documentation (2captcha.com/2captcha-api, "Error
#: handling"; CaptchaAI's is the same list, plus a few codes of its own), with the class to
#: raise and ``retry_after`` in unscaled seconds. ``ERROR_ZERO_BALANCE`` is missing on
#: purpose: it depends on the dialect (:data:`DIALECTS`).
ERROR_TABLE: Final[Mapping[str, ErrorRule]] = {
    **_rules(NoSlotAvailable, 5.0, "all threads of the plan are busy", "ERROR_NO_SLOT_AVAILABLE"),
    **_rules(
        InvalidApiKey,
        None,
        "the API key is wrong or has no plan",
        "ERROR_WRONG_USER_KEY",
        "ERROR_KEY_DOES_NOT_EXIST",
    ),
    **_rules(
        BadRequest,
        None,
        "the provider rejected the captcha's parameters",
        "ERROR_PAGEURL",
        "ERROR_GOOGLEKEY",
        "ERROR_WRONG_GOOGLEKEY",
        "ERROR_BAD_TOKEN_OR_PAGEURL",
        "ERROR_BAD_PARAMETERS",
    ),
    **_rules(
        BadImage,
        None,
        "the provider rejected the image",
        "ERROR_ZERO_CAPTCHA_FILESIZE",
        "ERROR_TOO_BIG_CAPTCHA_FILESIZE",
        "ERROR_WRONG_FILE_EXTENSION",
        "ERROR_IMAGE_TYPE_NOT_SUPPORTED",
        "ERROR_UPLOAD",
        "ERROR_CAPTCHAIMAGE_BLOCKED",
    ),
    **_rules(
        ProxyRejected,
        5.0,
        "the provider could not use the proxy: rotate it",
        "ERROR_BAD_PROXY",
        "ERROR_PROXY_CONNECTION_FAILED",
    ),
    **_rules(
        RateLimited,
        300.0,
        "this IP is banned after too many bad keys (about 5 min)",
        "IP_BANNED",
        "ERROR_IP_BANNED",
    ),
    **_rules(
        ProviderUnavailable,
        10.0,
        "the provider failed",
        "ERROR_SERVER_ERROR",
        "ERROR_INTERNAL_SERVER_ERROR",
    ),
    **_rules(
        CaptchaUnsolvable,
        None,
        "workers could not solve the captcha (not charged)",
        "ERROR_CAPTCHA_UNSOLVABLE",
        "ERROR_BAD_DUPLICATES",
    ),
    **_rules(
        ClientError,
        None,
        "the request was wrong (a client bug)",
        "ERROR_WRONG_CAPTCHA_ID",
        "ERROR_WRONG_ID_FORMAT",
        "ERROR_EMPTY_ACTION",
        "ERROR_NO_SUCH_CAPCHA_ID",
    ),
    # What 2Captcha's in.php answers for a method it withdrew (hCaptcha): resending fails
    # the same way.
    **_rules(
        BadRequest,
        None,
        "the provider does not take this method (a captcha type it withdrew)",
        "ERROR_METHOD_CALL",
    ),
    **_rules(
        RateLimited,
        10.0,
        "too many requests: the account is throttled",
        "MAX_USER_TURN",
        "ERROR_TOO_MUCH_REQUESTS",
    ),
    # 2Captcha's request-limit bans, with the ban durations its "Request limits" page gives.
    **_rules(RateLimited, 600.0, "10 min ban: too many NO_SLOT errors", "ERROR: 1001"),
    **_rules(RateLimited, 300.0, "5 min ban: too many ZERO_BALANCE errors", "ERROR: 1002"),
    **_rules(RateLimited, 30.0, "30 s ban: too many NO_SLOT errors (queue)", "ERROR: 1003"),
    **_rules(RateLimited, 600.0, "10 min IP ban: too many bad keys", "ERROR: 1004"),
    **_rules(RateLimited, 300.0, "5 min ban: too many res.php calls", "ERROR: 1005"),
}

#: Codes whose meaning depends on the provider.
DIALECTS: Final[Mapping[Provider, Mapping[str, ErrorRule]]] = {
    # CaptchaAI bills threads, not funds: its ERROR_ZERO_BALANCE means "no free thread".
    "captchaai": _rules(NoSlotAvailable, 5.0, "no free threads (CaptchaAI)", "ERROR_ZERO_BALANCE"),
    # Permanent for this captcha; 60 s is the pause 2Captcha asks for before trying again.
    "2captcha": _rules(
        InsufficientFunds, 60.0, "no funds on the account (2Captcha)", "ERROR_ZERO_BALANCE"
    ),
}

_UNKNOWN = ErrorRule(ClientError, None, "unknown provider error")

_NOT_READY_CODES = frozenset({"CAPCHA_NOT_READY", "CAPTCHA_NOT_READY"})
_NUMBERED_RE = re.compile(r"^ERROR:\s*(\d{1,6})\b\s*(.*)$", re.S)
_CODE_RE = re.compile(r"^(ERROR_[A-Z0-9_]{1,60}|IP_BANNED|MAX_USER_TURN)(?:[\s|:]+(.*))?$", re.S)
_DECIMAL_RE = re.compile(r"^-?\d+(?:\.\d+)?$")


def rule_for(code: str, provider: Provider = "captchaai") -> ErrorRule:
    """The rule for ``code`` in ``provider``'s dialect (unknown codes: :class:`ClientError`)."""
    return DIALECTS.get(provider, {}).get(code) or ERROR_TABLE.get(code) or _UNKNOWN


def error_for(
    code: str, provider: Provider = "captchaai", error_text: str | None = None
) -> SolverError:
    """The exception for a provider code; the message has the code and the provider's text."""
    rule = rule_for(code, provider)
    message = f"{code}: {rule.meaning}"
    if error_text:
        message += f" (provider says: {clean(error_text)})"
    return rule.error(message, code, rule.retry_after)


def parse_response(
    status_code: int,
    content_type: str,
    body: bytes | str,
    *,
    provider: Provider = "captchaai",
    redact: Iterable[str] = (),
    cut: bool = False,
) -> Parsed:
    """One in.php/res.php answer as a value or :data:`NOT_READY`; raises :class:`SolverError`.

    ``redact``: secrets (the API key) to mask if the provider echoes them back. Under a
    non-2xx status only an explicit error code is trusted; anything else raises an
    ``HTTP_<status>`` error. ``cut``: the transport stopped reading at its cap (a 2xx
    answer whose end was never seen is not read: ``ANSWER_TOO_BIG``, :mod:`.unreadable`).
    """
    size, ok, text = len(_bytes(body)), 200 <= status_code < 300, decode(body)
    try:
        if cut or text is None:
            raise _unreadable_body(status_code, content_type, _bytes(body), redact, cut)
        text = mask_secrets(text, redact)
        try:
            value = _parse_text(text, provider)
        except _Unrecognised as exc:
            if not ok:
                raise _http_error(status_code, snippet(text)) from None
            raise _with_context(exc.error, status_code, content_type, size) from None
        if not ok:
            raise _http_error(status_code, snippet(text))
        return value
    except SolverError as exc:
        raise _redacted(exc, redact) from None


def parse_many(
    status_code: int,
    content_type: str,
    body: bytes | str,
    count: int,
    *,
    provider: Provider = "captchaai",
    redact: Iterable[str] = (),
    cut: bool = False,
) -> list[str | NotReady | SolverError]:
    """The answer to ``action=get&ids=a,b,c``: one slot per id, in order.

    Each slot is the answer, :data:`NOT_READY`, or the error for that captcha alone
    (returned, not raised). An error for the whole request is raised (``cut``, and
    any unreadable answer, as :func:`parse_response` raises it).
    """
    text = decode(body)
    if cut or text is None:
        raise _unreadable_body(status_code, content_type, _bytes(body), redact, cut)
    text = mask_secrets(text, redact)
    parts: list[str] | None = None
    if 200 <= status_code < 300:
        if text.startswith("{"):
            payload = _json_object(text)
            request = payload.get("request") if payload else None
            if payload and _status(payload) == 1 and isinstance(request, str):
                parts = request.split("|")
        else:
            parts = text.split("|")
            if len(parts) == count + 1 and parts[0] == "OK":
                parts = parts[1:]
    if parts is None or len(parts) != count:
        # One answer for the whole request: an error (raised here), or nothing useful.
        whole = parse_response(status_code, content_type, text, provider=provider, redact=redact)
        if whole is NOT_READY:
            return [NOT_READY] * count
        error = _garbage(text, "expected one answer per id")
        raise _redacted(_with_context(error, status_code, content_type, len(body)), redact)
    return [_slot(part.strip(), provider, redact) for part in parts]


def _slot(part: str, provider: Provider, redact: Iterable[str]) -> str | NotReady | SolverError:
    if part in _NOT_READY_CODES:
        return NOT_READY
    if _is_error(part):
        code, error_text = _split_code(part)
        return _redacted(error_for(code, provider, error_text), redact)
    if not part:
        return unreadable("an empty answer for this id", "", code=EMPTY_ANSWER)
    return part


class _Unrecognised(Exception):
    def __init__(self, error: SolverError) -> None:
        super().__init__(str(error))
        self.error = error


def _parse_text(text: str, provider: Provider) -> Parsed:
    # Sniffed rather than read from Content-Type, which these PHP endpoints do not set
    # reliably (and a proxy's error page may claim anything).
    if not text:
        raise _Unrecognised(unreadable("an empty body", "", code=EMPTY_ANSWER))
    if text.startswith("<"):
        raise _Unrecognised(_garbage(text, "an HTML page"))
    if text.startswith("{"):
        return _parse_json(text, provider)
    return _parse_plain(text, provider)


def _parse_json(text: str, provider: Provider) -> Parsed:
    payload = _json_object(text)
    if payload is None:
        raise _Unrecognised(_garbage(text, "malformed JSON"))
    status, request = _status(payload), payload.get("request")
    error_text = payload.get("error_text")
    error_text = error_text if isinstance(error_text, str) else None
    if isinstance(request, str):
        request = request.strip()
        if request in _NOT_READY_CODES:
            return NOT_READY
        # An exact code is an error whatever the status says: tokens never look like one.
        if _is_error(request):
            raise _code_error(request, provider, error_text)
    if status == 1:
        if isinstance(request, bool) or request is None or request == "":
            raise _Unrecognised(_garbage(text, "status 1 without an answer"))
        if isinstance(request, int | decimal.Decimal):
            return str(request)  # live CaptchaAI answers ids as JSON integers
        points = isinstance(request, list) and all(isinstance(i, dict) for i in request)
        if isinstance(request, str | dict) or (request and points):  # points: coordinates
            agent = payload.get("useragent")
            return WithUserAgent(request, agent) if isinstance(agent, str) and agent else request
    if status == 0 and isinstance(request, str) and request.startswith("ERROR"):
        raise error_for(clean(request)[:64], provider, error_text)  # e.g. "ERROR" alone
    raise _Unrecognised(_garbage(text, "an unexpected JSON answer"))


def _parse_plain(text: str, provider: Provider) -> Parsed:
    if text in _NOT_READY_CODES:
        return NOT_READY
    if text.startswith("OK|"):
        answer = text[3:]  # answers may contain "|": keep everything after the first
        if not answer:
            raise _Unrecognised(_garbage(text, "OK without an answer"))
        if answer.startswith("{"):
            geetest = _json_object(answer)
            if geetest is not None:
                return geetest
        return answer
    if text == "OK_REPORT_RECORDED" or _DECIMAL_RE.match(text):
        return text
    if _is_error(text):
        code, error_text = _split_code(text)
        raise error_for(code, provider, error_text)
    raise _Unrecognised(_garbage(text, "an unrecognised answer"))


def _is_error(text: str) -> bool:
    return bool(_NUMBERED_RE.match(text) or _CODE_RE.match(text))


def _split_code(text: str) -> tuple[str, str | None]:
    numbered = _NUMBERED_RE.match(text)
    if numbered:
        return f"ERROR: {int(numbered.group(1))}", numbered.group(2).strip() or None
    match = _CODE_RE.match(text)
    assert match is not None  # callers check _is_error first
    return match.group(1), (match.group(2) or "").strip() or None


def _code_error(request: str, provider: Provider, error_text: str | None) -> SolverError:
    code, inline_text = _split_code(request)
    return error_for(code, provider, error_text or inline_text)


def _status(payload: Mapping[str, Any]) -> int | None:
    status = payload.get("status")
    if isinstance(status, bool):
        return None
    if isinstance(status, int) or (isinstance(status, str) and status.strip() in ("0", "1")):
        return int(status)
    return None


def _json_object(text: str) -> dict[str, Any] | None:
    try:
        # Decimals keep a balance's digits exact ("12.3400" stays 12.3400).
        value = json.loads(text, parse_float=decimal.Decimal)
    except ValueError:  # JSONDecodeError, and RecursionError-free for our small bodies
        return None
    return value if isinstance(value, dict) else None


def _http_error(status_code: int, shown: str) -> SolverError:
    """The error of a non-2xx answer without a code; ``shown``: its snippet or preview."""
    code = f"HTTP_{status_code}"
    detail = f"HTTP {status_code} from the provider: {shown}"
    if status_code == 429:
        return RateLimited(detail, code, 10.0)
    if 300 <= status_code < 400 or status_code in (404, 405, 410, 414):
        # A wrong solver URL: retrying cannot help (and redirects are not followed,
        # since a 302 would turn the POST into a GET without the key).
        return ClientError(f"{detail}; check CAPTCHA_TASKS_SOLVER_URL", code)
    return ProviderUnavailable(detail, code, HTML_RETRY)


def _unreadable_body(
    status: int, content_type: str, body: bytes, redact: Iterable[str], cut: bool
) -> SolverError:
    if not 200 <= status < 300:  # the status says it all
        return _http_error(status, preview(body, redact))
    return unreadable_body(status, content_type, body, redact, cut=cut)


def _with_context(exc: SolverError, status: int, content_type: str, size: int) -> SolverError:
    shown = context(status, content_type, size)
    return type(exc)(f"{exc.message} {shown}", exc.code, exc.retry_after)


def _garbage(text: str, what: str) -> ProviderUnavailable:
    return unreadable(what, snippet(text), html=text.startswith("<"))


def _bytes(body: bytes | str) -> bytes:
    return body if isinstance(body, bytes) else body.encode("utf-8", "replace")


def _redacted(exc: SolverError, secrets: Iterable[str]) -> SolverError:
    message = mask_secrets(exc.message, secrets)
    if message == exc.message:
        return exc
    return type(exc)(message, exc.code, exc.retry_after)
