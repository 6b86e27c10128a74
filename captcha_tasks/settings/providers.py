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

Unset, the single-provider variables (:data:`DEFAULT_VARIABLES`) configure one
provider named :data:`DEFAULT_PROVIDER`, read by the same code: the protocol is then
optional (read from ``CAPTCHA_TASKS_SOLVER_URL``'s host, else ``captchaai``) and so is
the key (a process that only enqueues needs none). Setting both is refused: with
``CAPTCHA_TASKS_PROVIDERS`` set, a single-provider variable would be ignored.
"""

from __future__ import annotations

import dataclasses
import decimal
import re
from collections.abc import Collection, Mapping
from typing import Final

from ..errors import ConfigurationError
from ..redaction import mask_url
from .parsing import (
    CAPTCHA_TYPES,
    DEFAULT_SOLVER_URL,
    DEFAULT_URLS,
    Provider,
    api_key,
    check_api_key,
    default_provider,
    number,
    prices,
    provider,
    secret_file,
    solver_url,
    usd,
)

__all__ = [
    "DEFAULT_PROVIDER",
    "DEFAULT_THREADS",
    "DEFAULT_VARIABLES",
    "OTHER_KEY_VARIABLE",
    "PROVIDERS_VARIABLE",
    "SINGLE_PROVIDER_VARIABLES",
    "ProviderConfig",
    "key_variable",
    "provider_variables",
    "read_providers",
]

#: The name of the one provider the single-provider variables configure. Its Redis
#: keys carry no provider name (:mod:`captcha_tasks.state.keys`).
DEFAULT_PROVIDER: Final = "default"
#: A provider's thread budget when ``CAPTCHA_TASKS_N_THREADS`` is unset (the default
#: of ``CAPTCHA_TASKS_THREADS``).
DEFAULT_THREADS: Final = 5
PROVIDERS_VARIABLE: Final = "CAPTCHA_TASKS_PROVIDERS"

#: The single-provider variables: the ``default`` provider's, by the suffix of the
#: named provider's variable they stand for (``CAPTCHA_TASKS_<NAME>_<SUFFIX>``). Its
#: kinds are not restricted (no ``_TYPES``) and its key is read from a variable only.
DEFAULT_VARIABLES: Final[Mapping[str, str]] = {
    "PROTOCOL": "CAPTCHA_TASKS_PROVIDER",
    "URL": "CAPTCHA_TASKS_SOLVER_URL",
    "API_KEY": "CAPTCHA_TASKS_API_KEY",
    "THREADS": "CAPTCHA_TASKS_THREADS",
    "PRICES": "CAPTCHA_TASKS_PRICES",
    "BALANCE_FLOOR": "CAPTCHA_TASKS_BALANCE_FLOOR",
}
#: ``CAPTCHA_TASKS_API_KEY``'s other name, read when it is unset.
OTHER_KEY_VARIABLE: Final = "CAPTCHAAI_API_KEY"
#: Every single-provider variable: with ``CAPTCHA_TASKS_PROVIDERS`` set they would be
#: ignored, so they are refused.
SINGLE_PROVIDER_VARIABLES: Final = (*DEFAULT_VARIABLES.values(), OTHER_KEY_VARIABLE)

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
    keys say; ``protocol`` is the ``CAPTCHA_TASKS_PROVIDER`` value results carry.

    Each field's comment names the ``default`` provider's variable, then a named one's.
    """

    #: ``CAPTCHA_TASKS_PROVIDERS``: one of the names it lists, else ``default``.
    name: str = DEFAULT_PROVIDER
    #: ``CAPTCHA_TASKS_PROVIDER`` / ``CAPTCHA_TASKS_<NAME>_PROTOCOL``: one of
    #: :data:`~captcha_tasks.parsing.PROVIDERS`; for the classic ones it also decides
    #: what ``ERROR_ZERO_BALANCE`` means. Required for a named provider; the default
    #: one's is read from ``CAPTCHA_TASKS_SOLVER_URL``'s host (``2captcha``,
    #: ``anti-captcha``, ``capsolver``, ``capmonster``), else ``captchaai``.
    protocol: Provider = "captchaai"
    #: ``CAPTCHA_TASKS_SOLVER_URL`` / ``CAPTCHA_TASKS_<NAME>_URL``: the provider's API
    #: base URL (the sandbox, a proxy). Default: the protocol's own (:data:`DEFAULT_URLS`).
    url: str = DEFAULT_SOLVER_URL
    #: ``CAPTCHA_TASKS_API_KEY`` (or ``CAPTCHAAI_API_KEY``, its other name) /
    #: ``CAPTCHA_TASKS_<NAME>_API_KEY`` or ``CAPTCHA_TASKS_<NAME>_API_KEY_FILE`` (read once,
    #: at start-up): the key, checked against the protocol's key format. Required for a
    #: named provider; without the default one's a process can enqueue but not solve.
    #: Never shown: masked in ``captcha-tasks settings``, in logs and in reprs.
    api_key: str = dataclasses.field(default="", repr=False)
    #: ``CAPTCHA_TASKS_THREADS`` / ``CAPTCHA_TASKS_<NAME>_THREADS``: its thread budget
    #: (captchas in flight at once), cluster-wide.
    threads: int = DEFAULT_THREADS
    #: ``CAPTCHA_TASKS_<NAME>_TYPES``: the only kinds it may take (empty: every kind its
    #: protocol offers; the default provider takes every kind).
    types: tuple[str, ...] = ()
    #: ``CAPTCHA_TASKS_PRICES`` / ``CAPTCHA_TASKS_<NAME>_PRICES``: ``type=usd_per_1000,...``,
    #: the cost a result carries when the provider sends none (sorted ``(type, price)``).
    prices: tuple[tuple[str, decimal.Decimal], ...] = ()
    #: ``CAPTCHA_TASKS_BALANCE_FLOOR`` / ``CAPTCHA_TASKS_<NAME>_BALANCE_FLOOR``: USD; a
    #: balance below it is warned about once (unset: the balance is not watched).
    balance_floor: decimal.Decimal | None = None

    def require_api_key(self) -> str:
        """The key, or :class:`ConfigurationError` if it is not set (only the default
        provider's can be unset)."""
        if not self.api_key:
            raise ConfigurationError(
                f"{DEFAULT_VARIABLES['API_KEY']} is not set: export your provider key, "
                "or run `make run` to use the local sandbox"
            )
        return self.api_key

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
    """The providers to solve with, in order of preference: those
    ``CAPTCHA_TASKS_PROVIDERS`` names, else the ``default`` one of the single-provider
    variables (never empty). ``reserved``: the variables of other settings, which no
    provider's variable may be.

    Raises a one-line :class:`ConfigurationError` naming the variable at fault.
    """
    raw = env.get(PROVIDERS_VARIABLE, "").strip()
    if not raw:
        return (_provider_config(DEFAULT_PROVIDER, env, named=False),)
    names = _names(raw, reserved)
    for single in SINGLE_PROVIDER_VARIABLES:
        if env.get(single, "").strip():
            suffix = next((k for k, v in DEFAULT_VARIABLES.items() if v == single), "API_KEY")
            raise ConfigurationError(
                f"{single} is not read when {PROVIDERS_VARIABLE} is set: "
                f"set CAPTCHA_TASKS_<NAME>_{suffix} per provider"
            )
    return tuple(_provider_config(name, env, named=True) for name in names)


def provider_variables(config: ProviderConfig, *, named: bool) -> dict[str, object]:
    """``config`` as its variables would spell it (:meth:`ProviderConfig.describe`'s
    values, secrets masked), keyed by the variable each is read from: a named
    provider's (``named``), else the single-provider variables."""
    shown = config.describe()
    out: dict[str, object] = {}
    for suffix in ("PROTOCOL", "URL", "API_KEY", "THREADS", "TYPES", "PRICES", "BALANCE_FLOOR"):
        var = variable(config.name, suffix) if named else DEFAULT_VARIABLES.get(suffix)
        if var is not None:
            out[var] = shown[suffix.lower()]
    return out


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


def _provider_config(name: str, env: Mapping[str, str], *, named: bool) -> ProviderConfig:
    """One provider from its variables: a named one's (``CAPTCHA_TASKS_<NAME>_...``),
    else the single-provider variables (:data:`DEFAULT_VARIABLES`)."""

    def get(suffix: str) -> tuple[str, str]:
        var = variable(name, suffix) if named else DEFAULT_VARIABLES[suffix]
        return var, env.get(var, "").strip()

    var, raw = get("PROTOCOL")
    if raw:
        protocol = provider(var, raw)
    elif named:
        raise ConfigurationError(f"{var} must be set for provider {name}: the protocol it speaks")
    else:
        protocol = default_provider(env)
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
        api_key=_key(name, protocol, env) if named else _default_key(protocol, env),
        threads=threads,
        types=_types(variable(name, "TYPES"), env) if named else (),
        prices=priced,
        balance_floor=floor,
    )


def _key(name: str, protocol: Provider, env: Mapping[str, str]) -> str:
    key_var, file_var = variable(name, "API_KEY"), variable(name, "API_KEY_FILE")
    key, path = env.get(key_var, "").strip(), env.get(file_var, "").strip()
    if key and path:
        raise ConfigurationError(f"set {key_var} or {file_var} for provider {name}, not both")
    if path:
        key = secret_file(file_var, path)
        if not key:
            raise ConfigurationError(f"{file_var}: {path!r} is empty")
        key_var = file_var
    elif not key:
        raise ConfigurationError(f"{key_var} or {file_var} must be set for provider {name}")
    check_api_key(key_var, api_key(key_var, key), protocol)
    return key


def _default_key(protocol: Provider, env: Mapping[str, str]) -> str:
    """The default provider's key: ``CAPTCHA_TASKS_API_KEY``, else its other name, else
    none (enqueueing needs no key)."""
    var = key_variable(DEFAULT_PROVIDER, env)
    key = env.get(var, "").strip()
    if key:
        check_api_key(var, api_key(var, key), protocol)
    return key


def _types(var: str, env: Mapping[str, str]) -> tuple[str, ...]:
    """A provider's ``_TYPES``: captcha types, each once. Whether its protocol solves
    them is the provider layer's to check
    (:func:`~captcha_tasks.provider.offers.check_configured`)."""
    kinds: list[str] = []
    for kind in (part.strip() for part in env.get(var, "").split(",")):
        if not kind:
            continue
        if kind not in CAPTCHA_TYPES:
            raise ConfigurationError(
                f"{var}: {kind!r} is not a captcha type ({', '.join(CAPTCHA_TYPES)})"
            )
        if kind in kinds:
            raise ConfigurationError(f"{var}: {kind} is named twice")
        kinds.append(kind)
    return tuple(kinds)


def key_variable(name: str, environ: Mapping[str, str]) -> str:
    """The variable provider ``name``'s key was read from (``environ``: the worker's
    environment): what an operator whose key is refused must correct."""
    if name == DEFAULT_PROVIDER and not environ.get(PROVIDERS_VARIABLE, "").strip():
        key = DEFAULT_VARIABLES["API_KEY"]
        if environ.get(OTHER_KEY_VARIABLE, "").strip() and not environ.get(key, "").strip():
            return OTHER_KEY_VARIABLE
        return key
    variable = f"CAPTCHA_TASKS_{name.upper()}_API_KEY"
    return f"{variable}_FILE" if environ.get(f"{variable}_FILE", "").strip() else variable
