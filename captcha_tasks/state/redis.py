"""Every Redis client the package opens is built here: :func:`redis_client` for a
one-off client with its own timeouts, :func:`state_redis` for the shared-state
connection (one pool per process, rebuilt after a fork), :func:`async_redis_client`
for ``redis.asyncio`` callers.

A ``sentinel://h1:26379;sentinel://h2:26379`` URL (:mod:`captcha_tasks.settings.redis_urls`)
gives a client of the master of ``CAPTCHA_TASKS_REDIS_SENTINEL_MASTER``: each new
connection asks the sentinels where the master is, so after a failover the client's
next connection goes to the promoted replica (redis-py's ``Sentinel.master_for``).
"""

from __future__ import annotations

from typing import Any

import redis
import redis.asyncio as aioredis
import redis.asyncio.sentinel as aiosentinel
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel

from ..forksafe import PerProcess
from ..settings import Settings
from ..settings.redis_urls import is_sentinel, parse_sentinel_url

__all__ = ["async_redis_client", "redis_client", "sentinel_kwargs", "state_redis"]

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
        socket_connect_timeout=connect_timeout
        if connect_timeout is not None
        else min(timeout, CONNECT_TIMEOUT),
        decode_responses=decode,
    )
    if not retries:
        options["retry"] = Retry(NoBackoff(), 0)
    if is_sentinel(url):
        parsed = parse_sentinel_url(url)
        sentinel = Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
            list(parsed.sentinels), sentinel_kwargs=sentinel_kwargs(settings)
        )
        # redis-py >= 8.2 types these calls (the ignores then go unused); earlier ones do not.
        master_options: dict[str, Any] = parsed.master_options()
        master: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call, unused-ignore]
            settings.redis_sentinel_master,
            redis_class=redis.Redis,
            **master_options,
            **options,
        )
        return master
    options.update(settings.redis_ssl_options(url) or {})
    return redis.Redis.from_url(url, **options)


def sentinel_kwargs(settings: Settings) -> dict[str, Any]:
    """How a client talks to the sentinels themselves (not to the master): a short
    timeout, their own password, and no retries (``retry=None``): a sentinel that does
    not answer is passed over for the next one, where redis-py's default would retry it
    ten times first. Plain values only: kombu's share of them ends up in ``inspect
    stats`` replies, which must serialize as JSON."""
    timeout = settings.redis_sentinel_timeout
    kwargs: dict[str, Any] = {
        "socket_timeout": timeout,
        "socket_connect_timeout": timeout,
        "retry": None,
    }
    if settings.redis_sentinel_password:
        kwargs["password"] = settings.redis_sentinel_password
    return kwargs


def state_redis(settings: Settings) -> redis.Redis:
    """The process's client for ``settings.state_url``, shared by its threads."""
    return _state_clients.get(
        settings.state_url,
        lambda: redis_client(settings, settings.state_url, health_check_interval=30),
    )


class _Sentinel(aiosentinel.Sentinel):
    """``redis.asyncio``'s ``Sentinel``, which closes its connections to the sentinels
    once it has asked them where the master is: an asyncio connection left open is a
    warning when it is collected, and a client closed while a connection of its pool
    was being opened (a reconnect racing a close) would leave one behind. Asked once
    per new connection to the master, not per command."""

    async def discover_master(self, service_name: str) -> Any:
        try:
            return await super().discover_master(service_name)
        finally:
            for sentinel in self.sentinels:
                await sentinel.connection_pool.disconnect()


class _BlockingSentinelPool(aiosentinel.SentinelConnectionPool, aioredis.BlockingConnectionPool):
    """The master's connections, at most ``max_connections``: a caller waits for one."""


def async_redis_client(
    settings: Settings, url: str, *, max_connections: int | None = None, **options: Any
) -> aioredis.Redis:
    """A ``redis.asyncio`` client for ``url`` (``rediss://`` verified, sentinels
    followed); ``max_connections``: a pool of that many, where a caller waits for a
    free connection (no timeout) instead of failing."""
    blocking = (
        {} if max_connections is None else {"max_connections": max_connections, "timeout": None}
    )
    if is_sentinel(url):
        parsed = parse_sentinel_url(url)
        sentinel = _Sentinel(  # type: ignore[no-untyped-call, unused-ignore]
            list(parsed.sentinels), sentinel_kwargs=sentinel_kwargs(settings)
        )
        pool_class = _BlockingSentinelPool if blocking else aiosentinel.SentinelConnectionPool
        client: aioredis.Redis = sentinel.master_for(
            settings.redis_sentinel_master,
            redis_class=aioredis.Redis,
            connection_pool_class=pool_class,
            **parsed.master_options(),
            **blocking,
            **options,
        )
        return client
    options.update(settings.redis_ssl_options(url) or {})
    if not blocking:
        return aioredis.Redis.from_url(url, **options)
    pool = aioredis.BlockingConnectionPool.from_url(url, **blocking, **options)
    return aioredis.Redis(connection_pool=pool)
