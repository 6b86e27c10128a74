"""One snapshot of a cluster (``captcha-tasks status``).

Read-only: the thread budget and the solve queues, Celery's broker queues, token
pools, proxy leases, session locks, the workers that answer a ping and the provider
balance. Secrets stay out: proxies are masked, a session lock shows its owner's name
and not its token, the API key and Redis passwords are never printed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import redis

from ..engine.pool import TokenPool
from ..errors import CaptchaTasksError
from ..provider import make_provider
from ..session.locks import SessionLock
from ..session.proxies import ProxyPool
from ..settings import Settings, mask_url
from ..state import Keys, redis_client, state_redis
from .providers import provider_states

__all__ = ["broker_queues", "collect", "render"]

#: kombu's Redis transport keeps priorities 3, 6 and 9 of a queue in lists named
#: ``{queue}\x06\x16{priority}`` (priority 0 is the queue's own list).
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)
#: kombu's hash of messages delivered to a worker and not yet acknowledged.
_UNACKED = "unacked"
#: Session locks listed at most (a cluster holds a handful; a runaway must not flood).
MAX_LOCKS = 200


def _origin(url: str) -> str:
    """``scheme://host[:port]``: where the provider is, without anything secret."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}" + (f":{parts.port}" if parts.port else "")


def _scrub(text: str, settings: Settings) -> str:
    return text.replace(settings.api_key, "***") if settings.api_key else text


def thread_budget(
    client: redis.Redis, keys: Keys, settings: Settings, now: float
) -> dict[str, Any]:
    with client.pipeline(transaction=False) as pipe:
        budget = keys.provider_budget(settings.providers()[0].name)  # one until issue 15
        pipe.zcount(budget, f"({now}", "+inf")  # live leases only
        pipe.zcount(budget, "-inf", now)
        pipe.zcard(keys.waiting)
        pipe.zcard(keys.due)
        pipe.zcount(keys.due, "-inf", now)
        in_use, expired, waiting, in_flight, due = pipe.execute()
    return {
        "in_use": int(in_use),
        "limit": settings.threads,
        # Leases past their expiry (a crashed holder's): the next taker reclaims them.
        "expired_leases": int(expired),
        "waiting": int(waiting),
        "in_flight": int(in_flight),
        "due_now": int(due),
    }


def broker_queues(client: redis.Redis, names: list[str]) -> dict[str, Any]:
    """Messages waiting in each Celery queue (all priorities), and those delivered to a
    worker but not acknowledged yet (``reserved``, all queues together).

    Task messages our app publishes are recorded as unacknowledged from the moment they
    are queued (:mod:`captcha_tasks.worker.broker`), so the queued ones are taken off kombu's
    count: exact while the listed queues are the only ones with a backlog."""
    with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.llen(name)
            for step in _PRIORITY_STEPS:
                pipe.llen(f"{name}{_PRIORITY_SEP}{step}")
        pipe.hlen(_UNACKED)
        answers = pipe.execute()
    per = 1 + len(_PRIORITY_STEPS)
    queues = {name: sum(answers[n * per : n * per + per]) for n, name in enumerate(names)}
    return {"queues": queues, "reserved": max(0, int(answers[-1]) - sum(queues.values()))}


def session_locks(client: redis.Redis, keys: Keys, settings: Settings) -> list[dict[str, Any]]:
    prefix = keys.session_lock("")
    locks = []
    for key in client.scan_iter(match=f"{prefix}*", count=500):
        host = str(key)[len(prefix) :]
        try:
            lock = SessionLock(client, settings, host)
        except CaptchaTasksError:  # not a host name we would have written: not ours
            continue
        if lock.key != key:
            continue
        holder, left = lock.holder(), lock.remaining()
        if holder is None:  # released between the scan and the read
            continue
        locks.append({"host": host, "holder": holder, "ttl_s": left})
        if len(locks) >= MAX_LOCKS:
            break
    return sorted(locks, key=lambda lock: lock["host"])


def provider_balance(settings: Settings, timeout: float) -> dict[str, Any]:
    """The balance as a string (exact decimals), or ``error`` saying why there is none."""
    out: dict[str, Any] = {"provider": settings.provider, "url": _origin(settings.solver_url)}
    if not settings.api_key:
        out["error"] = "CAPTCHA_TASKS_API_KEY is not set"
        return out
    try:
        client = make_provider(settings, timeout=min(timeout, settings.http_timeout))
        out["balance"] = str(client.balance())
    except CaptchaTasksError as exc:
        out["error"] = _scrub(f"{exc.code or type(exc).__name__}: {exc}", settings)
    except Exception as exc:  # a snapshot reports what it cannot read; it does not crash
        out["error"] = _scrub(f"{type(exc).__name__}: {exc}", settings)
    return out


def ping_workers(app: Any, timeout: float) -> dict[str, Any]:
    try:
        replies = app.control.ping(timeout=timeout) or []
    except Exception as exc:
        return {"source": "ping", "names": [], "error": f"{type(exc).__name__}: {exc}"}
    names = sorted(name for reply in replies for name in reply)
    return {"source": "ping", "names": names, "timeout_s": timeout}


def _broker_client(settings: Settings, state: redis.Redis) -> redis.Redis:
    if settings.broker_url == settings.state_url:
        return state
    return redis_client(settings, settings.broker_url)


def collect(
    settings: Settings,
    app: Any,
    *,
    queues: list[str] | None = None,
    workers_timeout: float = 1.0,
    balance_timeout: float = 5.0,
) -> dict[str, Any]:
    """The snapshot as plain data (what ``status --json`` prints).

    The two slow parts (a worker ping waits ``workers_timeout``, the balance is an HTTP
    call) run beside the Redis reads. ``workers_timeout=0`` skips the ping.
    Raises ``redis.RedisError`` if Redis cannot be read."""
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    names = list(dict.fromkeys(queues or [app.conf.task_default_queue or "celery"]))
    client.ping()  # fail fast, before a worker ping that would wait for the broker
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="status") as pool:
        balance = pool.submit(provider_balance, settings, balance_timeout)
        workers = pool.submit(ping_workers, app, workers_timeout) if workers_timeout > 0 else None
        now = time.time()
        report: dict[str, Any] = {
            "time": round(now, 3),
            "state_redis": mask_url(settings.state_url),
            "key_prefix": settings.key_prefix,
            "budget": thread_budget(client, keys, settings, now),
            "broker": broker_queues(_broker_client(settings, client), names),
            "token_pools": TokenPool(client, settings).status(),
            "proxies": [view.to_dict() for view in ProxyPool(client, settings).list()],
            "session_locks": session_locks(client, keys, settings),
            "providers": provider_states(client, settings, now),
        }
        report["workers"] = workers.result() if workers is not None else None
        report["balance"] = balance.result()
    return report


def _table(headers: list[str], rows: list[list[str]], empty: str) -> list[str]:
    if not rows:
        return [f"  {empty}"]
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    out = ["  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    for row in rows:
        out.append("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return out


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}s" if value >= 10 else f"{value:.1f}s"


def render(report: dict[str, Any]) -> str:
    """The snapshot as a human-readable page."""
    at = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(report["time"]))
    b = report["budget"]
    broker = report["broker"]
    lines = [
        f"captcha-tasks status   {at}   {report['state_redis']} (keys {report['key_prefix']}*)",
        "",
        f"thread budget   {b['in_use']} / {b['limit']} in use   waiting {b['waiting']}   "
        f"in flight {b['in_flight']} (due now {b['due_now']})   "
        f"expired leases {b['expired_leases']}",
        "celery queues   "
        + "   ".join(f"{name} {n}" for name, n in broker["queues"].items())
        + f"   (reserved by workers: {broker['reserved']})",
    ]
    workers = report["workers"]
    if workers is None:
        lines.append("workers         not asked (--workers-timeout 0)")
    elif workers.get("error"):
        lines.append(f"workers         ping failed: {workers['error']}")
    else:
        names = workers["names"]
        lines.append(f"workers         {len(names)} answered ping"
                     + (f": {', '.join(names)}" if names else ""))  # fmt: skip
    bal = report["balance"]
    where = f"{bal['provider']} at {bal['url']}"
    if "balance" in bal:
        lines.append(f"balance         {bal['balance']} ({where})")
    else:
        lines.append(f"balance         unavailable: {bal['error']} ({where})")

    lines += _provider_lines(report.get("providers", []))
    lines += ["", "token pools"]
    lines += _table(
        ["pool", "type", "size", "filling", "target", "soonest expiry", "demand/min", "scope"],
        [[p["pool_id"], p["type"], str(p["size"]), str(p["filling"]),
          "auto" if p["adaptive"] else str(p["target"]), _seconds(p["soonest_expiry_s"]),
          str(p["demand_per_min"]), p["scope"]] for p in report["token_pools"]],
        "none registered",
    )  # fmt: skip
    lines += ["", "proxies"]
    rows = []
    for p in report["proxies"]:
        state = "ok"
        if p["quarantined"]:
            state = (
                f"quarantined {_seconds(p['quarantine_seconds_left'])}: {p['quarantine_reason']}"
            )
        rows.append([p["id"], p["type"], p["proxy"], p["holder"] or "-", state])
    lines += _table(["id", "type", "proxy", "held by", "state"], rows, "the pool is empty")
    lines += ["", "session locks"]
    lines += _table(
        ["host", "held by", "ttl left"],
        [[lock["host"], lock["holder"], _seconds(lock["ttl_s"])]
         for lock in report["session_locks"]],
        "none held",
    )  # fmt: skip
    return "\n".join(lines)


def _provider_lines(providers: list[dict[str, Any]]) -> list[str]:
    """Each provider: budget in use, balance (``below floor``), spend in the last hour."""
    headers = ["provider", "protocol", "threads", "balance", "spend last hour"]
    rows = [_provider_row(p) for p in providers]
    return ["", "providers", *_table(headers, rows, "none configured")]


def _provider_row(p: dict[str, Any]) -> list[str]:
    balance = "unknown" if p["balance"] is None else f"{p['balance']} USD"
    if p["balance_stale"]:
        balance += " (stale)"
    if p["below_floor"]:
        balance += f" below floor {p['balance_floor']}"
    spend = f"{p['spend_last_hour']} USD ({p['solves_last_hour']} solves)"
    threads = f"{p['threads_in_use']} / {p['threads']}"
    return [p["name"], p["protocol"], threads, balance, spend]
