"""What a secret scan reads from Redis: every key and value as text, messages decoded.

Used by the Flower secret-scan test and the fault suite's rows.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import redis

__all__ = ["decoded_message", "redis_dump"]


def decoded_message(value: bytes) -> str:
    """A value as stored and, if it is a kombu message (queued, or ``[message, exchange,
    routing key]`` in the unacked hash), its base64 body decoded too."""
    text = value.decode(errors="replace")
    try:
        envelope = json.loads(text)
        if isinstance(envelope, list):
            envelope = envelope[0]
        if envelope.get("properties", {}).get("body_encoding") == "base64":
            return text + "\n" + base64.b64decode(envelope["body"]).decode(errors="replace")
    except (ValueError, AttributeError, TypeError, KeyError, IndexError):
        pass
    return text


def redis_dump(client: redis.Redis, exclude: set[str]) -> tuple[str, int]:
    """Every key (but ``exclude``) and its value, type-aware, as text; and the count.
    List items and hash values are also decoded as broker messages."""
    parts: list[str] = []
    count = 0
    for key in client.scan_iter(count=500):
        name = key.decode(errors="replace")
        if name in exclude:
            continue
        count += 1
        kind = client.type(key).decode()
        value: Any
        if kind == "string":
            value = client.get(key)
        elif kind == "hash":
            value = client.hgetall(key)
            value = {**value, **{k: decoded_message(v) for k, v in value.items()}}
        elif kind == "list":
            value = [decoded_message(v) for v in client.lrange(key, 0, -1)]
        elif kind == "set":
            value = client.smembers(key)
        elif kind == "zset":
            value = client.zrange(key, 0, -1, withscores=True)
        elif kind == "stream":
            value = client.xrange(key)
        else:
            value = kind
        parts.append(f"{name} {kind} {value!r}")
    return "\n".join(parts), count
