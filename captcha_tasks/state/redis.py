"""Every Redis client the package opens is built here: :func:`redis_client` for a
one-off client with its own timeouts, :func:`state_redis` for the shared-state
connection (one pool per process, rebuilt after a fork)."""

from __future__ import annotations

from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..forksafe import PerProcess
from ..settings import Settings

__all__ = ["redis_client", "state_redis"]

#: Seconds a command may take before the socket gives up (a Redis that hangs).
SOCKET_TIMEOUT = 10.0
#: Seconds to open a connection.
CONNECT_TIMEOUT = 5.0

_state_clients: PerProcess[redis.Redis] = PerProcess()


def redis_client(
    settings: Settings,
    url: str,
    *,
    timeout: float = SOCKET_TIMEOUT,
    connect_timeout: float | None = None,
    decode: bool = True,
    retries: bool = True,
    **options: Any,
) -> redis.Redis:
    """A new client for ``url``: ``rediss://`` verified like the broker's, a timeout on
    every socket operation, and ``retries=False`` for callers that must answer at once
    (a probe, a Prometheus scrape) rather than ride out a Redis that is away."""
    options.update(
        socket_timeout=timeout,
        socket_connect_timeout=connect_timeout if connect_timeout is not None else min(
            timeout, CONNECT_TIMEOUT),
        decode_responses=decode,
    )  # fmt: skip
    if not retries:
        options["retry"] = Retry(NoBackoff(), 0)
    options.update(settings.redis_ssl_options(url) or {})
    return redis.Redis.from_url(url, **options)


def state_redis(settings: Settings) -> redis.Redis:
    """The process's client for ``settings.state_url``, shared by its threads."""
    return _state_clients.get(
        settings.state_url,
        lambda: redis_client(settings, settings.state_url, health_check_interval=30),
    )
