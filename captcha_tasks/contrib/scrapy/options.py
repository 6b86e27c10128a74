"""The integration's Scrapy settings, the reactor it needs, and which hosts it handles.

Scrapy settings (``settings.py`` of the Scrapy project, ``custom_settings``, ``-s``) only
say how the *crawl* uses the cluster. What the cluster is (its Redis, the allowlist, the
solver) comes from the environment, exactly as for every worker
(:func:`captcha_tasks.settings.get_settings`): a crawl and the workers must agree on it,
and one place to set it is how they do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import ConfigurationError, TargetNotAllowed
from ...session.pages import check_url
from ...settings import Settings

__all__ = ["SETTING_NAMES", "Options", "allowlisted", "require_asyncio"]

#: Scrapy setting -> (Options field, default, meaning); the table of docs/SCRAPY.md.
SETTING_NAMES: dict[str, tuple[str, object, str]] = {
    "CAPTCHA_TASKS_ENABLED": ("enabled", True, "false: both middlewares stay out"),
    "CAPTCHA_TASKS_SOLVE_TIMEOUT": (
        "solve_timeout",
        300.0,
        "seconds a challenged response waits for the cluster's fetch_page",
    ),
    "CAPTCHA_TASKS_MAX_REISSUES": (
        "max_reissues",
        2,
        "times one request is re-issued after a challenge before it is dropped",
    ),
}
#: Upper bounds that catch a unit mistake (milliseconds for seconds) at start-up.
MAX_SOLVE_TIMEOUT = 3600.0
MAX_REISSUES = 10


@dataclass(frozen=True)
class Options:
    """The ``CAPTCHA_TASKS_*`` Scrapy settings, checked."""

    enabled: bool = True
    solve_timeout: float = 300.0
    max_reissues: int = 2

    @classmethod
    def from_settings(cls, settings: Any) -> Options:
        """From a Scrapy ``Settings`` (or any mapping): :class:`ConfigurationError` names
        a bad value, or a ``CAPTCHA_TASKS_*`` name that is no Scrapy setting of ours
        (a typo, or a cluster variable such as ``CAPTCHA_TASKS_REDIS_URL`` put in
        ``settings.py`` where the cluster would never see it)."""
        _refuse_unknown(settings)
        enabled = _boolean(settings, "CAPTCHA_TASKS_ENABLED")
        timeout = _number(settings, "CAPTCHA_TASKS_SOLVE_TIMEOUT", float)
        if not 0 < timeout <= MAX_SOLVE_TIMEOUT:
            raise ConfigurationError(
                f"CAPTCHA_TASKS_SOLVE_TIMEOUT must be seconds in (0, {MAX_SOLVE_TIMEOUT:g}]"
                f", not {timeout!r}"
            )
        reissues = _number(settings, "CAPTCHA_TASKS_MAX_REISSUES", int)
        if not 0 <= reissues <= MAX_REISSUES:
            raise ConfigurationError(
                f"CAPTCHA_TASKS_MAX_REISSUES must be 0 to {MAX_REISSUES}, not {reissues!r}"
            )
        return cls(enabled=enabled, solve_timeout=float(timeout), max_reissues=int(reissues))


def _refuse_unknown(settings: Iterable[str]) -> None:
    unknown = sorted(
        name for name in settings if name.startswith("CAPTCHA_TASKS_") and name not in SETTING_NAMES
    )
    if unknown:
        raise ConfigurationError(
            f"{', '.join(unknown)}: not a Scrapy setting of captcha_tasks.contrib.scrapy "
            f"(those are {', '.join(SETTING_NAMES)}). The cluster's own configuration "
            "(CAPTCHA_TASKS_REDIS_URL, CAPTCHA_TASKS_ALLOWED_DOMAINS, ...) is read from the "
            "environment, as by every worker: export it before starting the crawl"
        )


def _raw(settings: Any, name: str) -> Any:
    value = settings.get(name) if hasattr(settings, "get") else None
    return SETTING_NAMES[name][1] if value is None else value


def _boolean(settings: Any, name: str) -> bool:
    value = _raw(settings, name)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ConfigurationError(f"{name} must be true or false, not {value!r}")


def _number(settings: Any, name: str, kind: type[int] | type[float]) -> float:
    value = _raw(settings, name)
    try:
        if isinstance(value, bool):
            raise ValueError(value)
        number = kind(value)
        if kind is int and isinstance(value, float) and value != number:
            raise ValueError(value)  # 2.5 re-issues is a mistake, not 2
    except (TypeError, ValueError):
        what = "a whole number" if kind is int else "a number of seconds"
        raise ConfigurationError(f"{name} must be {what}, not {value!r}") from None
    return number


def require_asyncio() -> None:
    """:class:`ConfigurationError` unless Scrapy runs on asyncio's loop (the middlewares
    await Redis and the cluster's results as coroutines: never blocking the reactor)."""
    from scrapy.utils.asyncio import is_asyncio_available

    try:
        available = is_asyncio_available()
    except RuntimeError:  # no reactor installed yet, and no running loop
        available = False
    if not available:
        raise ConfigurationError(
            "captcha_tasks.contrib.scrapy needs Scrapy on asyncio: set TWISTED_REACTOR = "
            '"twisted.internet.asyncioreactor.AsyncioSelectorReactor" (Scrapy\'s default '
            "since 2.13) in the project's settings, or remove the TWISTED_REACTOR override"
        )


def allowlisted(url: str, settings: Settings) -> bool:
    """Whether ``url``'s host is one the cluster serves (``CAPTCHA_TASKS_ALLOWED_DOMAINS``).

    No DNS here (``resolve=False``: the reactor's thread must not block on it): the
    worker that fetches a page on the crawl's behalf still refuses a name that resolves
    to a private address. The crawl's own requests are Scrapy's business."""
    try:
        check_url(url, settings, resolve=False)
    except TargetNotAllowed:
        return False
    return True


def enabled_middlewares(scrapy_settings: Any) -> list[type]:
    """The downloader middleware classes the crawl enables (``DOWNLOADER_MIDDLEWARES``
    over ``DOWNLOADER_MIDDLEWARES_BASE``, ``None`` entries left out), in order."""
    from scrapy.utils.conf import build_component_list
    from scrapy.utils.misc import load_object

    compose = getattr(scrapy_settings, "get_component_priority_dict_with_base", None)
    if compose is None:  # Scrapy before 2.15
        compose = scrapy_settings.getwithbase
    return [
        load_object(path) if isinstance(path, str) else path
        for path in build_component_list(compose("DOWNLOADER_MIDDLEWARES"))
    ]
