"""One snapshot of a cluster (``captcha-tasks status``).

Read-only: the thread budget and the solve queues (the sum over the providers, and
a row per provider), Celery's broker queues, token pools, proxy leases, session locks,
the workers that answer a ping (those with a heartbeat when the ping fails, as it does
for the read-only ``monitor`` ACL user), each provider's balance (asked of it now) and its state
in Redis (:mod:`.providers`: threads, breaker, last balance check, spend); a provider's
row shows the balance just asked of it, and a worker's last check only when it did not
answer (workers store one only under a balance floor). Secrets stay
out: proxies are masked, a session lock shows its owner's name and not its token, API
keys and Redis passwords are never printed.
"""

from __future__ import annotations

import decimal
import functools
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

import redis

from ..engine.pool import TokenPool
from ..errors import CaptchaTasksError
from ..fleet.heartbeat import live_workers
from ..provider import make_provider
from ..redaction import mask_secrets
from ..session.locks import SessionLock
from ..session.proxies import ProxyPool
from ..settings import Settings, mask_url
from ..settings.providers import DEFAULT_PROVIDER, ProviderConfig, variable
from ..state import Keys, redis_client, state_redis
from ..state.clock import clock_of
from .providers import provider_states

__all__ = ["breaker_text", "broker_queues", "collect", "render"]

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


_PER_PROVIDER = ("in_use", "expired_leases", "in_flight", "due_now")


def thread_budget(
    client: redis.Redis, keys: Keys, settings: Settings, now: float
) -> dict[str, Any]:
    """The budget of the whole cluster (each count the sum over the providers; ``limit``
    the sum of their configured threads), with one row per provider in ``providers``."""
    specs = settings.providers()
    with client.pipeline(transaction=False) as pipe:
        for spec in specs:
            budget, due = keys.provider_budget(spec.name), keys.due_of(spec.name)
            pipe.zcount(budget, f"({now}", "+inf")  # live leases only
            # Leases past their expiry (a crashed holder's): the next taker reclaims them.
            pipe.zcount(budget, "-inf", now)
            pipe.zcard(due)
            pipe.zcount(due, "-inf", now)
        pipe.zcard(keys.waiting)
        *counts, waiting = pipe.execute()
    rows = []
    for n, spec in enumerate(specs):
        row: dict[str, Any] = {"name": spec.name, "limit": spec.threads}
        row.update(zip(_PER_PROVIDER, (int(c) for c in counts[4 * n : 4 * n + 4]), strict=True))
        rows.append(row)
    out: dict[str, Any] = {
        "in_use": sum(r["in_use"] for r in rows),
        "limit": sum(spec.threads for spec in specs),
    }
    out["expired_leases"] = sum(r["expired_leases"] for r in rows)
    out["waiting"] = int(waiting)  # one queue: a request waits for any provider's thread
    out["in_flight"] = sum(r["in_flight"] for r in rows)
    out["due_now"] = sum(r["due_now"] for r in rows)
    out["providers"] = rows
    return out


def broker_queues(client: redis.Redis, names: list[str]) -> dict[str, Any]:
    """Messages waiting in each Celery queue (all priorities), and those delivered to a
    worker but not acknowledged yet (``reserved``, all queues together).

    Task messages our app publishes are recorded as unacknowledged from the moment they
    are queued (:mod:`captcha_tasks.worker.celery_internals.broker`), so the queued ones
    are taken off kombu's count: exact while the listed queues are the only ones with a
    backlog."""
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


def provider_balance(
    settings: Settings, timeout: float, spec: ProviderConfig | None = None
) -> dict[str, Any]:
    """The balance of ``spec`` (default: the first provider) asked of it now, as a
    string (exact decimals), or ``error`` saying why there is none."""
    spec = spec or settings.providers()[0]
    out: dict[str, Any] = {"name": spec.name, "provider": spec.protocol, "url": _origin(spec.url)}
    if not spec.api_key:
        key = (
            "CAPTCHA_TASKS_API_KEY"
            if spec.name == DEFAULT_PROVIDER
            else variable(spec.name, "API_KEY")
        )
        out["error"] = f"{key} is not set"
        return out
    try:
        client = make_provider(settings, spec, timeout=min(timeout, settings.http_timeout))
        out["balance"] = str(client.balance())
    except CaptchaTasksError as exc:
        out["error"] = mask_secrets(f"{exc.code or type(exc).__name__}: {exc}", (spec.api_key,))
    except Exception as exc:  # a snapshot reports what it cannot read; it does not crash
        out["error"] = mask_secrets(f"{type(exc).__name__}: {exc}", (spec.api_key,))
    return out


def ping_workers(
    app: Any, timeout: float, beats: Callable[[], list[str]] | None = None
) -> dict[str, Any]:
    """Who answers a ping. A ping that fails (a broker that does not answer, or the
    read-only ``monitor`` ACL user, which may not publish a broadcast) falls back to
    ``beats``: the workers whose heartbeat is in Redis."""
    try:
        replies = app.control.ping(timeout=timeout) or []
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        if beats is not None:
            try:
                return {"source": "heartbeat", "names": beats(), "error": None, "ping_error": error}
            except redis.RedisError:
                pass
        return {"source": "ping", "names": [], "error": error}
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

    The slow parts (a worker ping waits ``workers_timeout``, each provider's balance is
    an HTTP call) run beside the Redis reads. ``workers_timeout=0`` skips the ping.
    ``balances`` has one entry per provider; ``balance`` is the first one's (what a
    reader that knows one provider looks at). Raises ``redis.RedisError`` if Redis
    cannot be read."""
    client = state_redis(settings)
    keys = Keys(settings.key_prefix)
    names = list(dict.fromkeys(queues or [app.conf.task_default_queue or "celery"]))
    client.ping()  # fail fast, before a worker ping that would wait for the broker
    specs = settings.providers()
    with ThreadPoolExecutor(max_workers=1 + len(specs), thread_name_prefix="status") as pool:
        balances = [pool.submit(provider_balance, settings, balance_timeout, s) for s in specs]
        beats = functools.partial(live_workers, client, keys)
        workers = (
            pool.submit(ping_workers, app, workers_timeout, beats) if workers_timeout > 0 else None
        )
        now = clock_of(client)()  # leases and polls are due by Redis's clock
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
            "acceptance": acceptance_rows(client, settings, now),
            "acceptance_window_s": settings.acceptance_window,
        }
        report["workers"] = workers.result() if workers is not None else None
        report["balances"] = [balance.result() for balance in balances]
        report["balance"] = report["balances"][0]
    report["providers"] = [
        _with_balance_asked(state, asked, spec, now)
        for state, asked, spec in zip(report["providers"], report["balances"], specs, strict=True)
    ]
    return report


def acceptance_rows(client: redis.Redis, settings: Settings, now: float) -> list[dict[str, Any]]:
    """The sites' verdicts over ``CAPTCHA_TASKS_ACCEPTANCE_WINDOW`` per provider, type
    and (listed) host: accepted, rejected, the acceptance rate and USD per accepted
    token (None where there is none to divide by)."""
    from ..engine.acceptance import AcceptanceBook

    rows = []
    for (provider, kind, host), tally in AcceptanceBook(client, settings).figures(now).items():
        cost = tally.cost_per_accepted
        rows.append(
            {
                "provider": provider,
                "type": kind,
                "host": host or None,
                "accepted": tally.accepted,
                "rejected": tally.rejected,
                "rate": None if tally.rate is None else round(tally.rate, 4),
                "spend": str(tally.spend),
                "cost_per_accepted": None if cost is None else str(round(cost, 6).normalize()),
            }
        )
    return rows


def _with_balance_asked(
    state: dict[str, Any], asked: dict[str, Any], spec: ProviderConfig, now: float
) -> dict[str, Any]:
    """A provider's state with the balance just asked of it, when it answered: the
    stored one is only written by workers that watch a balance floor, so without
    ``CAPTCHA_TASKS_BALANCE_FLOOR`` there is none. ``balance_source`` says which one the
    row shows: ``asked now``, ``last check`` (a worker's), or None (neither)."""
    if "balance" not in asked:
        source = "last check" if state["balance"] is not None else None
        return {**state, "balance_source": source}
    usd = decimal.Decimal(asked["balance"])
    floor = spec.balance_floor
    return {
        **state,
        "balance": asked["balance"],
        "balance_checked_at": round(now, 3),
        "balance_stale": False,
        "below_floor": floor is not None and usd < floor,
        "balance_source": "asked now",
    }


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
        how = "answered ping" if workers["source"] == "ping" else "with a heartbeat (ping failed)"
        lines.append(
            f"workers         {len(names)} {how}" + (f": {', '.join(names)}" if names else "")
        )
    lines += _balance_lines(report.get("balances") or [report["balance"]])
    lines += _provider_lines(report.get("providers", []), report["time"])
    lines += _acceptance_lines(report.get("acceptance", []), report.get("acceptance_window_s"))
    lines += ["", "token pools"]
    lines += _table(
        ["pool", "type", "size", "filling", "target", "soonest expiry", "demand/min", "scope"],
        [
            [
                p["pool_id"],
                p["type"],
                str(p["size"]),
                str(p["filling"]),
                "auto" if p["adaptive"] else str(p["target"]),
                _seconds(p["soonest_expiry_s"]),
                str(p["demand_per_min"]),
                p["scope"],
            ]
            for p in report["token_pools"]
        ],
        "none registered",
    )
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
        [
            [lock["host"], lock["holder"], _seconds(lock["ttl_s"])]
            for lock in report["session_locks"]
        ],
        "none held",
    )
    return "\n".join(lines)


def _balance_lines(balances: list[dict[str, Any]]) -> list[str]:
    """One line per provider (named when there are several), as asked of it now."""
    lines = []
    for n, bal in enumerate(balances):
        label = "balance" if n == 0 else ""
        name = f"{bal['name']}: " if len(balances) > 1 and bal.get("name") else ""
        where = f"{bal['provider']} at {bal['url']}"
        if "balance" in bal:
            lines.append(f"{label:16}{name}{bal['balance']} USD ({where})")
        else:
            lines.append(f"{label:16}{name}unavailable: {bal['error']} ({where})")
    return lines


def _provider_lines(providers: list[dict[str, Any]], now: float) -> list[str]:
    """Each provider: budget in use, breaker, last balance (``below floor``), spend in
    the last hour."""
    headers = ["provider", "protocol", "threads", "breaker", "balance", "spend last hour"]
    rows = [_provider_row(p, now) for p in providers]
    return ["", "providers", *_table(headers, rows, "none configured")]


def _acceptance_lines(rows: list[dict[str, Any]], window: float | None) -> list[str]:
    """Acceptance rate and USD per accepted token per provider and type (and host)."""
    headers = ["provider", "type", "host", "accepted", "rejected", "rate", "USD per accepted"]
    table = [
        [
            r["provider"],
            r["type"],
            r["host"] or "all",
            str(r["accepted"]),
            str(r["rejected"]),
            "-" if r["rate"] is None else f"{100 * r['rate']:.1f}%",
            r["cost_per_accepted"] or "-",
        ]
        for r in rows
    ]
    title = "acceptance" + (f", last {window / 60:g} min" if window else "")
    return ["", title, *_table(headers, table, "no verdicts")]


def breaker_text(breaker: dict[str, Any], now: float) -> str:
    """``closed``, or e.g. ``open until 20:53:00 (42s left): zero balance``."""
    if breaker["state"] == "closed":
        return "closed"
    text = str(breaker["state"])
    until = breaker.get("until")
    if until is not None:
        text += f" until {time.strftime('%H:%M:%S', time.localtime(until))}"
        if until > now:
            text += f" ({_seconds(until - now)} left)"
    return text + (f": {breaker['reason']}" if breaker.get("reason") else "")


def _spend_text(p: dict[str, Any]) -> str:
    """The last hour's spend: ``unknown`` for solves of a type with no price (none
    configured, none reported by the provider), which count as nothing in the sum."""
    solves, unpriced = p["solves_last_hour"], p.get("unpriced_solves_last_hour", 0)
    if not unpriced:
        return f"{p['spend_last_hour']} USD ({solves} solves)"
    if unpriced == solves:
        return f"unknown ({solves} solves, no price)"
    return f"at least {p['spend_last_hour']} USD ({solves} solves, {unpriced} with no price)"


def _provider_row(p: dict[str, Any], now: float) -> list[str]:
    balance = "unknown" if p["balance"] is None else f"{p['balance']} USD"
    if p["balance_stale"]:
        balance += " (stale)"
    if p["below_floor"]:
        balance += f" below floor {p['balance_floor']}"
    spend = _spend_text(p)
    t = p["threads"]
    threads = f"{t['in_use']} / {t['limit']}"
    if t["learned_limit"] is not None and t["learned_limit"] < t["limit"]:
        threads += f" (provider took {t['learned_limit']})"
    return [p["name"], p["protocol"], threads, breaker_text(p["breaker"], now), balance, spend]
