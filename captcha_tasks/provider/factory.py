"""The provider the settings name, speaking its protocol (``settings.PROTOCOLS``)."""

from __future__ import annotations

from ..settings import PROTOCOLS, Settings
from .base import Provider
from .classic import SolverClient
from .json_client import JsonTaskClient

__all__ = ["make_provider"]


def make_provider(settings: Settings, *, timeout: float | None = None) -> Provider:
    """A :class:`SolverClient` for the classic providers (in.php / res.php), a
    :class:`JsonTaskClient` for the JSON task API ones. ``timeout`` overrides
    ``CAPTCHA_TASKS_HTTP_TIMEOUT`` for every call."""
    if PROTOCOLS[settings.provider] == "json":
        return JsonTaskClient.from_settings(settings, timeout=timeout)
    if timeout is None:
        return SolverClient.from_settings(settings)
    return SolverClient.from_settings(settings, timeout=timeout)
