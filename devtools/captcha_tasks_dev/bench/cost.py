"""What one solve costs, beside what a plain Celery no-op task costs in the same run:
worker CPU by stage, Redis commands, Redis CPU, Redis memory per job in flight and
provider HTTP requests per solve. Pure computation over what a run collected; nothing
here does I/O.

The stages are where a worker's CPU time is spent, as the operating system counts it:
its prefork pool's processes (task executions: a solve's admitting execution), its
main thread (Celery's consumer: each message in, its events, its hand-off to the pool
and its ack) and its other threads (the solve engine: Redis scripts, provider calls,
storing results; and the worker's own steps, which are idle between beats). The
engine's result store (``CeleryCompleter``: the result backend and the task event) is
timed inside it and logged when it stops (:data:`STORE_LOG_RE`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "STAGES",
    "STORE_LOG_RE",
    "command_calls",
    "command_usec",
    "cost_figures",
    "noop_figures",
    "redis_cpu_seconds",
    "role_figures",
    "store_cpu",
]

#: CPU figures (``CpuProbe.read``) of a worker's stages, and each one's name in a report.
STAGES = {
    "workers_pool": "pool",
    "workers_consumer": "consumer",
    "workers_threads": "engine",
}

#: The line a worker's engine step logs when it stops: the CPU seconds its result
#: store took over how many outcomes.
STORE_LOG_RE = re.compile(r"result store: ([0-9.]+) s CPU over (\d+) outcomes")

#: Commands shown one by one in a report (the rest are summed).
_TOP_COMMANDS = 12


def command_calls(commandstats: Mapping[str, Any]) -> dict[str, int]:
    """Calls by command from ``INFO commandstats`` (redis-py's parsed dict: the key
    ``cmdstat_<name>``, the value a dict with ``calls``)."""
    out = {}
    for key, value in commandstats.items():
        name = str(key).removeprefix("cmdstat_")
        calls = value.get("calls") if isinstance(value, Mapping) else None
        if calls:
            out[name] = int(calls)
    return out


def command_usec(commandstats: Mapping[str, Any]) -> dict[str, int]:
    """Microseconds Redis spent in each command from ``INFO commandstats`` (``usec``); a
    script's (``evalsha``) includes the commands it ran, which count on their own too."""
    out = {}
    for key, value in commandstats.items():
        usec = value.get("usec") if isinstance(value, Mapping) else None
        if usec:
            out[str(key).removeprefix("cmdstat_")] = int(usec)
    return out


def redis_cpu_seconds(info_cpu: Mapping[str, Any]) -> float:
    """The CPU seconds redis-server's main process has used (``INFO cpu``: system and
    user time), what its one core spends on every client's commands."""
    return float(info_cpu.get("used_cpu_sys", 0.0)) + float(info_cpu.get("used_cpu_user", 0.0))


def role_figures(
    cpu: Mapping[str, float], calls: Mapping[str, Mapping[str, int]], solved: int
) -> dict[str, dict[str, float | None]]:
    """Per Redis role (``cpu`` seconds and ``calls`` by command of each role's server),
    per solve: its commands, its CPU milliseconds and the solves a second one core of it
    would sustain at that cost (a Redis server runs its commands on one core)."""
    out: dict[str, dict[str, float | None]] = {}
    for role, seconds in cpu.items():
        ms = _per(1000 * seconds, solved)
        out[role] = {
            "commands_per_solve": _per(sum(calls.get(role, {}).values()), solved, 1),
            "cpu_ms_per_solve": ms,
            "solves_per_core": round(1000 / ms) if ms else None,
        }
    return out


def store_cpu(logs: Iterable[str]) -> tuple[float, int]:
    """CPU seconds of the engines' result store and the outcomes it stored, summed over
    the workers' logs."""
    seconds, outcomes = 0.0, 0
    for text in logs:
        for found in STORE_LOG_RE.finditer(text):
            seconds += float(found.group(1))
            outcomes += int(found.group(2))
    return seconds, outcomes


def _per(value: float, n: int, digits: int = 3) -> float | None:
    return round(value / n, digits) if n else None


def cost_figures(
    cpu: Mapping[str, float],
    calls: Mapping[str, int],
    stats: Mapping[str, Any],
    solved: int,
    store: tuple[float, int] | None = None,
    *,
    redis_cpu: float | None = None,
    memory: tuple[int, int, int] | None = None,
    usec: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """Per solve (``solved`` of them): worker CPU milliseconds by stage, Redis commands
    and Redis CPU milliseconds (``redis_cpu`` seconds; all clients: the harness's
    ``.delay()`` and result watcher too), and the provider requests the sandbox counted
    (submits and polls). ``memory``: Redis's ``used_memory`` before the solves were
    enqueued, its peak while they ran and how many were enqueued (all at once: every one
    in flight at the peak), read as bytes per job in flight. ``usec``: Redis's time in each
    command (:func:`command_usec`), per solve, the longest first."""
    out: dict[str, Any] = {}
    if usec:
        slowest = sorted(usec.items(), key=lambda kv: -kv[1])[:_TOP_COMMANDS]
        out["redis_usec_by_name"] = {name: _per(n, solved, 1) for name, n in slowest}
    if redis_cpu is not None:
        out["redis_cpu_ms_per_solve"] = _per(1000 * redis_cpu, solved)
    if memory is not None:
        base, peak, jobs = memory
        out["redis_bytes_per_job"] = _per(max(peak - base, 0), jobs, 0)
    for key, stage in STAGES.items():
        out[f"cpu_ms_per_solve_{stage}"] = _per(1000 * cpu.get(key, 0.0), solved)
    if store is not None and store[1]:
        # Measured over every outcome the engines stored (warm-up ones too): per outcome.
        out["cpu_ms_per_solve_result_store"] = round(1000 * store[0] / store[1], 3)
    total = sum(calls.values())
    out["redis_commands_per_solve"] = _per(total, solved, 2)
    top = sorted(calls.items(), key=lambda kv: -kv[1])
    out["redis_commands_by_name"] = {name: _per(n, solved, 2) for name, n in top[:_TOP_COMMANDS]}
    requests = int(stats.get("submitted", 0)) + int(stats.get("polls", 0))
    out["http_requests_per_solve"] = _per(requests, solved)
    return out


def noop_figures(
    cpu: Mapping[str, float],
    calls: Mapping[str, int],
    done: int,
    solve_cpu: float | None,
    redis_cpu: float | None = None,
) -> dict[str, Any]:
    """The no-op task's figures (``done`` of them ran): worker CPU per task, by stage,
    Redis commands per task, and a solve's CPU (``solve_cpu`` seconds) over it."""
    per = _per(cpu.get("workers", 0.0), done, 6)
    out: dict[str, Any] = {
        "noop_tasks": done,
        "worker_cpu_per_noop": per,
        "redis_commands_per_noop": _per(sum(calls.values()), done, 2),
        "redis_cpu_ms_per_noop": _per(1000 * redis_cpu, done) if redis_cpu is not None else None,
        "solve_over_noop_cpu": round(solve_cpu / per, 2) if solve_cpu and per else None,
    }
    for key, stage in STAGES.items():
        out[f"cpu_ms_per_noop_{stage}"] = _per(1000 * cpu.get(key, 0.0), done)
    return out
