"""Least-privilege Redis ACL users, generated from the code that talks to Redis.

Two users (``captcha-tasks acl`` prints them; ``deploy/users.acl`` is its output):

``worker``
    Workers, Flower, and the applications that enqueue tasks and read their results.
    Exactly the commands of the Lua scripts (``lua/*.lua``, parsed), of redis-py's lock
    scripts (parsed) and of the Python code (:data:`PYTHON_COMMANDS`), and those kombu's
    broker and Celery's result backend send (:data:`KOMBU_COMMANDS`,
    :data:`BACKEND_COMMANDS`); keys under the prefix of :class:`~.keys.Keys` and
    kombu's and Celery's own names; the pub/sub channels of task events, remote
    control and results.
``monitor``
    ``captcha-tasks status``, ``watch`` and ``check``, and a scrape's reads: read
    commands only, and ``TIME`` (:data:`MONITOR_COMMANDS`), on the keys
    :data:`MONITOR_READS` names (built from :class:`~.keys.Keys`), the queues'
    lengths, and a subscription to task
    events. It cannot write, run a script, publish (so no remote control: ``status``
    lists workers by their heartbeats instead of a ping), or read job records,
    cookies, results or queued messages.

Redis checks the commands a script runs, and the keys they touch, against the caller's
ACL (6.2 as 7.x), so the scripts' own commands are granted one by one. Redis 6.2 has no
per-command key patterns: a user's patterns apply to all its commands, which is why the
monitor gets no write command at all. AUTH always passes; HELLO carries redis-py's AUTH.
"""

from __future__ import annotations

import fnmatch
import hashlib
import inspect
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib.resources import files

from redis.lock import Lock

from .keys import Keys

__all__ = [
    "BACKEND_COMMANDS",
    "KOMBU_COMMANDS",
    "MONITOR_COMMANDS",
    "MONITOR_EXCLUDED",
    "MONITOR_READS",
    "PYTHON_COMMANDS",
    "AclUser",
    "lua_commands",
    "monitor_user",
    "render",
    "worker_user",
]

#: Every connection: RESP3 handshake (carries AUTH), health checks, ``/N`` of a URL.
CONNECTION_COMMANDS = ("hello", "ping", "select")
#: Scripts run by SHA, loaded on NOSCRIPT (redis-py checks with SCRIPT EXISTS in pipelines).
SCRIPTING_COMMANDS = ("evalsha", "script|load", "script|exists")
#: ``pipeline(transaction=True)`` and redis-py's / kombu's WATCH transactions.
TRANSACTION_COMMANDS = ("multi", "exec", "discard", "watch", "unwatch")
#: The Python code's own commands on shared state (engine, session, fleet, monitor),
#: beside the scripts'. A unit test finds every redis-py call in the package in this set.
PYTHON_COMMANDS = (
    "blpop",
    "del",
    "exists",
    "expire",
    "get",
    "hget",
    "hgetall",
    "hkeys",
    "hlen",
    "hmget",
    "hset",
    "llen",
    "lpush",
    "lrange",
    "ltrim",
    "mget",
    "pexpire",
    "pttl",
    "scan",
    "set",
    "time",
    "zadd",
    "zcard",
    "zcount",
    # Whether this Redis has what one reader needs (engine/reader.py): Redis 6.2.
    "zmscore",
    "zrange",
    "zrangebyscore",
    "zrem",
    # A submit's mark waits for a replica (Sentinel: engine/queue.py, state/scripts.py).
    "wait",
)
#: kombu's Redis transport: queues (LPUSH / BRPOP / RPOP, one list per priority),
#: binding tables (its REFRESH_BINDING / SWEEP_BINDINGS scripts: SADD, TIME, ZADD,
#: ZRANGEBYSCORE, EXISTS, DEL, ZREM), unacknowledged messages (ZADD / HSET / HGET /
#: HDEL under a lock), fanout (PUBLISH / PSUBSCRIBE) for events and remote control.
KOMBU_COMMANDS = (
    "brpop",
    "rpop",
    "lpush",
    "llen",
    "pexpire",
    "del",
    "exists",
    "sadd",
    "srem",
    "smembers",
    "time",
    "zadd",
    "zrem",
    "zrange",
    "zrangebyscore",
    "hset",
    "hget",
    "hdel",
    "set",
    "get",
    "publish",
    "psubscribe",
    "punsubscribe",
)
#: Celery's Redis result backend: results (our ``store_result.lua``: GET, SET, PUBLISH),
#: ``AsyncResult.get`` (SUBSCRIBE, MGET), ``forget`` (DEL), groups and chords of our
#: tasks (RPUSH / ZADD, LLEN / ZCOUNT, LRANGE / ZRANGE, INCR, SETEX, EXPIRE).
BACKEND_COMMANDS = (
    "get",
    "mget",
    "set",
    "setex",
    "del",
    "expire",
    "incr",
    "rpush",
    "llen",
    "lrange",
    "zadd",
    "zcount",
    "zrange",
    "publish",
    "subscribe",
    "unsubscribe",
)
#: The monitor's commands: reads only, and a subscription to task events (``watch``).
MONITOR_COMMANDS = (
    "hello",
    "ping",
    "select",
    "get",
    "mget",
    "exists",
    "pttl",
    "hget",
    "hgetall",
    "hkeys",
    "hlen",
    "llen",
    "lrange",
    "zcard",
    "zcount",
    "zrange",
    "zrangebyscore",
    "scan",
    "psubscribe",
    "punsubscribe",
    # Redis's clock (state/clock.py): what is live or due is judged by it, not the host's.
    "time",
)

#: :class:`Keys` members the monitor reads (status, check, a scrape).
MONITOR_READS = (
    "waiting",
    "due",
    "due_of",
    "budget",
    "provider_budget",
    "provider_limit",
    "provider_limit_of",
    "breaker",
    "timing",
    "balance",
    "spend",
    "acceptance",
    "acceptance_totals",
    "pools",
    "pool",
    "pool_takes",
    "pool_filling",
    "proxies",
    "proxy_lease",
    "proxy_lease_prefix",
    "proxy_quarantine",
    "proxy_quarantine_prefix",
    "session_lock",
    "heartbeat",
    "heartbeat_prefix",
)
#: :class:`Keys` members the monitor may not read, and why (a test keeps every member
#: in one of the two lists, so a new key is a decision).
MONITOR_EXCLUDED: Mapping[str, str] = {
    "job": "a job record holds a page task's arguments (form fields, cookies)",
    "job_prefix": "as job",
    "wake": "nudges between engines: nothing to show",
    "reader_of": "which engine reads a provider's captchas, a lease between engines",
    "cookies": "session cookies of the sites",
    "visitor_cookies": "as cookies (one visitor's, under the host's cookies key)",
    "page_cookies": "as cookies (one isolated page's, under the host's cookies key)",
    "session_parked": "parked page tasks' messages, arguments included",
    "worker_proxy": "which proxy a worker holds: status reads the lease instead",
    "worker_proxy_prefix": "as worker_proxy",
    "bridge_pending": "the NATS bridge's jobs",
    "bridge_published_prefix": "the NATS bridge's published results",
    "key_refused": "the engine's own pause marks",
    "dev_checkout": "make run's mark of the database its stack keeps to",
    "key_refused_prefix": "as key_refused",
    "key_refused_prefix_of": "as key_refused",
    "balance_check": "the balance check's turn (inside balance:*, read-only anyway)",
    "feedback": "a solve's verdict mark (the job's provider, type and cost): the figures "
    "are in acceptance",
    "mcp_in_flight": "the MCP server's per-agent leases: its own bookkeeping",
    "mcp_spend": "as mcp_in_flight (an agent's spend; the spend keys hold the cluster's)",
}

#: kombu's and Celery's key names (defaults; a test compares them with kombu's and
#: Celery's own): binding tables, unacknowledged messages, results, groups, chords.
KOMBU_KEYS = (
    "_kombu.binding.*",
    "_kombu.binding_permanent.*",
    "_kombu.binding_deadlines",
    "unacked",
    "unacked_index",
    "unacked_mutex",
)
BACKEND_KEYS = ("celery-task-meta-*", "celery-taskset-meta-*", "chord-unlock-*")
#: Queues besides the task queues: each worker's direct queue (``worker_direct``) and
#: remote-control mailbox and reply queues (``<node>.celery.pidbox``,
#: ``<uuid>.reply.celery.pidbox``), event queues (``celeryev.<uuid>``: a worker's gossip,
#: Flower, ``celery events``).
CELERY_QUEUES = ("*.dq2", "*.celery.pidbox", "celeryev.*")
#: kombu keeps priorities 3, 6 and 9 of a queue in ``{queue}\x06\x16{priority}``.
PRIORITY_SUFFIX = "??[369]"


def _secret(user: str, password: str | None) -> str:
    """``user``'s password as an ACL rule gives it (:meth:`AclUser.rule`)."""
    if password is None:
        return f"#<{user}-password-sha256>"
    return f"#{hashlib.sha256(password.encode()).hexdigest()}"


@dataclass(frozen=True)
class AclUser:
    """One ``user`` line: name, commands, key patterns, channel patterns."""

    name: str
    commands: tuple[str, ...]
    keys: tuple[str, ...]
    channels: tuple[str, ...]

    def rule(self, password: str | None = None) -> str:
        """The ACL file line; ``password`` is stored as its SHA-256 (``#<hex>``), and
        without one a placeholder that Redis refuses to load stands in for it."""
        parts = ["user", self.name, "reset", "on", _secret(self.name, password)]
        parts += [f"~{key}" for key in self.keys]
        parts += ["resetchannels", *(f"&{channel}" for channel in self.channels)]
        parts += ["-@all", *(f"+{command}" for command in self.commands)]
        return " ".join(parts)


_CALL = re.compile(r"redis\.p?call\(\s*['\"]([A-Za-z]+)['\"]")


def script_commands(sources: Iterable[str]) -> frozenset[str]:
    """Commands named by ``redis.call('X', ...)`` / ``redis.pcall`` in Lua sources."""
    return frozenset(m.lower() for text in sources for m in _CALL.findall(text))


def lua_commands() -> frozenset[str]:
    """Every command our Lua scripts (``state/lua/*.lua``) call."""
    lua = files(__package__).joinpath("lua")
    return script_commands(
        p.read_text(encoding="utf-8") for p in lua.iterdir() if p.name.endswith(".lua")
    )


def lock_commands() -> frozenset[str]:
    """Commands of redis-py's lock scripts (kombu's unacked mutex is such a lock)."""
    scripts = [getattr(Lock, n) for n in dir(Lock) if n.startswith("LUA_")]
    return script_commands(s for s in scripts if isinstance(s, str))


def _sorted(commands: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(commands)))


def _minimal(patterns: Iterable[str]) -> tuple[str, ...]:
    """Patterns in order, without duplicates or those another pattern covers."""
    unique = list(dict.fromkeys(patterns))
    return tuple(p for p in unique if not any(q != p and fnmatch.fnmatchcase(p, q) for q in unique))


def _queues(names: Sequence[str]) -> list[str]:
    return [glob for name in names for glob in (name, f"{name}{PRIORITY_SUFFIX}")]


def _key_pattern(keys: Keys, member: str) -> str:
    """A glob of every key a :class:`Keys` member names: ``*`` for each argument,
    ``*`` after a prefix."""
    attribute = inspect.getattr_static(Keys, member)
    if isinstance(attribute, property):
        value = str(getattr(keys, member))
    else:
        method = getattr(keys, member)
        required = [
            p for p in inspect.signature(method).parameters.values() if p.default is p.empty
        ]
        value = str(method(*("*" for _ in required)))
    return value + "*" if member.endswith("_prefix") else value


def keys_members() -> tuple[str, ...]:
    """The public members of :class:`Keys` that name keys (not ``prefix`` itself)."""
    return tuple(
        name
        for name, _ in inspect.getmembers(Keys)
        if not name.startswith("_") and name != "prefix"
    )


def _channels(db: int) -> tuple[str, ...]:
    """kombu's fanout channels, ``/{db}.{exchange}[/{routing key}]``: task events (all of
    them: ``watch``, Flower; a worker's gossip: ``worker.*``) and remote control. Redis
    matches a PSUBSCRIBE's pattern literally against these, a PUBLISH's channel as a glob."""
    return (f"/{db}.celeryev/*", f"/{db}.celeryev/worker.*", f"/{db}.celery.pidbox")


def worker_user(
    prefix: str = "ct:", *, db: int = 0, queues: Sequence[str] = ("celery",)
) -> AclUser:
    commands = (
        *CONNECTION_COMMANDS,
        *SCRIPTING_COMMANDS,
        *TRANSACTION_COMMANDS,
        *lua_commands(),
        *lock_commands(),
        *PYTHON_COMMANDS,
        *KOMBU_COMMANDS,
        *BACKEND_COMMANDS,
    )
    keys = _minimal(
        [f"{prefix}*", *_queues(queues), *_queues(CELERY_QUEUES), *KOMBU_KEYS, *BACKEND_KEYS]
    )
    channels = (*_channels(db), "celery-task-meta-*", "celery-taskset-meta-*")
    return AclUser("worker", _sorted(commands), keys, channels)


def monitor_user(
    prefix: str = "ct:", *, db: int = 0, queues: Sequence[str] = ("celery",)
) -> AclUser:
    own = Keys(prefix)
    keys = _minimal([*(_key_pattern(own, m) for m in MONITOR_READS), *_queues(queues), "unacked"])
    return AclUser("monitor", _sorted(MONITOR_COMMANDS), keys, _channels(db)[:1])


#: The administrator: the ``default`` user, with every right (``redis-cli``, backups).
ADMIN_RULE = "user default reset on {secret} ~* &* +@all"


def render(
    prefix: str = "ct:",
    *,
    db: int = 0,
    queues: Sequence[str] = ("celery",),
    passwords: Mapping[str, str] | None = None,
) -> str:
    """The ACL file: ``default`` (the administrator), ``worker`` and ``monitor``.
    ``passwords`` by user name; a missing one is a placeholder the file cannot load with."""
    passwords = passwords or {}
    secret = _secret("default", passwords.get("default"))
    users = (worker_user(prefix, db=db, queues=queues), monitor_user(prefix, db=db, queues=queues))
    # No comments: Redis refuses an ACL file with any line that is not a user.
    lines = [ADMIN_RULE.format(secret=secret), *(u.rule(passwords.get(u.name)) for u in users)]
    return "\n".join(lines) + "\n"
