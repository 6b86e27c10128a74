"""Reading errors out of JSON-task-API answers: the ``errorCode`` of a body, or the
HTTP status when the body has none (docs/PROVIDERS.md §6, D1, D2, D19).

Callers pass text with the API key already masked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import (
    ClientError,
    InsufficientFunds,
    InvalidApiKey,
    ProviderUnavailable,
    RateLimited,
    SolverError,
)
from .json_dialects import NOT_READY_CODES, UNKNOWN_RULE, JsonDialect
from .unreadable import EMPTY_ANSWER, clean, snippet, unreadable

__all__ = ["http_error", "payload_error", "unexpected"]


def payload_error(dialect: JsonDialect, payload: Mapping[str, Any]) -> SolverError | None:
    """The typed error an answer's ``errorCode`` names, or ``None`` if it names none.

    Dispatch is on ``errorCode`` only; an ``errorId`` other than 0 without a code is an
    unknown error (``ERROR_ID_<n>``). A "not ready" code is no error (CapMonster)."""
    code = payload.get("errorCode")
    if isinstance(code, str) and code.strip():
        code = code.strip()[:64]
        if code in NOT_READY_CODES:
            return None
        rule = dialect.rule(code)
    else:
        error_id = payload.get("errorId")
        # Only a number names an error: {"errorId": "banana"} is garbage, not an error.
        if isinstance(error_id, str) and error_id.strip().isdigit():
            error_id = int(error_id)
        if isinstance(error_id, bool) or not isinstance(error_id, int) or error_id == 0:
            return None
        code, rule = f"ERROR_ID_{str(error_id)[:16]}", UNKNOWN_RULE
    message = f"{code}: {rule.meaning} ({dialect.name})"
    described = payload.get("errorDescription")
    if isinstance(described, str) and described.strip():
        message += f" (provider says: {clean(described)})"
    return rule.error(message, code, rule.retry_after)


def http_error(dialect: JsonDialect, status: int, text: str) -> SolverError:
    """The error for a non-2xx answer whose body names no ``errorCode``."""
    code = f"HTTP_{status}"
    detail = f"HTTP {status} from {dialect.name}: {snippet(text)}"
    if status == 401:
        return InvalidApiKey(f"{detail}; the API key was refused", code)
    if status == 403 and dialect.name == "capsolver":  # its SDK: insufficient credit
        return InsufficientFunds(detail, code, 60.0)
    if status == 429:
        return RateLimited(detail, code, 10.0)
    if 300 <= status < 400 or status in (404, 405, 410, 414):
        # A wrong solver URL: retrying cannot help.
        return ClientError(f"{detail}; check CAPTCHA_TASKS_SOLVER_URL", code)
    # 5xx (CapMonster answers 500 while solving), 503 overload, and the rest: transient.
    return ProviderUnavailable(detail, code, 10.0)


def unexpected(method: str, text: str, shown: str = "") -> ProviderUnavailable:
    """An answer that is not what ``method`` answers (HTML, malformed JSON, no fields);
    ``shown``: what else to say of it (status, content type, size)."""
    if not text.strip():
        return unreadable(f"{method}: an empty body {shown}".strip(), "", code=EMPTY_ANSWER)
    html = text.lstrip().startswith("<")
    return unreadable(f"{method}: unexpected answer", f"{snippet(text)} {shown}".strip(), html=html)
