"""The providers a cluster buys from: ``CAPTCHA_TASKS_PROVIDERS`` and each one's variables.

``CAPTCHA_TASKS_PROVIDERS=main,backup`` names them in order of preference (names:
lowercase letters, digits and ``_``, 1-32 characters, each once). For each name ``N``
(upper-cased in the variables):

- ``CAPTCHA_TASKS_N_PROTOCOL`` (required): any ``CAPTCHA_TASKS_PROVIDER`` value;
- ``CAPTCHA_TASKS_N_URL``: its API base URL (default: the protocol's own);
- ``CAPTCHA_TASKS_N_API_KEY`` or ``CAPTCHA_TASKS_N_API_KEY_FILE`` (exactly one; the
  file is read once, at start-up, and stripped), in the protocol's key format;
- ``CAPTCHA_TASKS_N_THREADS``: its thread budget, cluster-wide (default 5);
- ``CAPTCHA_TASKS_N_TYPES``: only these captcha kinds (default: all it offers);
- ``CAPTCHA_TASKS_N_PRICES``, ``CAPTCHA_TASKS_N_BALANCE_FLOOR``: as
  ``CAPTCHA_TASKS_PRICES`` / ``CAPTCHA_TASKS_BALANCE_FLOOR``, for this provider.

Unset, the single-provider variables configure one provider named
:data:`DEFAULT_PROVIDER` (:meth:`captcha_tasks.settings.Settings.providers`).
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Collection, Mapping
from typing import Final

from .errors import ConfigurationError
from .masking import mask_url
from .parsing import (
    CAPTCHA_TYPES,
    DEFAULT_URLS,
    Provider,
    api_key,
    check_api_key,
    number,
    prices,
    provider,
    solver_url,
    usd,
)

__all__ = [
    "DEFAULT_PROVIDER",
    "DEFAULT_THREADS",
    "NOT_OFFERED",
    "PROVIDERS_VARIABLE",
    "SINGLE_PROVIDER_VARIABLES",
    "ProviderConfig",
    "key_variable",
    "read_providers",
]

#: The name of the one provider the single-provider variables configure. Its Redis
#: keys carry no provider name (:mod:`captcha_tasks.state.keys`).
DEFAULT_PROVIDER: Final = "default"
#: A provider's thread budget when ``CAPTCHA_TASKS_N_THREADS`` is unset (the default
#: of ``CAPTCHA_TASKS_THREADS``).
DEFAULT_THREADS: Final = 5
PROVIDERS_VARIABLE: Final = "CAPTCHA_TASKS_PROVIDERS"

#: The variables that configure the one ``default`` provider: with
#: ``CAPTCHA_TASKS_PROVIDERS`` set they would be silently ignored, so they are refused.
SINGLE_PROVIDER_VARIABLES: Final = (
    "CAPTCHA_TASKS_PROVIDER",
    "CAPTCHA_TASKS_SOLVER_URL",
    "CAPTCHA_TASKS_API_KEY",
    "CAPTCHAAI_API_KEY",
    "CAPTCHA_TASKS_THREADS",
    "CAPTCHA_TASKS_PRICES",
    "CAPTCHA_TASKS_BALANCE_FLOOR",
)

#: The kinds a protocol does not solve in any variant, so ``_TYPES`` naming one is a
#: mistake. The truth is provider/offers.py (a layer above); a unit test keeps this equal.
NOT_OFFERED: Final[Mapping[Provider, frozenset[str]]] = {
    "captchaai": frozenset({"funcaptcha", "geetest_v4", "aws_waf", "coordinates"}),
    "2captcha": frozenset(),
    "2captcha-v2": frozenset(),
    "anticaptcha": frozenset(),
    "capsolver": frozenset({"hcaptcha", "funcaptcha", "coordinates"}),
    "capmonster": frozenset({"coordinates"}),
}

_NAME_RE = re.compile(r"^[a-z0-9_]{1,32}$")
_SUFFIXES = (
    "PROTOCOL",
    "URL",
    "API_KEY",
    "API_KEY_FILE",
    "THREADS",
    "TYPES",
    "PRICES",
    "BALANCE_FLOOR",
)


@dataclasses.dataclass(frozen=True)
class ProviderConfig:
    """One configured provider. ``name`` is what metrics, status, spend and its Redis
    keys say; ``protocol`` is the ``CAPTCHA_TASKS_PROVIDER`` value results carry."""

    name: str
    protocol: Provider
    url: str
    #: Never shown: :meth:`describe` and ``repr`` mask it.
    api_key: str = dataclasses.field(default="", repr=False)
    threads: int = DEFAULT_THREADS
    #: The only kinds it may take (empty: every kind its protocol offers).
    types: tuple[str, ...] = ()
    prices: tuple[tuple[str, decimal.Decimal], ...] = ()
    balance_floor: decimal.Decimal | None = None

    def takes_type(self, kind: str) -> bool:
        """Whether ``_TYPES`` lets this provider take captchas of ``kind``."""
        return not self.types or kind in self.types

    def describe(self) -> dict[str, object]:
        """JSON-ready, the key masked (``***``; empty when unset), the URL's password too."""
        return {
            "name": self.name,
            "protocol": self.protocol,
            "url": mask_url(self.url),
            "api_key": "***" if self.api_key else "",
            "threads": self.threads,
            "types": list(self.types),
            "prices": {kind: str(price) for kind, price in self.prices},
            "balance_floor": None if self.balance_floor is None else str(self.balance_floor),
        }

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={value!r}" for name, value in self.describe().items())
        return f"ProviderConfig({shown})"


def variable(name: str, suffix: str) -> str:
    """``("main", "API_KEY")`` -> ``CAPTCHA_TASKS_MAIN_API_KEY``."""
    return f"CAPTCHA_TASKS_{name.upper()}_{suffix}"


def read_providers(
    env: Mapping[str, str], reserved: Collection[str] = ()
) -> tuple[ProviderConfig, ...]:
    """The providers ``CAPTCHA_TASKS_PROVIDERS`` names, in its order; ``()`` when it is
    unset (the single-provider variables then apply). ``reserved``: the variables of
    other settings, which no provider's variable may be.

    Raises a one-line :class:`ConfigurationError` naming the variable at fault.
    """
    raw = env.get(PROVIDERS_VARIABLE, "").strip()
    if not raw:
        return ()
    names = _names(raw, reserved)
    for single in SINGLE_PROVIDER_VARIABLES:
        if env.get(single, "").strip():
            raise ConfigurationError(
                f"{single} is not read when {PROVIDERS_VARIABLE} is set: "
                f"set CAPTCHA_TASKS_<NAME>_{single.split('_', 2)[-1]} per provider"
            )
    return tuple(_provider_config(name, env) for name in names)


def _names(raw: str, reserved: Collection[str]) -> list[str]:
    names: list[str] = []
    for name in (part.strip() for part in raw.split(",")):
        if not name:
            continue
        if not _NAME_RE.match(name):
            raise ConfigurationError(
                f"{PROVIDERS_VARIABLE}: {name!r} is not a provider name "
                "(1-32 lowercase letters, digits and _)"
            )
        if name in names:
            raise ConfigurationError(f"{PROVIDERS_VARIABLE}: {name} is named twice")
        clash = next((v for s in _SUFFIXES if (v := variable(name, s)) in reserved), None)
        if clash is not None:
            raise ConfigurationError(
                f"{PROVIDERS_VARIABLE}: the name {name} cannot be used ({clash} is another setting)"
            )
        names.append(name)
    if not names:
        raise ConfigurationError(f"{PROVIDERS_VARIABLE} names no provider, got {raw!r}")
    return names


def _provider_config(name: str, env: Mapping[str, str]) -> ProviderConfig:
    def get(suffix: str) -> tuple[str, str]:
        var = variable(name, suffix)
        return var, env.get(var, "").strip()

    var, raw = get("PROTOCOL")
    if not raw:
        raise ConfigurationError(f"{var} must be set for provider {name}: the protocol it speaks")
    protocol = provider(var, raw)
    var, raw = get("URL")
    url = solver_url(var, raw) if raw else DEFAULT_URLS[protocol]
    var, raw = get("THREADS")
    threads = int(number(int, 1)(var, raw)) if raw else DEFAULT_THREADS
    var, raw = get("PRICES")
    priced = prices(var, raw) if raw else ()
    var, raw = get("BALANCE_FLOOR")
    floor = usd(var, raw) if raw else None
    return ProviderConfig(
        name=name,
        protocol=protocol,
        url=url,
        api_key=_key(name, protocol, env),
        threads=threads,
        types=_types(variable(name, "TYPES"), env, protocol),
        prices=priced,
        balance_floor=floor,
    )


def _key(name: str, protocol: Provider, env: Mapping[str, str]) -> str:
    key_var, file_var = variable(name, "API_KEY"), variable(name, "API_KEY_FILE")
    key, path = env.get(key_var, "").strip(), env.get(file_var, "").strip()
    if key and path:
        raise ConfigurationError(f"set {key_var} or {file_var} for provider {name}, not both")
    if path:
        try:
            with open(path, encoding="utf-8") as file:
                key = file.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            # The path is not secret; the reason (no such file, permission) says what to fix.
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConfigurationError(f"{file_var}: cannot read {path!r} ({reason})") from None
        if not key:
            raise ConfigurationError(f"{file_var}: {path!r} is empty")
        key_var = file_var
    elif not key:
        raise ConfigurationError(f"{key_var} or {file_var} must be set for provider {name}")
    check_api_key(key_var, api_key(key_var, key), protocol)
    return key


def _types(var: str, env: Mapping[str, str], protocol: Provider) -> tuple[str, ...]:
    kinds: list[str] = []
    for kind in (part.strip() for part in env.get(var, "").split(",")):
        if not kind:
            continue
        if kind not in CAPTCHA_TYPES:
            raise ConfigurationError(
                f"{var}: {kind!r} is not a captcha type ({', '.join(CAPTCHA_TYPES)})"
            )
        if kind in NOT_OFFERED[protocol]:
            raise ConfigurationError(f"{var}: protocol {protocol} does not solve {kind} captchas")
        if kind in kinds:
            raise ConfigurationError(f"{var}: {kind} is named twice")
        kinds.append(kind)
    return tuple(kinds)


def key_variable(name: str, environ: Mapping[str, str]) -> str:
    """The variable provider ``name``'s key was read from (``environ``: the worker's
    environment): what an operator whose key is refused must correct."""
    if name == DEFAULT_PROVIDER:
        if (
            environ.get("CAPTCHAAI_API_KEY", "").strip()
            and not environ.get("CAPTCHA_TASKS_API_KEY", "").strip()
        ):
            return "CAPTCHAAI_API_KEY"
        return "CAPTCHA_TASKS_API_KEY"
    variable = f"CAPTCHA_TASKS_{name.upper()}_API_KEY"
    return f"{variable}_FILE" if environ.get(f"{variable}_FILE", "").strip() else variable
