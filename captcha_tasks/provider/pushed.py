"""Answers a provider pushes to our callback URL, read as a poll would read them.

Two shapes arrive (docs/CALLBACKS.md): the classic ``pingback`` (``id`` and ``code``,
a form POST at 2Captcha, a query string at CaptchaAI), and the JSON task API's
``callbackUrl`` body, which is the getTaskResult answer (without ``taskId`` at some
providers). Either gives what :meth:`Provider.get` would have: an :class:`Answer`, an
error for this captcha, or None (still working).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..errors import SolverError
from ..settings import PROTOCOLS, Provider
from .answers import slot_answer
from .base import Polled
from .json_client import _answer, _failed
from .json_dialects import NOT_READY_CODES, dialect_for
from .json_errors import payload_error
from .protocol import _slot

__all__ = ["pushed_id", "read_pushed"]


def pushed_id(fields: Mapping[str, str], document: Mapping[str, Any] | None) -> str | None:
    """The provider's captcha id a callback names (None: it names none, as CapMonster's
    getTaskResult-shaped body)."""
    raw = fields.get("id") if document is None else document.get("taskId", document.get("id"))
    if raw is None or isinstance(raw, bool) or raw == "":
        return None
    return str(raw).strip()


def read_pushed(
    provider: Provider,
    captcha_id: str,
    fields: Mapping[str, str],
    document: Mapping[str, Any] | None,
) -> Polled:
    """What a callback for ``captcha_id`` at ``provider`` says. A body that is neither
    shape is this captcha's error (``ValueError``: the caller refuses the request)."""
    if document is not None:
        return _json(provider, captcha_id, document)
    code = fields.get("code")
    if code is None:
        raise ValueError("no code")
    classic: Provider = provider if PROTOCOLS[provider] == "classic" else "2captcha"
    slot = _slot(code.strip(), classic, ())
    if isinstance(slot, SolverError) or not isinstance(slot, str):
        return slot if isinstance(slot, SolverError) else None
    return slot_answer(captcha_id, slot)  # as in a batch read


def _json(provider: Provider, captcha_id: str, document: Mapping[str, Any]) -> Polled:
    name: Provider = provider if PROTOCOLS[provider] == "json" else "2captcha-v2"
    dialect = dialect_for(name)
    payload = dict(document)
    error = payload_error(dialect, payload)
    if error is not None:
        return error
    status = payload.get("status")
    if status in dialect.working or payload.get("errorCode") in NOT_READY_CODES:
        return None
    if status == "failed":
        return _failed(payload)
    if status != "ready":
        raise ValueError("not a getTaskResult answer")
    try:
        answer = _answer(captcha_id, payload)
    except SolverError as exc:
        return exc
    if answer is None:
        raise ValueError("a ready answer without a solution")
    return answer
