"""Shared state in Redis: key names, the connection, and the Lua scripts that change it.

Every key lives under ``CAPTCHA_TASKS_KEY_PREFIX`` and carries a TTL; every
multi-step change is one Lua script (atomic), never check-then-set.
"""

from .keys import Keys
from .redis import redis_client, state_redis

__all__ = ["Keys", "redis_client", "state_redis"]
