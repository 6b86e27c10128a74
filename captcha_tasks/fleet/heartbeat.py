"""A worker's liveness beat, and the probe that reads it (``captcha-tasks check``).

A consumer bootstep (``worker/heartbeat_step.py``): every ``CAPTCHA_TASKS_HEARTBEAT_INTERVAL``
seconds (default 5) the consumer's own event loop writes ``{p}heartbeat:{worker}``
(JSON: version, pid, time; TTL three intervals) and, when
``CAPTCHA_TASKS_HEARTBEAT_FILE`` names one, that file. Because the beat rides the
consumer's timer, it stops when the loop hangs or the broker connection is lost
(the consumer restarts its steps on reconnect), which is what a probe wants to see;
a thread would keep beating next to a wedged worker.

:func:`probe` is the cheap check: the beat's age and one ``PING`` to the broker.
No remote-control round trip (``inspect ping`` needs every worker's event loop and a
reply queue, and exits 69 when nobody answers in time).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis

from ..settings import Settings
from ..settings.providers import DEFAULT_PROVIDER, key_variable
from ..state import Keys, redis_client, state_redis
from ..state.clock import clock_of, local_time

__all__ = [
    "Beat",
    "ProbeResult",
    "live_workers",
    "probe",
    "read_beats",
    "refused_keys",
    "write_beat_file",
]

log = logging.getLogger(__name__)

#: A beat's key outlives this many intervals (a late beat is not a dead worker).
TTL_INTERVALS = 3


@dataclass(frozen=True)
class Beat:
    worker: str
    version: str
    pid: int
    at: float

    def age(self, now: float | None = None) -> float:
        return max(0.0, (local_time() if now is None else now) - self.at)

    def as_json(self) -> str:
        return json.dumps({**asdict(self), "at": round(self.at, 3)})

    @classmethod
    def from_json(cls, raw: str | bytes) -> Beat:
        data = json.loads(raw)
        return cls(str(data["worker"]), str(data["version"]), int(data["pid"]), float(data["at"]))


def write_beat_file(path: Path, beat: Beat) -> None:
    """Replace ``path`` atomically (a probe never reads half a beat)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".heartbeat-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(beat.as_json())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def read_beats(client: redis.Redis, keys: Keys, worker: str | None = None) -> list[Beat]:
    """The fleet's live beats (one worker's when ``worker`` is given)."""
    if worker is not None:
        names = [keys.heartbeat(worker)]
    else:
        names = sorted(
            str(k) for k in client.scan_iter(match=f"{keys.heartbeat_prefix}*", count=500)
        )
    beats = []
    for raw in client.mget(names) if names else []:
        if raw:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                beats.append(Beat.from_json(raw))
    return beats


def live_workers(client: redis.Redis, keys: Keys) -> list[str]:
    """The workers whose beat has not expired, by name. A beat's key is its liveness
    (its TTL is a few intervals): its value need not parse."""
    prefix = keys.heartbeat_prefix
    names = (
        k.decode() if isinstance(k, bytes) else str(k)
        for k in client.scan_iter(match=f"{prefix}*", count=500)
    )
    return sorted(name[len(prefix) :] for name in names)


def refused_keys(client: redis.Redis, keys: Keys) -> list[tuple[str, str, str]]:
    """``(worker, provider, code)`` of each engine whose key its provider refuses now,
    as the engines' ``key_refused`` marks say (:mod:`captcha_tasks.engine.refusal`:
    ``key_refused:[{provider}:]engine@{worker}[/{provider}]``, renewed while refused)."""
    prefix = keys.key_refused_prefix
    found = []
    for raw in client.scan_iter(match=f"{prefix}*", count=500):
        key = raw.decode() if isinstance(raw, bytes) else str(raw)
        rest = key[len(prefix) :]
        provider, _, engine = rest.partition(":") if ":" in rest.split("@")[0] else ("", "", rest)
        code = client.get(key)
        if code is None:  # expired meanwhile: accepted again, or its engine stopped
            continue
        worker = engine.removeprefix("engine@").split("/")[0]
        shown = code.decode() if isinstance(code, bytes) else str(code)
        found.append((worker, provider or DEFAULT_PROVIDER, shown))
    return sorted(found)


@dataclass
class ProbeResult:
    ok: bool
    broker: str
    beats: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _refusals(client: redis.Redis, settings: Settings, workers: set[str]) -> list[str]:
    """A problem per provider refusing the key of one of ``workers``, naming the
    variable the key is read from (this process's environment: the worker's, when the
    probe runs beside it)."""
    return [
        f"{worker}: provider {provider} refuses its key ({code}); check "
        f"{key_variable(provider, os.environ)}"
        for worker, provider, code in refused_keys(client, Keys(settings.key_prefix))
        if worker in workers
    ]


def _broker_ok(settings: Settings, timeout: float) -> str | None:
    """``None`` when the broker answers ``PING``, else why not (no credentials shown)."""
    try:
        client = redis_client(
            settings, settings.broker_url, timeout=timeout, connect_timeout=timeout, decode=False
        )
        try:
            client.ping()
        finally:
            client.close()
    except (redis.RedisError, OSError) as exc:
        return f"broker unreachable: {type(exc).__name__}"
    return None


def probe(
    settings: Settings,
    *,
    worker: str | None = None,
    path: Path | None = None,
    max_age: float = 30.0,
    timeout: float = 3.0,
) -> ProbeResult:
    """Is this worker (``path``'s or ``worker``'s beat; else any beat) fresh, and does the
    broker answer? Fresh: younger than ``max_age`` seconds."""
    problems: list[str] = []
    broker_problem = _broker_ok(settings, timeout)
    if broker_problem:
        problems.append(broker_problem)
    beats: list[Beat] = []
    refusals: list[str] = []
    now = local_time()
    if path is not None:
        try:
            beats = [Beat.from_json(path.read_text())]
        except FileNotFoundError:
            problems.append(f"no heartbeat file at {path}")
        except (OSError, ValueError, KeyError, TypeError) as exc:
            problems.append(f"unreadable heartbeat file {path}: {exc}")
    elif broker_problem is None or settings.state_url != settings.broker_url:
        try:
            client = state_redis(settings)
            beats = read_beats(client, Keys(settings.key_prefix), worker)
            now = clock_of(client)()  # the beats in Redis are stamped by Redis's clock
            refusals = _refusals(client, settings, {b.worker for b in beats})
        except (redis.RedisError, OSError) as exc:
            problems.append(f"state Redis unreachable: {type(exc).__name__}")
        else:
            if not beats:
                problems.append(f"no heartbeat from {worker}" if worker else "no worker beats")
            problems += refusals
    fresh = [b for b in beats if b.age(now) <= max_age]
    for beat in beats:
        if beat.age(now) > max_age:
            problems.append(f"{beat.worker}: heartbeat {beat.age(now):.1f} s old (> {max_age:g} s)")
    shown = [
        {
            "worker": b.worker,
            "version": b.version,
            "pid": b.pid,
            "age_seconds": round(b.age(now), 2),
        }
        for b in beats
    ]
    ok = broker_problem is None and bool(fresh) and (path is None or len(fresh) == len(beats))
    ok = ok and not refusals
    return ProbeResult(ok, "ok" if broker_problem is None else "unreachable", shown, problems)
