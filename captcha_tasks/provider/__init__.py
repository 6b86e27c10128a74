"""Captcha providers: the :class:`Provider` interface the engine talks to, the captcha
types, the classic in.php / res.php implementation (:class:`SolverClient`), the JSON
task API one (:class:`JsonTaskClient`), and :func:`make_provider`, which picks by settings.

Plain code with no Celery inside::

    client = make_provider(get_settings())
    captcha_id = client.submit(RecaptchaV2(sitekey, pageurl))
    answer = client.get(captcha_id)  # None while not ready
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from . import captchas
from .base import Answer, Polled, Provider
from .captchas import *  # noqa: F403  (every captcha kind, and its registry)
from .kind import Offer, TaskNames, Timing
from .offers import check_offered, offer_matrix, refusal
from .protocol import (
    ERROR_TABLE,
    NOT_READY,
    ErrorRule,
    NotReady,
    error_for,
    parse_response,
    rule_for,
)

if TYPE_CHECKING:
    from .classic import SolverClient
    from .factory import make_provider
    from .json_client import JsonTaskClient
    from .transport import close_shared_session, make_session, shared_session

#: The HTTP clients and what builds them, imported on first use: code that only
#: describes captchas (a caller checking a task's arguments) loads no HTTP stack.
_LAZY = {
    "SolverClient": "classic",
    "make_provider": "factory",
    "JsonTaskClient": "json_client",
    "close_shared_session": "transport",
    "make_session": "transport",
    "shared_session": "transport",
}

__getattr__ = lazy_exports(__name__, _LAZY, globals())


__all__ = [
    "ERROR_TABLE",
    "NOT_READY",
    "Answer",
    "ErrorRule",
    "JsonTaskClient",
    "NotReady",
    "Offer",
    "Polled",
    "Provider",
    "SolverClient",
    "TaskNames",
    "Timing",
    "check_offered",
    "close_shared_session",
    "error_for",
    "make_provider",
    "make_session",
    "offer_matrix",
    "parse_response",
    "refusal",
    "rule_for",
    "shared_session",
    *captchas.__all__,
]
