"""How a setting's value is read: numbers, amounts of money, per-type prices.

Pure helpers of :mod:`captcha_tasks.settings` (kept apart so that module stays short).
Each parser takes ``(variable, value)`` and raises a one-line
:class:`~captcha_tasks.errors.ConfigurationError` naming the variable at fault.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Callable
from typing import Any

from .errors import ConfigurationError

__all__ = ["CAPTCHA_TYPES", "Parse", "between", "number", "prices", "usd"]

#: Turns a variable's value (stripped, never empty) into its setting, or raises
#: :class:`ConfigurationError` naming the variable: ``parse(variable, value)``.
Parse = Callable[[str, str], Any]

#: Every captcha kind, as ``captcha_tasks.provider.CaptchaType`` spells them (a test
#: keeps the two equal; settings sit below the provider layer and cannot import it).
CAPTCHA_TYPES: tuple[str, ...] = (
    "recaptcha_v2", "recaptcha_v3", "turnstile", "image", "geetest", "hcaptcha",
    "funcaptcha", "geetest_v4", "aws_waf", "coordinates",
)  # fmt: skip


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
