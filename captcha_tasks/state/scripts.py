"""The Lua scripts (``lua/*.lua``), loaded once per client and run by SHA."""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from typing import Any

import redis
from redis.commands.core import Script
from redis.exceptions import NoScriptError

__all__ = ["run", "run_replicated", "script", "source"]


@cache
def _source(name: str) -> str:
    return files(__package__).joinpath("lua").joinpath(f"{name}.lua").read_text(encoding="utf-8")


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


def run_replicated(
    client: redis.Redis, name: str, keys: list[str], args: list[Any], *, timeout_ms: int
) -> tuple[Any, int]:
    """Run script ``name``, then ``WAIT`` up to ``timeout_ms`` until a replica has
    everything this connection wrote: (the script's result, how many replicas did).
    Both go in one round trip on one connection (``WAIT`` counts that connection's
    writes; a replica's copy is a prefix of the master's, so a replica that has the
    script's writes has everything written before them too)."""
    found = script(client, name)
    for attempt in (1, 2):
        pipe = client.pipeline(transaction=False)
        pipe.evalsha(found.sha, len(keys), *keys, *args)
        pipe.wait(1, timeout_ms)
        result, acked = pipe.execute(raise_on_error=False)
        if isinstance(result, NoScriptError) and attempt == 1:
            client.script_load(found.script)  # a master that never ran it (a promoted one)
            continue
        for value in (result, acked):
            if isinstance(value, Exception):
                raise value
        return result, int(acked)
    raise AssertionError("unreachable")  # pragma: no cover
