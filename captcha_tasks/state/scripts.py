"""The Lua scripts (``lua/*.lua``), loaded once per client and run by SHA."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import redis
from redis.commands.core import Script

__all__ = ["run", "script", "source"]


@cache
def _source(name: str) -> str:
    return files(__package__).joinpath("lua", f"{name}.lua").read_text(encoding="utf-8")


def source(name: str) -> str:
    """The text of ``lua/<name>.lua``, for clients that register scripts themselves
    (``redis.asyncio``'s, whose ``register_script`` returns an awaitable script)."""
    return _source(name)


def script(client: redis.Redis, name: str) -> Script:
    """The registered script ``name`` for ``client`` (EVALSHA, reloading on NOSCRIPT)."""
    cache_: dict[str, Script] = client.__dict__.setdefault("_captcha_tasks_scripts", {})
    found = cache_.get(name)
    if found is None:
        found = cache_[name] = client.register_script(_source(name))
    return found


def run(client: redis.Redis, name: str, keys: list[str], args: list[Any]) -> Any:
    return script(client, name)(keys=keys, args=args)
