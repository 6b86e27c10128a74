"""What a secret scan reads from Redis: every key and value as text, messages decoded;
and what it looks for: the secrets a test names, plus the password of every URL in
the task arguments it sent.

Used by the Flower secret-scan test, the fault suite's rows and the page tests::

    needles = scan_needles([API_KEY], task_args=[(url,), {"form": form}])
    assert not leaks({"worker log": worker.log(), "redis": redis_dump(raw, set())[0]},
                     needles)
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

import redis

__all__ = ["decoded_message", "leaks", "redis_dump", "scan_needles", "url_passwords"]

#: Shorter needles would be found in ordinary text: a test must pick longer ones.
MIN_NEEDLE = 6
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?P<rest>\S+)")


def _passwords_of(rest: str) -> list[str]:
    """The password(s) of what follows ``scheme://``: as urlsplit reads it (userinfo
    up to the last ``@`` of the netloc), and, for a password holding ``/``, ``?`` or
    ``#`` (``user:pa/ss@host``), up to the last ``@`` of the URL."""
    netloc = re.split(r"[/?#]", rest, maxsplit=1)[0]
    found = []
    if "@" in netloc:
        _, colon, password = netloc.rpartition("@")[0].partition(":")
        if colon:
            found.append(password)
    elif "@" in rest and ":" in netloc:
        host, _, after = netloc.partition(":")
        if not after.isdigit() and not host.startswith("["):  # not host:port, not IPv6
            found.append(rest.rpartition("@")[0].partition(":")[2])
    return found


def url_passwords(*values: Any) -> set[str]:
    """The password of every ``scheme://user:password@`` URL in ``values`` (task
    arguments: strings, at any depth of lists, tuples, sets and dict keys and
    values), as written and percent-decoded."""
    found: set[str] = set()
    todo: list[Any] = list(values)
    while todo:
        value = todo.pop()
        if isinstance(value, bytes | bytearray):
            value = bytes(value).decode(errors="replace")
        if isinstance(value, str):
            for match in _URL.finditer(value):
                for password in _passwords_of(match["rest"]):
                    found.update(p for p in (password, unquote(password)) if p)
        elif isinstance(value, Mapping):
            todo += [*value.keys(), *value.values()]
        elif isinstance(value, list | tuple | set | frozenset):
            todo += list(value)
    return found


def scan_needles(secrets: Iterable[str] = (), *, task_args: Iterable[Any] = ()) -> set[str]:
    """What to look for: ``secrets`` and the URL passwords of ``task_args`` (each a
    task's args or kwargs). Raises ``ValueError`` for a needle too short to scan for."""
    needles = set(secrets) | url_passwords(*task_args)
    short = sorted(n for n in needles if len(n) < MIN_NEEDLE)
    if short:
        raise ValueError(
            f"{len(short)} secret(s) shorter than {MIN_NEEDLE} characters: use longer ones"
        )
    return needles


def leaks(sources: Mapping[str, str], needles: Iterable[str]) -> list[str]:
    """``"<where>: <n> occurrence(s) of secret #<i>"`` for each needle found in each
    source (the secret itself is not repeated); empty when nothing leaked."""
    found = []
    for i, needle in enumerate(sorted(needles)):
        for where, text in sources.items():
            if hits := text.count(needle):
                found.append(f"{where}: {hits} occurrence(s) of secret #{i}")
    return found


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
