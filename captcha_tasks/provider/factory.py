"""The provider the settings name, speaking its protocol (``settings.PROTOCOLS``)."""

from __future__ import annotations

from ..settings import PROTOCOLS, Settings
from ..settings.providers import ProviderConfig
from .base import Provider
from .classic import SolverClient
from .json_client import JsonTaskClient

__all__ = ["make_provider"]


def make_provider(
    settings: Settings, config: ProviderConfig | None = None, *, timeout: float | None = None
) -> Provider:
    """The client of configured provider ``config`` (default: the preferred one): a
    :class:`SolverClient` for the classic providers (in.php / res.php), a
    :class:`JsonTaskClient` for the JSON task API ones. ``timeout`` overrides
    ``CAPTCHA_TASKS_HTTP_TIMEOUT`` for every call."""
    config = config or settings.provider_config()
    if PROTOCOLS[config.protocol] == "json":
        return JsonTaskClient.from_settings(settings, config, timeout=timeout)
    if timeout is None:
        return SolverClient.from_settings(settings, config)
    return SolverClient.from_settings(settings, config, timeout=timeout)
