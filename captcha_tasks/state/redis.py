"""The shared-state Redis connection: one pool per process, rebuilt after a fork."""

from __future__ import annotations

import os
import threading
from typing import Any

import redis

from ..settings import Settings

__all__ = ["state_redis"]

_lock = threading.Lock()
_clients: dict[tuple[int, str], redis.Redis] = {}


def state_redis(settings: Settings) -> redis.Redis:
    """A client for ``settings.state_url`` (``rediss://`` verified like the broker's)."""
    key = (os.getpid(), settings.state_url)
    with _lock:
        client = _clients.get(key)
        if client is None:
            options: dict[str, Any] = {
                "socket_timeout": 10,
                "socket_connect_timeout": 5,
                "health_check_interval": 30,
                "decode_responses": True,
            }
            options.update(settings.redis_ssl_options(settings.state_url) or {})
            client = redis.Redis.from_url(settings.state_url, **options)
            _clients[key] = client
        return client
