"""What the sandbox emulates: plan, timings, billing and faults, as one frozen dataclass.

Timings are given as the live provider's seconds and multiplied by ``time_scale``
(``CAPTCHA_TASKS_TIME_SCALE``), so a client configured with the same scale sees the
same proportions as in production, only faster.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from captcha_tasks.errors import ConfigurationError
from captcha_tasks.settings.parsing import CAPTCHA_TYPES

from .garbage import GARBAGE_KINDS, GarbageKind

__all__ = [
    "ADMIN_FIELDS",
    "DEFAULT_LATENCY",
    "DEMO_SITEKEY",
    "DEV_API_KEY",
    "DEV_CAPSOLVER_KEY",
    "DIALECTS",
    "FAULT_PATHS",
    "GARBAGE_KINDS",
    "JSON_DIALECTS",
    "KINDS",
    "OVER_LIMIT_CODES",
    "PROTOCOLS",
    "TOKEN_TTL",
    "Dialect",
    "JsonDialect",
    "Protocol",
    "SandboxConfig",
    "dev_api_key",
]

Dialect = Literal["captchaai", "2captcha"]
DIALECTS: tuple[Dialect, ...] = ("captchaai", "2captcha")
#: The JSON task API's dialects, named as ``CAPTCHA_TASKS_PROVIDER`` names them.
JsonDialect = Literal["2captcha-v2", "anticaptcha", "capsolver", "capmonster"]
JSON_DIALECTS: tuple[JsonDialect, ...] = ("2captcha-v2", "anticaptcha", "capsolver", "capmonster")
#: ``classic``: in.php/res.php; ``json``: createTask/getTaskResult; ``both`` on one port.
Protocol = Literal["classic", "json", "both"]
PROTOCOLS: tuple[Protocol, ...] = ("classic", "json", "both")

#: Always accepted. Public on purpose: it opens nothing but a sandbox.
DEV_API_KEY = "sandbox" + "0" * 25
#: The capsolver dialect's always-accepted key: CapSolver keys are ``CAP-`` + hex digits.
DEV_CAPSOLVER_KEY = "CAP-" + "0" * 32
_CAPSOLVER_KEY_RE = re.compile(r"^CAP-[0-9A-Fa-f]{32}(?:[0-9A-Fa-f]{32})?$")


def dev_api_key(dialect: str) -> str:
    """The key a sandbox speaking ``dialect`` always accepts (CapSolver's has its own shape)."""
    return DEV_CAPSOLVER_KEY if dialect == "capsolver" else DEV_API_KEY


#: The demo site's default reCAPTCHA sitekey (40 characters, accepted by in.php).
DEMO_SITEKEY = "6LdSandboxDemoSiteKey0000000000000000000"

#: Captcha kinds, as named by ``--latency KIND=SECONDS`` and ``/stats``' ``by_type``: the
#: package's own list.
KINDS = CAPTCHA_TYPES

#: Unscaled seconds from submit to answer (before jitter and ``time_scale``).
DEFAULT_LATENCY: Mapping[str, float] = MappingProxyType(
    {
        "recaptcha_v2": 15.0,
        "recaptcha_v3": 4.0,
        "turnstile": 8.0,
        "image": 3.0,
        "geetest": 10.0,
        "hcaptcha": 15.0,
        "funcaptcha": 20.0,
        "geetest_v4": 10.0,
        "aws_waf": 12.0,
        "coordinates": 5.0,
        "mtcaptcha": 10.0,
        "prosopo": 10.0,
        "friendly_captcha": 5.0,
        "grid": 5.0,
        "altcha": 2.0,
        "datadome": 5.0,
        "cloudflare_challenge": 5.0,
        "yidun": 10.0,
        "binance": 5.0,
        "tencent": 10.0,
    }
)

#: Unscaled seconds a token stays valid, counted from the moment its captcha was solved
#: (``aws_waf``: the ``aws-waf-token`` cookie, AWS WAF's default immunity time).
TOKEN_TTL: Mapping[str, float] = MappingProxyType(
    {
        "recaptcha_v2": 120.0,
        "recaptcha_v3": 120.0,
        "turnstile": 300.0,
        "hcaptcha": 120.0,
        "funcaptcha": 120.0,
        "aws_waf": 300.0,
        # The engine's lifetimes (engine/timing.py TOKEN_TTL) where a source gives one;
        # MTCaptcha's and Friendly Captcha's are in none, so reCAPTCHA's two minutes.
        "mtcaptcha": 120.0,
        "prosopo": 60.0,
        "friendly_captcha": 120.0,
        # Altcha's is the salt's expires, which each site sets: the sandbox's choice.
        "altcha": 1200.0,
        # DataDome's cookie lives a year (docs.datadome.co); the sandbox honours it as
        # long as its longest-lived token (AWS WAF's), which bounds its memory.
        "datadome": 300.0,
        # Yidun's, Binance's and Tencent's ticket's are in no source: reCAPTCHA's two
        # minutes, as MTCaptcha's.
        "yidun": 120.0,
        "binance": 120.0,
        "tencent": 120.0,
        # Cloudflare's default Challenge Passage: 30 minutes.
        "cloudflare_challenge": 1800.0,
    }
)

#: The endpoints faults (``fail_rate``, ``slow_rate``, ``garbage_rate``) can target.
FAULT_PATHS = ("in.php", "res.php")

#: What a submit over the thread limit answers: the usual code, or the one
#: CaptchaAI documents for the same situation.
OVER_LIMIT_CODES = ("ERROR_NO_SLOT_AVAILABLE", "ERROR_ZERO_BALANCE")

#: Fields ``POST /admin/config`` may change at runtime.
ADMIN_FIELDS = frozenset(
    {
        "threads",
        "fail_rate",
        "unsolvable_rate",
        "slow_rate",
        "slow_seconds",
        "fault_paths",
        "garbage_rate",
        "garbage_kinds",
        "balance",
        "price",
        "dialect",
        "over_limit_code",
        "latency",
        "jitter",
        "callback_drop_rate",
        "callback_late_rate",
        "callback_duplicate_rate",
        "callback_late_seconds",
        "refuse_keys",
        "reject_rates",
        "demo_form_ttl",
        "demo_rotate_sitekey",
    }
)

_RATES = (
    "fail_rate",
    "unsolvable_rate",
    "slow_rate",
    "garbage_rate",
    "callback_drop_rate",
    "callback_late_rate",
    "callback_duplicate_rate",
)
_SITEKEY_RE = re.compile(r"^[A-Za-z0-9_.\-]{10,100}$")  # what in.php accepts as a googlekey


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """Everything the sandbox can be told. Invalid values raise :class:`ConfigurationError`."""

    #: Interface to listen on; the admin endpoints listen there too.
    host: str = "127.0.0.1"
    #: TCP port; 0 picks a free one (read it back from ``SandboxServer.url``).
    port: int = 0
    #: Keys accepted besides :data:`DEV_API_KEY` (32 letters and digits each).
    api_keys: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    #: The plan's thread limit: captchas in flight (submitted, not yet solved) at once.
    threads: int = 5
    #: ``captchaai`` bills by threads (balance informational); ``2captcha`` charges
    #: ``price`` per solve and refuses submits with ERROR_ZERO_BALANCE when it runs out.
    #: With ``protocol`` json or both: one of :data:`JSON_DIALECTS` (each charges per
    #: solve; in.php/res.php then follow the ``2captcha`` dialect).
    dialect: Dialect | JsonDialect = "captchaai"
    #: Account balance, as ``getbalance`` answers it.
    balance: float = 100.0
    #: Cost of one solve in the 2captcha dialect (unsolvable captchas are refunded).
    price: float = 0.003
    #: Multiplies every latency, token lifetime and the report window.
    time_scale: float = 1.0
    #: Unscaled seconds per kind from submit to answer; missing kinds keep the default.
    latency: Mapping[str, float] = dataclasses.field(default_factory=lambda: DEFAULT_LATENCY)
    #: Each latency is multiplied by a uniform factor in [1 - jitter, 1 + jitter].
    jitter: float = 0.2
    #: The answer to a submit over the thread limit (see :data:`OVER_LIMIT_CODES`).
    over_limit_code: str = "ERROR_NO_SLOT_AVAILABLE"
    #: Smallest image accepted (2Captcha documents 100 bytes); smaller ones answer
    #: ERROR_ZERO_CAPTCHA_FILESIZE.
    min_image_bytes: int = 100
    #: Largest image accepted; larger is ERROR_TOO_BIG_CAPTCHA_FILESIZE.
    max_image_bytes: int = 100_000
    #: Fraction of in.php/res.php requests answered with an HTML 502 page.
    fail_rate: float = 0.0
    #: Fraction of captchas that end as ERROR_CAPTCHA_UNSOLVABLE at their ready time.
    unsolvable_rate: float = 0.0
    #: Fraction of in.php/res.php requests whose response is held back ``slow_seconds``.
    slow_rate: float = 0.0
    #: Delay of a slow response in real seconds (not scaled: it is meant to beat HTTP timeouts).
    slow_seconds: float = 5.0
    #: Fraction of in.php/res.php requests (and JSON API calls) answered with garbage
    #: (:mod:`.garbage`): the request takes effect, then its answer is replaced by one of
    #: ``garbage_kinds``, each in turn.
    garbage_rate: float = 0.0
    #: The garbage served (see :data:`GARBAGE_KINDS`): truncated, huge, content_type,
    #: html, empty, noise, wrong_shape.
    garbage_kinds: tuple[GarbageKind, ...] = GARBAGE_KINDS
    #: The endpoints ``fail_rate``, ``slow_rate`` and ``garbage_rate`` apply to (see
    #: :data:`FAULT_PATHS`; JSON createTask counts as in.php, every other method as
    #: res.php): e.g. only ``("in.php",)`` to fault submits, only ``("res.php",)`` for polls.
    fault_paths: tuple[str, ...] = FAULT_PATHS
    #: Seed for every random choice (ids, jitter, faults, tokens); None: unpredictable.
    seed: int | None = None
    #: Unscaled seconds after submit during which reportbad/reportgood are accepted.
    report_window: float = 900.0
    #: TLS certificate chain (PEM); with ``tls_key`` the sandbox speaks https.
    tls_cert: str | None = None
    #: TLS private key (PEM).
    tls_key: str | None = None
    #: Log one line per request (keys and proxy passwords are masked).
    verbose: bool = False
    #: Port of the demo target site (``demo_site``; 0 picks a free one); None: no demo site.
    demo_port: int | None = None
    #: The reCAPTCHA sitekey the demo site shows and accepts tokens for.
    demo_sitekey: str = DEMO_SITEKEY
    #: Unscaled seconds a challenge form of the demo site stays good: each load carries
    #: a one-time ``csrf_token`` bound to the visitor's ``demo_visitor`` cookie, refused
    #: once posted, from another visitor, or this long after the load.
    demo_form_ttl: float = 600.0
    #: Each load of a challenge page shows the widget with another sitekey (the last
    #: four characters a counter), and its form takes only tokens solved for that one.
    demo_rotate_sitekey: bool = False
    #: Wire formats served (see :data:`PROTOCOLS`); ``both`` serves them on one port.
    protocol: Protocol = "classic"
    #: Callbacks (``pingback`` / ``callbackUrl``, :mod:`.callbacks`): the fraction never
    #: sent, sent late (by ``callback_late_seconds``, real seconds) and sent twice.
    callback_drop_rate: float = 0.0
    callback_late_rate: float = 0.0
    callback_duplicate_rate: float = 0.0
    callback_late_seconds: float = 2.0
    #: Refuse every key, the always-accepted ones too (``ERROR_KEY_DOES_NOT_EXIST`` on
    #: submits, polls and ``getbalance``), as a provider answers a revoked key.
    refuse_keys: bool = False
    #: The demo site refuses this fraction of the tokens this sandbox solved that would
    #: otherwise pass (the site's verdict, as a real site's on a low-scoring solver):
    #: keyed by the ``dialect`` of the sandbox that solved it (``"2captcha"``...: this
    #: one, or a peer the demo site trusts, :meth:`.demo_site.DemoSite.trust`) or ``"*"``, and
    #: per host as ``"host/dialect"`` or ``"host/*"`` (the ``Host`` the demo site was
    #: asked under, without port), the most specific key winning. Seeded by ``seed``.
    reject_rates: Mapping[str, float] = dataclasses.field(default_factory=dict)

    def reject_rate(self, host: str, dialect: str | None = None) -> float:
        """The share of good tokens the demo site refuses when asked as ``host``, of
        those solved by a sandbox speaking ``dialect`` (default: this one's)."""
        dialect = dialect or self.dialect
        for key in (f"{host}/{dialect}", f"{host}/*", dialect, "*"):
            if key in self.reject_rates:
                return self.reject_rates[key]
        return 0.0

    @property
    def classic_dialect(self) -> Dialect:
        """How in.php/res.php behave: ``dialect`` itself, or ``2captcha`` (per-solve billing,
        as every JSON provider bills) when ``dialect`` is a JSON one."""
        return "captchaai" if self.dialect == "captchaai" else "2captcha"

    def __post_init__(self) -> None:
        latency = dict(DEFAULT_LATENCY)
        for kind, seconds in self.latency.items():
            if kind not in KINDS:
                raise ConfigurationError(
                    f"unknown captcha kind {kind!r} in latency (one of {', '.join(KINDS)})"
                )
            latency[kind] = _number(f"latency[{kind}]", seconds, low=0.0)
        object.__setattr__(self, "latency", MappingProxyType(latency))
        if not 0 <= self.port <= 65535:
            raise ConfigurationError(f"port must be 0..65535, got {self.port}")
        if self.demo_port is not None:
            if isinstance(self.demo_port, bool) or not 0 <= self.demo_port <= 65535:
                raise ConfigurationError(f"demo_port must be 0..65535, got {self.demo_port}")
            if self.demo_port and self.demo_port == self.port:
                raise ConfigurationError("demo_port must differ from port")
        if not _SITEKEY_RE.match(self.demo_sitekey):
            raise ConfigurationError("demo_sitekey must be 10..100 letters, digits, '_', '.', '-'")
        if self.threads < 1:
            raise ConfigurationError(f"threads must be >= 1, got {self.threads}")
        self._check_dialect()
        _number("balance", self.balance)
        _number("price", self.price, low=0.0)
        _number("time_scale", self.time_scale, low=1e-6)
        _number("jitter", self.jitter, low=0.0, high=1.0)
        _number("slow_seconds", self.slow_seconds, low=0.0)
        _number("callback_late_seconds", self.callback_late_seconds, low=0.0)
        _number("report_window", self.report_window, low=0.0)
        _number("demo_form_ttl", self.demo_form_ttl, low=1e-6)
        if not isinstance(self.demo_rotate_sitekey, bool):
            raise ConfigurationError("demo_rotate_sitekey must be true or false")
        for name in _RATES:
            _number(name, getattr(self, name), low=0.0, high=1.0)
        object.__setattr__(self, "reject_rates", _reject_rates(self.reject_rates))
        object.__setattr__(self, "fault_paths", _fault_paths(self.fault_paths))
        object.__setattr__(self, "garbage_kinds", _garbage_kinds(self.garbage_kinds))
        if not 0 <= self.min_image_bytes <= self.max_image_bytes:
            raise ConfigurationError("need 0 <= min_image_bytes <= max_image_bytes")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigurationError("tls_cert and tls_key go together")
        for key in self.api_keys:
            if _CAPSOLVER_KEY_RE.match(key):
                continue
            if len(key) != 32 or not key.isascii() or not key.isalnum():
                raise ConfigurationError(
                    "every extra API key must be 32 letters and digits (CapSolver: CAP- and hex)"
                )

    def _check_dialect(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigurationError(f"protocol must be one of {', '.join(PROTOCOLS)}")
        allowed: tuple[str, ...] = DIALECTS if self.protocol == "classic" else JSON_DIALECTS
        if self.dialect not in allowed:
            raise ConfigurationError(
                f"dialect must be one of {', '.join(allowed)} with protocol {self.protocol}"
            )
        if self.over_limit_code not in OVER_LIMIT_CODES:
            raise ConfigurationError(
                f"over_limit_code must be one of {', '.join(OVER_LIMIT_CODES)}"
            )
        if self.protocol != "classic" and self.over_limit_code != OVER_LIMIT_CODES[0]:
            raise ConfigurationError(
                f"over_limit_code must be {OVER_LIMIT_CODES[0]} with the JSON protocol"
            )

    def scaled(self, seconds: float) -> float:
        """Live-provider seconds in this sandbox."""
        return seconds * self.time_scale

    def updated(self, changes: Mapping[str, object]) -> SandboxConfig:
        """A copy with ``POST /admin/config`` changes applied (``latency`` merges per kind;
        a bare number sets every kind)."""
        unknown = sorted(set(changes) - ADMIN_FIELDS)
        if unknown:
            raise ConfigurationError(
                f"cannot change {', '.join(unknown)} (only {', '.join(sorted(ADMIN_FIELDS))})"
            )
        values: dict[str, object] = {}
        for name, value in changes.items():
            if name == "latency":
                values[name] = _latency_change(self.latency, value)
            elif name == "threads":
                if isinstance(value, bool) or not isinstance(value, int):
                    raise ConfigurationError("threads must be an integer")
                values[name] = value
            elif name == "fault_paths":
                values[name] = _fault_paths(value)
            elif name == "garbage_kinds":
                values[name] = _garbage_kinds(value)
            elif name == "reject_rates":
                values[name] = _reject_rates(value)
            elif name in ("refuse_keys", "demo_rotate_sitekey"):
                if not isinstance(value, bool):
                    raise ConfigurationError(f"{name} must be true or false")
                values[name] = value
            elif name in ("dialect", "over_limit_code"):
                if not isinstance(value, str):
                    raise ConfigurationError(f"{name} must be a string")
                values[name] = value
            else:
                values[name] = _number(name, value)
        return dataclasses.replace(self, **values)  # type: ignore[arg-type]

    def describe(self) -> dict[str, object]:
        """The configuration as JSON-ready data, without keys."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["api_keys"] = len(self.api_keys)
        out["latency"] = dict(self.latency)
        out["reject_rates"] = dict(self.reject_rates)
        return out


def _number(name: str, value: object, low: float = -math.inf, high: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigurationError(f"{name} must be a number, got {value!r}")
    if not low <= value <= high:  # also rejects NaN
        raise ConfigurationError(f"{name} must be within [{low}, {high}], got {value!r}")
    return float(value)


def _reject_rates(value: object) -> Mapping[str, float]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and k for k in value):
        raise ConfigurationError('reject_rates must map "dialect", "*" or "host/dialect" to rates')
    rates = {k: _number(f"reject_rates[{k}]", v, low=0.0, high=1.0) for k, v in value.items()}
    return MappingProxyType(rates)


def _fault_paths(value: object) -> tuple[str, ...]:
    """``("in.php",)``, a list, or a comma-separated string; each one of :data:`FAULT_PATHS`."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(p, str) for p in value):
        raise ConfigurationError(f"fault_paths must be a list of endpoints, got {value!r}")
    paths = tuple(dict.fromkeys(p.strip().lstrip("/") for p in value))
    unknown = [p for p in paths if p not in FAULT_PATHS]
    if unknown:
        raise ConfigurationError(
            f"fault_paths: unknown endpoint {unknown[0]!r} (each one of {', '.join(FAULT_PATHS)})"
        )
    return paths


def _garbage_kinds(value: object) -> tuple[GarbageKind, ...]:
    """A list of :data:`GARBAGE_KINDS` (or a comma-separated string); at least one."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list | tuple) or not all(isinstance(k, str) for k in value):
        raise ConfigurationError(f"garbage_kinds must be a list of kinds, got {value!r}")
    kinds = [k for k in GARBAGE_KINDS if k in value]
    unknown = [k for k in value if k not in GARBAGE_KINDS]
    if unknown or not kinds:
        what = f"unknown kind {unknown[0]!r}" if unknown else "no kind given"
        raise ConfigurationError(
            f"garbage_kinds: {what} (one or more of {', '.join(GARBAGE_KINDS)})"
        )
    return tuple(kinds)


def _latency_change(current: Mapping[str, float], value: object) -> dict[str, float]:
    if isinstance(value, Mapping):
        merged = dict(current)
        for kind, seconds in value.items():
            merged[str(kind)] = _number(f"latency[{kind}]", seconds, low=0.0)
        return merged
    seconds = _number("latency", value, low=0.0)
    return dict.fromkeys(KINDS, seconds)
