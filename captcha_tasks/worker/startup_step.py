"""What a starting worker decides before it takes work (a worker bootstep).

- **Redis**: the broker, the result backend and the shared state each answer ``PING``
  within ``CAPTCHA_TASKS_STARTUP_TIMEOUT`` (20 s). One that does not gives one line
  naming its variable and its URL (masked), and the worker exits with
  ``EX_UNAVAILABLE`` (69), where Celery's consumer on its own would retry the broker a
  hundred times while the engine and the proxy lease each logged their own retries.
- **Keys**: one balance call per configured provider, side by side, within the same
  timeout. A refused key gives one line naming the key's variable and the provider's
  code; that provider is taken out of this worker (its engine starts paused, as after
  a refusal met later: while no live worker has a key it takes, the requests routed to
  it go to the next provider of their route). With no provider left the worker exits
  with ``EX_CONFIG`` (78).
  A provider that does not answer, or answers anything but a refusal, is not taken
  out: that may pass, and the engine meets it like any other provider trouble.

Once Redis answered, an outage later is retried as before by each part on its own,
and reported once per outage (:mod:`captcha_tasks.state.outage`): Celery's consumer's
reports of its reconnections go there too
(:mod:`.celery_internals.consumer_log`).

The steps that use Redis or the providers (the engine, the proxy lease, the callback
receiver, metrics) require this one, and the consumer starts after every worker step.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any, ClassVar

import redis
from celery import bootsteps

from ..errors import InvalidApiKey, SolverError
from ..provider import make_provider
from ..redaction import mask_url, mask_urls_in
from ..settings import Settings, get_settings
from ..settings.providers import DEFAULT_PROVIDER, key_variable
from ..state.redis import redis_client
from .celery_internals.consumer_log import install_consumer_filter

__all__ = [
    "StartupCheckStep",
    "redis_in_use",
    "refused_keys",
    "unreachable_redis",
]

log = logging.getLogger(__name__)

#: Exit statuses (sysexits.h): a service this worker needs is unavailable; its
#: configuration is wrong.
EX_UNAVAILABLE = 69
EX_CONFIG = 78


def redis_in_use(settings: Settings, environ: Mapping[str, str]) -> list[tuple[str, str]]:
    """Each distinct Redis URL the worker uses, with the variable that set it
    (``CAPTCHA_TASKS_REDIS_URL`` unless a more specific one is set)."""
    out: list[tuple[str, str]] = []
    for variable, url in (
        ("CAPTCHA_TASKS_BROKER_URL", settings.broker_url),
        ("CAPTCHA_TASKS_RESULT_BACKEND", settings.result_backend),
        ("CAPTCHA_TASKS_STATE_URL", settings.state_url),
    ):
        named = variable if environ.get(variable, "").strip() else "CAPTCHA_TASKS_REDIS_URL"
        if all(url != seen for _, seen in out):
            out.append((named, url))
    return out


def unreachable_redis(
    settings: Settings, environ: Mapping[str, str], timeout: float
) -> tuple[str, str, str] | None:
    """The first Redis in use that did not answer ``PING`` within ``timeout`` seconds
    (tried again every second): its variable, its masked URL and the last error."""
    deadline = time.monotonic() + timeout
    for variable, url in redis_in_use(settings, environ):
        client = redis_client(settings, url, timeout=2.0, connect_timeout=2.0, retries=False)
        try:
            while True:
                try:
                    client.ping()
                    break
                except (redis.RedisError, OSError) as exc:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        return variable, mask_url(url), mask_urls_in(str(exc))
                    time.sleep(min(1.0, left))
        finally:
            client.close()
    return None


def refused_keys(settings: Settings, timeout: float) -> dict[str, InvalidApiKey]:
    """One balance call per configured provider, side by side: the providers that
    refused their key, by name. No answer within ``timeout`` (or any other error) is
    not a refusal."""
    configs = settings.providers()

    def balance(name: str) -> None:
        config = next(c for c in configs if c.name == name)
        make_provider(settings, config).balance()

    refused: dict[str, InvalidApiKey] = {}
    pool = ThreadPoolExecutor(len(configs), thread_name_prefix="startup-balance")
    calls = {pool.submit(balance, c.name): c.name for c in configs}
    done, _ = wait(calls, timeout=timeout)
    pool.shutdown(wait=False, cancel_futures=True)
    for call, name in calls.items():
        if call not in done:
            log.warning("provider %s: no answer to a balance call in %.0f s", name, timeout)
            continue
        exc = call.exception()
        if isinstance(exc, InvalidApiKey):
            refused[name] = exc
        elif isinstance(exc, SolverError):
            log.warning("provider %s: a balance call at start failed: %s", name, exc)
        elif exc is not None:
            log.warning("provider %s: a balance call at start failed: %r", name, exc)
    return refused


def _say_refused(name: str, variable: str, exc: InvalidApiKey, *, last: bool) -> None:
    who = "the provider" if name == DEFAULT_PROVIDER else f"provider {name}"
    if last:
        log.error(
            "%s refuses the key in %s (%s): no provider is left to solve with; the worker stops",
            who,
            variable,
            exc.code,
        )
    else:
        log.error(
            "%s refuses the key in %s (%s): taken out of this worker (its engine waits for "
            "the key to be accepted; requests go to the next provider of their route)",
            who,
            variable,
            exc.code,
        )


class StartupCheckStep(bootsteps.StartStopStep):  # type: ignore[misc]
    """Redis answers and the providers take their keys, or the worker stops (module doc)."""

    requires: ClassVar[set[str]] = {"celery.worker.components:Pool"}

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        #: The providers whose key was refused at start (read by the engine step).
        worker.refused_keys = {}

    def start(self, worker: Any) -> None:
        settings = get_settings()
        timeout = settings.startup_timeout
        down = unreachable_redis(settings, os.environ, timeout)
        if down is not None:
            variable, url, error = down
            log.error(
                "cannot reach Redis at %s (%s) within %.0f s (%s): the worker stops",
                url,
                variable,
                timeout,
                error.rstrip("."),
            )
            raise SystemExit(EX_UNAVAILABLE)
        install_consumer_filter()
        if not settings.has_api_key():
            return  # no key at all: the engine step says so
        refused = refused_keys(settings, timeout)
        names = [c.name for c in settings.providers()]
        left = [name for name in names if name not in refused]
        for name, exc in refused.items():
            _say_refused(name, key_variable(name, os.environ), exc, last=not left)
        if not left:
            raise SystemExit(EX_CONFIG)
        worker.refused_keys = refused
