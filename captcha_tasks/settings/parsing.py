"""How a setting's value is read: providers and their keys and URLs, numbers, amounts
of money, per-type prices.

Pure helpers of :mod:`captcha_tasks.settings` (kept apart so that module stays short).
Each parser takes ``(variable, value)`` and raises a one-line
:class:`~captcha_tasks.errors.ConfigurationError` naming the variable at fault.
"""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args
from urllib.parse import urlsplit

from ..errors import ConfigurationError

__all__ = [
    "AGENT_NAME_RE",
    "CAPTCHA_TYPES",
    "DEFAULT_SOLVER_URL",
    "DEFAULT_URLS",
    "PROTOCOLS",
    "PROVIDERS",
    "CaptchaType",
    "Parse",
    "Provider",
    "agent_name",
    "api_key",
    "between",
    "callback_token",
    "callback_token_file",
    "callback_url",
    "check_api_key",
    "default_provider",
    "number",
    "prices",
    "provider",
    "secret_file",
    "solver_url",
    "usd",
]

#: Turns a variable's value (stripped, never empty) into its setting, or raises
#: :class:`ConfigurationError` naming the variable: ``parse(variable, value)``.
Parse = Callable[[str, str], Any]

#: Every captcha kind's ``type``: what the settings name kinds by (prices, a provider's
#: ``_TYPES``). Each has its declaration in ``captcha_tasks/provider/kinds/`` (the provider
#: layer, above this one), registered in ``provider.captchas.CAPTCHA_CLASSES``; a test
#: holds the two to the same kinds.
CaptchaType = Literal[
    "recaptcha_v2",
    "recaptcha_v3",
    "turnstile",
    "image",
    "geetest",
    "hcaptcha",
    "funcaptcha",
    "geetest_v4",
    "aws_waf",
    "coordinates",
    "mtcaptcha",
    "prosopo",
    "friendly_captcha",
    "grid",
    "altcha",
    "datadome",
    "cloudflare_challenge",
    "yidun",
    "binance",
    "tencent",
]
CAPTCHA_TYPES: tuple[CaptchaType, ...] = get_args(CaptchaType)


Provider = Literal["captchaai", "2captcha", "2captcha-v2", "anticaptcha", "capsolver", "capmonster"]
PROVIDERS: tuple[Provider, ...] = (
    "captchaai",
    "2captcha",
    "2captcha-v2",
    "anticaptcha",
    "capsolver",
    "capmonster",
)

#: The protocol each provider speaks: ``classic`` (in.php / res.php) or ``json``
#: (createTask / getTaskResult; docs/PROVIDERS.md).
PROTOCOLS: dict[Provider, Literal["classic", "json"]] = {
    "captchaai": "classic",
    "2captcha": "classic",
    "2captcha-v2": "json",
    "anticaptcha": "json",
    "capsolver": "json",
    "capmonster": "json",
}

#: Each provider's API base URL, used when ``CAPTCHA_TASKS_SOLVER_URL`` is not set.
DEFAULT_URLS: dict[Provider, str] = {
    "captchaai": "https://ocr.captchaai.com",
    "2captcha": "https://2captcha.com",
    "2captcha-v2": "https://api.2captcha.com",
    "anticaptcha": "https://api.anti-captcha.com",
    "capsolver": "https://api.capsolver.com",
    "capmonster": "https://api.capmonster.cloud",
}
DEFAULT_SOLVER_URL = DEFAULT_URLS["captchaai"]

_API_KEY_RE = re.compile(r"^[A-Za-z0-9]{32}$")
#: What each provider's keys look like (docs/PROVIDERS.md, D15), with what to say when
#: a key does not. CapSolver: ``CAP-`` and 32 or 64 hex digits; CapMonster: 32
#: characters, optionally followed by ``__`` options (``__nocache``).
_KEY_FORMATS: dict[Provider, tuple[re.Pattern[str], str]] = {
    "capsolver": (
        re.compile(r"^CAP-[0-9A-Fa-f]{32}(?:[0-9A-Fa-f]{32})?$"),
        "CAP- followed by 32 or 64 hex digits",
    ),
    "capmonster": (
        re.compile(r"^[A-Za-z0-9]{32}(?:__[A-Za-z0-9_.-]+)?$"),
        "32 letters and digits (optionally followed by __options)",
    ),
}
_DEFAULT_KEY_FORMAT = (_API_KEY_RE, "32 letters and digits")


def api_key(name: str, raw: str) -> str:
    """A provider key: checked against its provider's format once the provider is
    known (:func:`check_api_key`); here only what no provider's key contains."""
    if any(c.isspace() for c in raw):
        raise ConfigurationError(f"{name} must not contain spaces")
    return raw


def check_api_key(variable: str, key: str, provider: Provider) -> None:
    """Refuse ``key`` unless it has ``provider``'s key format (the key is never echoed)."""
    pattern, shape = _KEY_FORMATS.get(provider, _DEFAULT_KEY_FORMAT)
    if key and not pattern.match(key):
        raise ConfigurationError(
            f"{variable} must be {shape} for provider {provider} (got {len(key)} characters)"
        )


def solver_url(name: str, raw: str) -> str:
    """A provider's http(s) API base URL, without a trailing slash."""
    url = raw.rstrip("/")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError as exc:
        raise ConfigurationError(f"{name} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{name} must be an http(s) URL, got {url!r}")
    return url


def provider(name: str, raw: str) -> Provider:
    """One of :data:`PROVIDERS` (any case)."""
    value = raw.lower()
    for known in PROVIDERS:
        if value == known:
            return known
    raise ConfigurationError(f"{name} must be one of {', '.join(PROVIDERS)}, got {value!r}")


def number(kind: type[int] | type[float], low: float) -> Parse:
    """A number ``>= low`` (finite: NaN and infinities are refused)."""

    def parse(name: str, raw: str) -> float:
        try:
            value = kind(raw)
        except ValueError:
            what = "an integer" if kind is int else "a number"
            raise ConfigurationError(f"{name} must be {what}, got {raw!r}") from None
        if not (value >= low and math.isfinite(value)):  # also rejects NaN
            raise ConfigurationError(f"{name} must be a finite number >= {low}, got {raw!r}")
        return value

    return parse


def between(kind: type[int] | type[float], low: float, high: float, what: str) -> Parse:
    """A number in ``[low, high]``; ``what`` names the unit in the error."""

    def parse(name: str, raw: str) -> float:
        try:
            value = kind(raw)
        except ValueError:
            raise ConfigurationError(f"{name} must be {what}, got {raw!r}") from None
        if not low <= value <= high:  # also rejects NaN
            raise ConfigurationError(f"{name} must be {low}-{high}, got {raw!r}")
        return value

    return parse


def choice(*values: str) -> Parse:
    """One of ``values``, in any case (given back in lower case)."""

    def parse(name: str, raw: str) -> str:
        value = raw.lower()
        if value not in values:
            allowed = ", ".join(values[:-1]) + f" or {values[-1]}"
            raise ConfigurationError(f"{name} must be {allowed}, got {value!r}")
        return value

    return parse


#: An MCP agent's name: it is part of Redis keys and log lines.
AGENT_NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def agent_name(name: str, raw: str) -> str:
    """An MCP agent's name (``CAPTCHA_TASKS_MCP_AGENT``): :data:`AGENT_NAME_RE`."""
    if not AGENT_NAME_RE.fullmatch(raw):
        raise ConfigurationError(
            f"{name} must be 1-64 letters, digits, '_', '.' or '-', got {raw[:70]!r}"
        )
    return raw


def _amount(name: str, raw: str, what: str) -> decimal.Decimal:
    # Decimal, never float: money adds up exactly (0.1 + 0.2 is 0.3).
    try:
        value = decimal.Decimal(raw)
    except decimal.InvalidOperation:
        raise ConfigurationError(f"{name}: {what} must be a number of USD, got {raw!r}") from None
    if not value.is_finite() or value < 0:
        raise ConfigurationError(f"{name}: {what} must be a finite number >= 0, got {raw!r}")
    return value


def usd(name: str, raw: str) -> decimal.Decimal:
    """An amount of US dollars, ``>= 0`` (``CAPTCHA_TASKS_BALANCE_FLOOR``)."""
    return _amount(name, raw, "the amount")


def prices(name: str, raw: str) -> tuple[tuple[str, decimal.Decimal], ...]:
    """``type=usd_per_1000,...`` -> ``((type, usd_per_1000), ...)`` sorted by type; each
    type a captcha kind of :data:`CAPTCHA_TYPES`, named once."""
    out: dict[str, decimal.Decimal] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        kind, sep, value = (s.strip() for s in item.partition("="))
        if not sep or not value:
            raise ConfigurationError(f"{name} must be type=usd_per_1000,..., got {item!r}")
        if kind not in CAPTCHA_TYPES:
            raise ConfigurationError(
                f"{name}: {kind!r} is not a captcha type ({', '.join(CAPTCHA_TYPES)})"
            )
        if kind in out:
            raise ConfigurationError(f"{name}: {kind} is priced twice")
        out[kind] = _amount(name, value, f"the price of {kind}")
    return tuple(sorted(out.items()))


#: A callback token: URL-safe, long enough that nobody guesses it (>= 128 bits).
_TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{32,128}$")


def callback_url(name: str, raw: str) -> str:
    """The public base URL providers call back (http(s), no query, no credentials)."""
    try:
        parts = urlsplit(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigurationError(f"{name} must be an http(s)://host[/path] URL, got {raw!r}")
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigurationError(f"{name} must carry no query, fragment or credentials")
    return raw.rstrip("/")


def callback_token(name: str, raw: str) -> str:
    """The callback path token: 32-128 of ``A-Za-z0-9_-`` (never echoed)."""
    if not _TOKEN_RE.match(raw):
        raise ConfigurationError(
            f"{name} must be 32-128 letters, digits, '_' or '-' (e.g. `openssl rand -hex 32`)"
        )
    return raw


def secret_file(name: str, path: str) -> str:
    """The text of the file ``path`` (a mounted secret) that variable ``name`` names,
    stripped; a file that cannot be read is a :class:`ConfigurationError` naming ``name``."""
    try:
        with open(path, encoding="utf-8") as file:
            return file.read().strip()
    except (OSError, UnicodeDecodeError) as exc:
        # The path is not secret; the reason (no such file, permission) says what to fix.
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigurationError(f"{name}: cannot read {path!r} ({reason})") from None


def callback_token_file(name: str, path: str) -> str:
    """The token read from the file ``path`` (a mounted secret), checked as above."""
    return callback_token(name, secret_file(name, path))


#: A solver URL's host -> the provider it belongs to, when CAPTCHA_TASKS_PROVIDER is unset
#: (2Captcha's classic host stays ``2captcha``, its JSON host is ``2captcha-v2``).
_HOST_HINTS: tuple[tuple[str, Provider], ...] = (
    ("api.2captcha", "2captcha-v2"),
    ("2captcha", "2captcha"),
    ("anti-captcha", "anticaptcha"),
    ("capsolver", "capsolver"),
    ("capmonster", "capmonster"),
)


def default_provider(env: Mapping[str, str]) -> Provider:
    """``CAPTCHA_TASKS_PROVIDER``'s default: guessed from the solver URL's host."""
    raw = env.get("CAPTCHA_TASKS_SOLVER_URL", "").strip()
    host = (urlsplit(solver_url("CAPTCHA_TASKS_SOLVER_URL", raw)).hostname or "") if raw else ""
    return next((provider for hint, provider in _HOST_HINTS if hint in host), "captchaai")
