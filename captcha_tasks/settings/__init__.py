"""One typed settings object, read from the environment.

The environment variable names are a public contract (the settings reference,
docs/reference/settings.md). ``celeryconfig.py``, the solver client, the sandbox and the CLI
all read the same :class:`Settings`. The one exception is ``CAPTCHA_TASKS_VERSION``
(version.py), read at each report so a restarted worker's value is current.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from ..errors import ConfigurationError
from ..redaction import mask_url as _mask_url
from ..redaction import read_secrets_from
from .parsing import (
    DEFAULT_SOLVER_URL,
    DEFAULT_URLS,
    PROTOCOLS,
    PROVIDERS,
    Parse,
    Provider,
)
from .parsing import agent_name as _agent_name
from .parsing import between as _between
from .parsing import callback_token as _callback_token
from .parsing import callback_token_file as _callback_token_file
from .parsing import callback_url as _callback_url
from .parsing import choice as _choice
from .parsing import number as _number
from .parsing import usd as _usd
from .providers import (
    DEFAULT_PROVIDER,
    OTHER_KEY_VARIABLE,
    PROVIDERS_VARIABLE,
    SINGLE_PROVIDER_VARIABLES,
    ProviderConfig,
    provider_variables,
    read_providers,
)
from .redis_urls import check_sentinel_master, sentinel_master, split_urls, ssl_options
from .redis_urls import redis_url as _check_redis_url

__all__ = [
    "DEFAULT_SOLVER_URL",
    "DEFAULT_URLS",
    "PROTOCOLS",
    "PROVIDERS",
    "REMOVED_VARIABLES",
    "SANDBOX_AND_TESTING",
    "Provider",
    "Settings",
    "get_settings",
    "known_secrets",
    "mask_url",
]

log = logging.getLogger(__name__)

DEFAULT_REDIS_URL = "redis://localhost:6379/0"
_PREFIX_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,32}$")


def mask_url(url: str) -> str:
    """``redis://:secret@host:6379/0`` -> ``redis://:***@host:6379/0`` (for logs and repr).

    :func:`captcha_tasks.redaction.mask_url`: the one masking of URL passwords.
    """
    return _mask_url(url)


def _as_is(name: str, raw: str) -> str:
    return raw


def _key_prefix(name: str, raw: str) -> str:
    if not _PREFIX_RE.match(raw):
        raise ConfigurationError(f"{name} must be 1-32 characters of letters, digits and _.:-")
    return raw


def _domains(name: str, raw: str) -> tuple[str, ...]:
    domains = sorted({d.strip().lower().rstrip(".") for d in raw.split(",") if d.strip()})
    for domain in domains:
        if not re.fullmatch(r"[a-z0-9.:\[\]-]{1,253}", domain) or domain.startswith("."):
            raise ConfigurationError(f"{name}: {domain!r} is not a host name")
    return tuple(domains)


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything configurable, with defaults. Build it with :meth:`from_env`."""

    #: ``CAPTCHA_TASKS_PROVIDERS``: the providers to solve with, in order of preference,
    #: each a :class:`~captcha_tasks.provider_config.ProviderConfig` read from its own
    #: variables (``CAPTCHA_TASKS_<NAME>_PROTOCOL``, ``..._API_KEY``, ...). Unset: one
    #: provider named ``default``, read from the single-provider variables
    #: (``CAPTCHA_TASKS_PROVIDER``, ``CAPTCHA_TASKS_SOLVER_URL``, ``CAPTCHA_TASKS_API_KEY``,
    #: ``CAPTCHA_TASKS_THREADS``, ``CAPTCHA_TASKS_PRICES``, ``CAPTCHA_TASKS_BALANCE_FLOOR``),
    #: which are refused when it is set. Never empty; keys never logged.
    provider_configs: tuple[ProviderConfig, ...] = (ProviderConfig(),)
    #: ``CAPTCHA_TASKS_REDIS_URL``: default for the three Redis URLs below.
    redis_url: str = DEFAULT_REDIS_URL
    #: ``CAPTCHA_TASKS_BROKER_URL``: the broker's Redis (default: ``CAPTCHA_TASKS_REDIS_URL``).
    broker_url: str = DEFAULT_REDIS_URL
    #: ``CAPTCHA_TASKS_RESULT_BACKEND``: the result backend's Redis (default:
    #: ``CAPTCHA_TASKS_REDIS_URL``).
    result_backend: str = DEFAULT_REDIS_URL
    #: ``CAPTCHA_TASKS_STATE_URL``: shared state (budget, cookies, tokens, ...).
    state_url: str = DEFAULT_REDIS_URL
    #: ``CAPTCHA_TASKS_REDIS_CA_CERTS``: CA bundle to verify ``rediss://`` servers with
    #: (default: the system's). Certificates are always verified.
    redis_ca_certs: str | None = None
    #: ``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER``: the service the sentinels of ``sentinel://``
    #: URLs monitor (required with one; :mod:`captcha_tasks.redis_urls`).
    redis_sentinel_master: str = ""
    #: ``CAPTCHA_TASKS_REDIS_SENTINEL_PASSWORD``: the sentinels' own (``requirepass`` in
    #: sentinel.conf); the data nodes' is the URL's. Never logged.
    redis_sentinel_password: str = dataclasses.field(default="", repr=False)
    #: ``CAPTCHA_TASKS_REDIS_SENTINEL_TIMEOUT``: seconds for one question to a sentinel.
    redis_sentinel_timeout: float = 1.0
    #: ``CAPTCHA_TASKS_REDIS_SENTINEL_WAIT``: seconds a submit's ``sending`` mark waits for
    #: a replica to have it before the provider is called (0: no wait; sentinel only).
    redis_sentinel_wait: float = 1.0
    #: ``CAPTCHA_TASKS_TIME_SCALE``: sandbox and testing only (:data:`SANDBOX_AND_TESTING`):
    #: multiplies every solver timing default (waits, intervals, deadlines, lifetimes),
    #: so that ``make run`` and the tests run against a sandbox whose clock is fast.
    #: Against a real provider leave it at 1.
    time_scale: float = 1.0
    #: ``CAPTCHA_TASKS_HTTP_TIMEOUT``: seconds for one HTTP call to the provider.
    http_timeout: float = 30.0
    #: ``CAPTCHA_TASKS_KEY_PREFIX``: prefix of every shared-state key in Redis.
    key_prefix: str = "ct:"
    #: ``CAPTCHA_TASKS_MAX_IMAGE_BYTES``: largest image accepted (the stricter documented limit).
    max_image_bytes: int = 100_000
    #: ``CAPTCHA_TASKS_ALTCHA_MAX_NUMBER``: the largest ``maxnumber`` of an ALTCHA v1
    #: challenge ``solve_altcha`` takes; larger ones are refused unsolved
    #: (``ALTCHA_TOO_HARD``). The worker hashes up to that many numbers on one core, about
    #: 2 million a second (``captcha-tasks-dev bench altcha``): the default bounds a solve at a
    #: few seconds.
    altcha_max_number: int = 10_000_000
    #: ``CAPTCHA_TASKS_ALTCHA_MAX_SECONDS``: seconds of one core ``solve_altcha`` may spend
    #: on a challenge. Checked before any work against what the challenge is expected to
    #: take (v1: its whole range; v2: the key derivations its prefix makes expected, at
    #: rates the process measures), refused unsolved over it (``ALTCHA_TOO_HARD``); and
    #: the search's deadline, past which it gives up (``SolveTimeout``, ``ALTCHA_DEADLINE``).
    altcha_max_seconds: float = 20.0
    #: ``CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB``: MiB one key derivation of an ALTCHA v2
    #: challenge may allocate (scrypt's ``128 * r * (N + p)`` bytes, Argon2id's
    #: ``memoryCost`` KiB), in each pool process that solves one; more is refused before
    #: any work (``ALTCHA_TOO_MUCH_MEMORY``).
    altcha_max_memory_mib: int = 256
    #: ``CAPTCHA_TASKS_ALTCHA_SOLVER``: who solves an ALTCHA. ``worker`` (the default):
    #: the worker itself, never a provider, nothing spent. ``provider``: every v1 challenge
    #: is an ordinary solve at a configured provider that offers ALTCHA
    #: (``TYPE_NOT_OFFERED`` where none does), paid as any solve; a v2 one is refused
    #: (``ALTCHA_V2_NOT_OFFERED``: no provider documents v2). ``auto``: the worker solves a
    #: v1 challenge within the ``CAPTCHA_TASKS_ALTCHA_MAX_*`` bounds, a provider the ones
    #: past them (instead of refusing them); v2 challenges are the worker's, within them.
    altcha_solver: Literal["worker", "provider", "auto"] = "worker"
    #: ``CAPTCHA_TASKS_QUEUE_TIMEOUT``: seconds a solve may wait for a free thread
    #: before it fails with SolveTimeout (not scaled: it is the operator's patience).
    queue_timeout: float = 600.0
    #: ``CAPTCHA_TASKS_REPORT_WINDOW``: seconds a finished solve's job stays in Redis so
    #: that ``report_solution`` can still report it (not scaled). Part of every job's TTL.
    #: Providers refuse reports later than ~15 min after submit: the default keeps that.
    report_window: float = 900.0
    #: ``CAPTCHA_TASKS_BATCH_POLL``: ``auto`` polls every due captcha in one
    #: ``res.php?action=get&ids=...`` request and falls back to one by one if the
    #: provider refuses it; ``on`` never falls back; ``off`` polls one by one.
    batch_poll: Literal["auto", "on", "off"] = "auto"
    #: ``CAPTCHA_TASKS_POLL_INTERVAL``: seconds between batched polls (scaled; one by one,
    #: three times it). Never below the provider's own limits (engine.timing.PollGrid).
    poll_interval: float = 1.0
    #: ``CAPTCHA_TASKS_POLL_READS``: the reads per solve (1.5-10) one-by-one polls aim at
    #: on average, placed at quantiles of the ready times learned per provider and type
    #: (engine.placement; batched polls keep the grid): more collect sooner; the
    #: provider's own limits hold regardless.
    poll_reads: float = 2.0
    #: ``CAPTCHA_TASKS_ENGINE_THREADS``: concurrent provider calls per worker's engine.
    engine_threads: int = 16
    #: ``CAPTCHA_TASKS_READERS``: which engines read a provider's captchas. ``one``: the
    #: engine holding the provider's reader lease reads them all and keeps each between
    #: reads in memory (engine.reader; Redis 6.2: on an older one every engine reads).
    #: ``all``: any engine claims the captchas due, each read moving them in Redis, about
    #: half again as many Redis commands a solve with batch reads. A cluster may run both
    #: while a rolling deploy changes it.
    readers: Literal["all", "one"] = "one"
    #: ``CAPTCHA_TASKS_ALLOWED_DOMAINS``: comma-separated hosts that page tasks may
    #: fetch (``example.com`` also allows its subdomains; IP literals allowed only as
    #: written). Empty: page tasks fetch nothing.
    allowed_domains: tuple[str, ...] = ()
    #: ``CAPTCHA_TASKS_ACCEPTANCE_HOSTS``: comma-separated site hosts whose accepted and
    #: rejected tokens are also counted per host (exact host names, without port); every
    #: other host counts only in its provider's and type's figures, so the counters stay
    #: bounded (:mod:`captcha_tasks.engine.acceptance`).
    acceptance_hosts: tuple[str, ...] = ()
    #: ``CAPTCHA_TASKS_ACCEPTANCE_WINDOW``: seconds of feedback the acceptance figures
    #: cover (per-minute buckets, not scaled): short, so a provider whose tokens sites
    #: start to refuse shows within minutes.
    acceptance_window: float = 900.0
    #: ``CAPTCHA_TASKS_ROUTING``: how a request's route is ordered. ``order``: as
    #: ``CAPTCHA_TASKS_PROVIDERS`` lists them. ``cost``: by expected cost per accepted token
    #: for the captcha's type (and host, if listed in ``CAPTCHA_TASKS_ACCEPTANCE_HOSTS``),
    #: drawn afresh for each request from the acceptance window, whose verdicts weigh
    #: half as much every sixth of it (Thompson sampling,
    #: :mod:`captcha_tasks.engine.cost_routing`).
    routing: Literal["order", "cost"] = "order"
    #: ``CAPTCHA_TASKS_PAGE_ATTEMPTS``: tokens ``fetch_page`` submits to one challenged
    #: page, each from a fresh solve, before it fails with ``ChallengeRejected`` (1: no
    #: retry). Every refused token is counted rejected and reported to its provider.
    page_attempts: int = 3
    #: ``CAPTCHA_TASKS_MAX_PAGE_BYTES``: the largest body a worker reads from a target
    #: site (a page, a form's answer, an ALTCHA challenge), after decompression. Read as
    #: it arrives and refused past this (``PageTooLarge``), before it is all in memory.
    max_page_bytes: int = 10 * 1024 * 1024
    #: ``CAPTCHA_TASKS_PAGE_DEADLINE``: seconds one fetch from a target site may take,
    #: redirects and the whole body included (not scaled: sites keep real time); past
    #: it the fetch is refused (``PageTooSlow``), however steadily the site sends.
    page_deadline: float = 60.0
    #: ``CAPTCHA_TASKS_POOL_MIN_LIFE``: seconds of life a pooled token must have left
    #: to be handed out (scaled, like the token lifetimes it is compared with).
    pool_min_life: float = 10.0
    #: ``CAPTCHA_TASKS_LOCK_TTL``: seconds a session lock lives unless extended
    #: (a crashed holder's lock frees itself after this).
    lock_ttl: float = 60.0
    #: ``CAPTCHA_TASKS_PROXY_LEASE_TTL``: seconds a worker's proxy lease lives unless
    #: its heartbeat renews it (a dead worker's proxy comes back after this).
    proxy_lease_ttl: float = 30.0
    #: ``CAPTCHA_TASKS_PROXY_COOLDOWN``: seconds a proxy reported bad stays out.
    proxy_cooldown: float = 300.0
    #: ``CAPTCHA_TASKS_STARTUP_TIMEOUT``: seconds a starting worker waits for its Redis
    #: (broker, result backend, shared state) and for each provider's balance call
    #: before it decides: a Redis that never answered stops it (not scaled).
    startup_timeout: float = 20.0
    #: ``CAPTCHA_TASKS_HEARTBEAT_INTERVAL``: seconds between a worker's liveness beats.
    heartbeat_interval: float = 5.0
    #: ``CAPTCHA_TASKS_HEARTBEAT_FILE``: a file the worker also touches on each beat.
    heartbeat_file: str | None = None
    #: ``CAPTCHA_TASKS_METRICS_PORT``: the worker's ``/metrics`` port (None: off; 0: any).
    metrics_port: int | None = None
    #: ``CAPTCHA_TASKS_METRICS_ADDRESS``: where ``/metrics`` listens.
    metrics_address: str = "127.0.0.1"
    #: ``CAPTCHA_TASKS_RESULT_EXPIRES``: seconds a solve result is kept in the backend.
    result_expires: int = 86_400
    #: ``CAPTCHA_TASKS_VISIBILITY_TIMEOUT``: seconds after which Redis redelivers a
    #: message nobody acknowledged (a SIGKILLed worker's reserved ones come back then).
    #: Countdowns are capped at a quarter of it, so nothing is redelivered while waiting.
    visibility_timeout: int = 3600
    #: ``CAPTCHA_TASKS_CALLBACK_URL``: the public base URL providers push answers to
    #: (docs/CALLBACKS.md); None: no callbacks, polls only.
    callback_url: str | None = None
    #: ``CAPTCHA_TASKS_CALLBACK_TOKEN`` (or ``..._TOKEN_FILE``): the key of the mac in every
    #: callback URL (:func:`~.engine.callbacks.callback_mac`), itself in none. Never logged.
    callback_token: str = dataclasses.field(default="", repr=False)
    #: ``CAPTCHA_TASKS_CALLBACK_PORT``: the worker's callback receiver port (None: off; 0: any).
    callback_port: int | None = None
    #: ``CAPTCHA_TASKS_CALLBACK_ADDRESS``: where the callback receiver listens.
    callback_address: str = "127.0.0.1"
    #: ``CAPTCHA_TASKS_MCP_AGENTS_FILE``: the JSON file of the agents ``captcha-tasks mcp
    #: --transport http`` serves, each a name, a bearer token and its caps
    #: (``--agents-file`` overrides it). Read when the command starts.
    mcp_agents_file: str | None = None
    #: ``CAPTCHA_TASKS_MCP_AGENTS``: the same JSON given in the variable itself (the file
    #: wins when both are set). It holds the agents' tokens: masked everywhere.
    mcp_agents: str = dataclasses.field(default="", repr=False)
    #: ``CAPTCHA_TASKS_MCP_AGENT``: the name the one agent of ``captcha-tasks mcp`` over
    #: stdio is counted under (``--agent`` overrides it); servers that use the same name
    #: share its caps.
    mcp_agent: str = "stdio"
    #: ``CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT``: an MCP agent's cap on solves in flight, unless
    #: its entry sets one (``--max-in-flight`` overrides it; 0: no cap).
    mcp_max_in_flight: int = 4
    #: ``CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR``: an MCP agent's cap on what its solves
    #: cost in the last hour, in USD, unless its entry sets one (``--max-spend-per-hour``
    #: overrides it; 0: no cap).
    mcp_max_spend_per_hour: Decimal = Decimal("1.00")
    #: ``CAPTCHA_TASKS_MCP_TIMEOUT``: seconds an MCP tool call waits for its task
    #: (``--timeout`` overrides it); the task goes on past it and is counted.
    mcp_timeout: float = 600.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Read the settings from ``environ`` (default: ``os.environ``).

        Raises :class:`ConfigurationError` naming the variable at fault. A variable
        that is no longer read (:data:`REMOVED_VARIABLES`) is warned about and ignored.
        """
        env = os.environ if environ is None else environ
        for removed, why in REMOVED_VARIABLES.items():
            if env.get(removed, "").strip():
                log.warning("%s is no longer read and is ignored: %s", removed, why)
        values: dict[str, Any] = {"provider_configs": read_providers(env, _RESERVED)}
        # In field order, so a derived default can read the settings before it.
        for field in dataclasses.fields(cls):
            if field.name not in _SOURCES:
                continue
            variable, parse = _SOURCES[field.name]
            raw = env.get(variable, "").strip()
            if raw:
                values[field.name] = parse(variable, raw)
            elif field.name in _DERIVED_DEFAULTS:
                values[field.name] = _DERIVED_DEFAULTS[field.name](values, env)
            else:
                values[field.name] = field.default
        if (values["callback_url"] or values["callback_port"] is not None) and not values[
            "callback_token"
        ]:
            raise ConfigurationError("callbacks need CAPTCHA_TASKS_CALLBACK_TOKEN (or _FILE)")
        return cls(**values)

    def providers(self) -> tuple[ProviderConfig, ...]:
        """The providers to solve with, in order of preference: the named ones, else
        the one named ``default`` of the single-provider variables."""
        return self.provider_configs

    def provider_config(self, name: str = "") -> ProviderConfig:
        """The configured provider ``name`` (``""``: the preferred one); ``KeyError``
        if none is named so."""
        if not name:
            return self.provider_configs[0]
        for config in self.provider_configs:
            if config.name == name:
                return config
        raise KeyError(name)

    def has_api_key(self) -> bool:
        """Whether there is a key to solve with (a named provider always has one; the
        default one may have none: a process that only enqueues needs none)."""
        return any(config.api_key for config in self.provider_configs)

    def require_api_key(self) -> str:
        """The preferred provider's key, or :class:`ConfigurationError` if it is not set."""
        return self.provider_configs[0].require_api_key()

    def redis_ssl_options(self, url: str) -> dict[str, object] | None:
        """SSL options for a ``rediss://`` URL (``None`` for others): verify the server
        certificate, against ``redis_ca_certs`` when set."""
        return ssl_options(url, self.redis_ca_certs)

    def scaled(self, seconds: float) -> float:
        """A solver timing default (first-poll wait, interval, deadline) in this deployment."""
        return seconds * self.time_scale

    def __repr__(self) -> str:
        # The dataclass repr would show URL passwords (a log line, a traceback's locals).
        shown = ", ".join(f"{name}={value!r}" for name, value in self.describe().items())
        return f"Settings({shown})"

    def describe(self) -> dict[str, object]:
        """The settings as a dict with secrets masked (for logs, ``status`` and docs)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        del out["provider_configs"]  # shown as "providers", keys masked
        out["callback_token"] = "***" if self.callback_token else ""
        out["redis_sentinel_password"] = "***" if self.redis_sentinel_password else ""
        out["mcp_agents"] = "***" if self.mcp_agents else ""
        out["mcp_max_spend_per_hour"] = str(self.mcp_max_spend_per_hour)
        # Every URL-valued setting (broker, backend, state, ...): its password.
        for name, value in out.items():
            if isinstance(value, str) and "://" in value:
                out[name] = mask_url(value)
        out["providers"] = [config.describe() for config in self.provider_configs]
        return out

    def variables(self) -> dict[str, object]:
        """:meth:`describe` keyed by the variable each value is read from
        (``CAPTCHA_TASKS_POLL_READS``, not ``poll_reads``), secrets masked alike. The
        providers come first, each by its own variables: the single-provider ones for
        the ``default`` provider, else ``CAPTCHA_TASKS_PROVIDERS`` and each named one's."""
        described = self.describe()
        out: dict[str, object] = {}
        named = self.provider_configs[0].name != DEFAULT_PROVIDER or len(self.provider_configs) > 1
        if named:
            out[PROVIDERS_VARIABLE] = [config.name for config in self.provider_configs]
        for config in self.provider_configs:
            out.update(provider_variables(config, named=named))
        out.update({source: described[name] for name, (source, _) in _SOURCES.items()})
        return out


#: Where each :class:`Settings` field comes from: its variable and how its value is read.
#: An unset or blank variable gives the field's default (or its derived default below).
_SOURCES: dict[str, tuple[str, Parse]] = {
    "redis_url": ("CAPTCHA_TASKS_REDIS_URL", _check_redis_url),
    "broker_url": ("CAPTCHA_TASKS_BROKER_URL", _check_redis_url),
    "result_backend": ("CAPTCHA_TASKS_RESULT_BACKEND", _check_redis_url),
    "state_url": ("CAPTCHA_TASKS_STATE_URL", _check_redis_url),
    "redis_ca_certs": ("CAPTCHA_TASKS_REDIS_CA_CERTS", _as_is),
    "redis_sentinel_master": ("CAPTCHA_TASKS_REDIS_SENTINEL_MASTER", sentinel_master),
    "redis_sentinel_password": ("CAPTCHA_TASKS_REDIS_SENTINEL_PASSWORD", _as_is),
    "redis_sentinel_timeout": ("CAPTCHA_TASKS_REDIS_SENTINEL_TIMEOUT", _number(float, 0.05)),
    "redis_sentinel_wait": ("CAPTCHA_TASKS_REDIS_SENTINEL_WAIT", _between(float, 0, 5, "seconds")),
    "time_scale": ("CAPTCHA_TASKS_TIME_SCALE", _number(float, 0.001)),
    "http_timeout": ("CAPTCHA_TASKS_HTTP_TIMEOUT", _number(float, 0.1)),
    "key_prefix": ("CAPTCHA_TASKS_KEY_PREFIX", _key_prefix),
    "max_image_bytes": ("CAPTCHA_TASKS_MAX_IMAGE_BYTES", _number(int, 100)),
    "altcha_max_number": ("CAPTCHA_TASKS_ALTCHA_MAX_NUMBER", _number(int, 1)),
    "altcha_max_seconds": (
        "CAPTCHA_TASKS_ALTCHA_MAX_SECONDS",
        _between(float, 0.01, 3600, "seconds"),
    ),
    "altcha_max_memory_mib": (
        "CAPTCHA_TASKS_ALTCHA_MAX_MEMORY_MIB",
        _between(int, 1, 65_536, "MiB"),
    ),
    "altcha_solver": ("CAPTCHA_TASKS_ALTCHA_SOLVER", _choice("worker", "provider", "auto")),
    "queue_timeout": ("CAPTCHA_TASKS_QUEUE_TIMEOUT", _number(float, 1.0)),
    "report_window": ("CAPTCHA_TASKS_REPORT_WINDOW", _number(float, 0.0)),
    "batch_poll": ("CAPTCHA_TASKS_BATCH_POLL", _choice("auto", "on", "off")),
    "poll_interval": ("CAPTCHA_TASKS_POLL_INTERVAL", _number(float, 0.001)),
    "poll_reads": ("CAPTCHA_TASKS_POLL_READS", _between(float, 1.5, 10.0, "reads per solve")),
    "engine_threads": ("CAPTCHA_TASKS_ENGINE_THREADS", _number(int, 1)),
    "readers": ("CAPTCHA_TASKS_READERS", _choice("all", "one")),
    "allowed_domains": ("CAPTCHA_TASKS_ALLOWED_DOMAINS", _domains),
    "acceptance_hosts": ("CAPTCHA_TASKS_ACCEPTANCE_HOSTS", _domains),
    "acceptance_window": (
        "CAPTCHA_TASKS_ACCEPTANCE_WINDOW",
        _between(float, 60, 86_400, "seconds"),
    ),
    "routing": ("CAPTCHA_TASKS_ROUTING", _choice("order", "cost")),
    "page_attempts": ("CAPTCHA_TASKS_PAGE_ATTEMPTS", _between(int, 1, 10, "attempts")),
    "max_page_bytes": (
        "CAPTCHA_TASKS_MAX_PAGE_BYTES",
        _between(int, 1024, 1024**3, "bytes"),
    ),
    "page_deadline": ("CAPTCHA_TASKS_PAGE_DEADLINE", _between(float, 1, 3600, "seconds")),
    "pool_min_life": ("CAPTCHA_TASKS_POOL_MIN_LIFE", _number(float, 0.0)),
    "lock_ttl": ("CAPTCHA_TASKS_LOCK_TTL", _number(float, 0.1)),
    "proxy_lease_ttl": ("CAPTCHA_TASKS_PROXY_LEASE_TTL", _number(float, 0.1)),
    "proxy_cooldown": ("CAPTCHA_TASKS_PROXY_COOLDOWN", _number(float, 0.0)),
    "startup_timeout": ("CAPTCHA_TASKS_STARTUP_TIMEOUT", _between(float, 1, 600, "seconds")),
    "heartbeat_interval": (
        "CAPTCHA_TASKS_HEARTBEAT_INTERVAL",
        _between(float, 0.1, 300, "seconds"),
    ),
    "heartbeat_file": ("CAPTCHA_TASKS_HEARTBEAT_FILE", _as_is),
    "metrics_port": ("CAPTCHA_TASKS_METRICS_PORT", _between(int, 0, 65535, "a port number")),
    "metrics_address": ("CAPTCHA_TASKS_METRICS_ADDRESS", _as_is),
    "result_expires": ("CAPTCHA_TASKS_RESULT_EXPIRES", _number(int, 60)),
    "visibility_timeout": ("CAPTCHA_TASKS_VISIBILITY_TIMEOUT", _number(int, 10)),
    "callback_url": ("CAPTCHA_TASKS_CALLBACK_URL", _callback_url),
    "callback_token": ("CAPTCHA_TASKS_CALLBACK_TOKEN", _callback_token),
    "callback_port": ("CAPTCHA_TASKS_CALLBACK_PORT", _between(int, 0, 65535, "a port number")),
    "callback_address": ("CAPTCHA_TASKS_CALLBACK_ADDRESS", _as_is),
    "mcp_agents_file": ("CAPTCHA_TASKS_MCP_AGENTS_FILE", _as_is),
    "mcp_agents": ("CAPTCHA_TASKS_MCP_AGENTS", _as_is),
    "mcp_agent": ("CAPTCHA_TASKS_MCP_AGENT", _agent_name),
    "mcp_max_in_flight": ("CAPTCHA_TASKS_MCP_MAX_IN_FLIGHT", _number(int, 0)),
    "mcp_max_spend_per_hour": ("CAPTCHA_TASKS_MCP_MAX_SPEND_PER_HOUR", _usd),
    "mcp_timeout": ("CAPTCHA_TASKS_MCP_TIMEOUT", _number(float, 1.0)),
}

#: Defaults that follow settings read before them rather than a constant.
_DERIVED_DEFAULTS: dict[str, Callable[[Mapping[str, Any], Mapping[str, str]], Any]] = {
    "broker_url": lambda earlier, env: earlier["redis_url"],
    "result_backend": lambda earlier, env: earlier["redis_url"],
    "state_url": lambda earlier, env: earlier["redis_url"],
    # Unset: "", unless a Redis URL read before it is a sentinel:// one (then an error).
    "redis_sentinel_master": lambda earlier, env: check_sentinel_master(earlier, _SOURCES),
    "callback_token": lambda earlier, env: (
        _callback_token_file(
            "CAPTCHA_TASKS_CALLBACK_TOKEN_FILE", env["CAPTCHA_TASKS_CALLBACK_TOKEN_FILE"].strip()
        )
        if env.get("CAPTCHA_TASKS_CALLBACK_TOKEN_FILE", "").strip()
        else ""
    ),
}


#: The settings the reference lists under "Sandbox and testing", apart from the
#: operator's: they exist so the sandbox and the tests can run a deployment fast.
SANDBOX_AND_TESTING: frozenset[str] = frozenset({"time_scale"})

#: Variables no longer read, each with what replaced it: set, they are warned about
#: once per read and ignored, so an older environment still starts.
REMOVED_VARIABLES: dict[str, str] = {
    "CAPTCHA_TASKS_POLL_PLACEMENT": (
        "one-by-one polls always go at quantiles of the learned ready times "
        "(tune them with CAPTCHA_TASKS_POLL_READS)"
    ),
}

#: Every other setting's variable: no provider name may make one of its variables.
_RESERVED: frozenset[str] = frozenset(
    {variable for variable, _ in _SOURCES.values()}
    | set(SINGLE_PROVIDER_VARIABLES)
    | {OTHER_KEY_VARIABLE, "CAPTCHA_TASKS_VERSION", "CAPTCHA_TASKS_CONFIG", PROVIDERS_VARIABLE}
    | {"CAPTCHA_TASKS_CALLBACK_TOKEN_FILE"}
    | set(REMOVED_VARIABLES)
)


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings, read once from the environment."""
    return Settings.from_env()


_secrets_of: tuple[object, tuple[str, ...]] = (None, ())


def known_secrets() -> tuple[str, ...]:
    """The API keys and the passwords of our Redis and solver URLs, of the process-wide
    settings, longest first: what :mod:`captcha_tasks.redaction` masks wherever it
    occurs (none while the environment cannot be read)."""
    global _secrets_of
    try:
        settings = get_settings()
    except Exception:  # a malformed environment stops the process elsewhere
        return ()
    if _secrets_of[0] is settings:
        return _secrets_of[1]
    providers = settings.providers()  # every configured provider's key and URL
    found = {settings.redis_sentinel_password, *(p.api_key for p in providers)}
    redis = (settings.redis_url, settings.broker_url, settings.result_backend, settings.state_url)
    # A list of sentinels (sentinel://h1;sentinel://h2) is one URL each.
    for url in (
        *(part for r in redis for part in split_urls(r)),
        *(p.url for p in providers),
    ):
        try:
            password = urlsplit(url).password or ""
        except ValueError:
            continue
        found.update((password, unquote(password)))  # as written in URLs, and as used
    # Very short secrets would mask ordinary text; none of ours is that short.
    secrets = tuple(sorted((s for s in found if len(s) >= 4), key=len, reverse=True))
    _secrets_of = (settings, secrets)
    return secrets


read_secrets_from(known_secrets)
