"""Each configured provider's state, read from Redis: what ``status`` shows and the
metrics report at scrape.

Per provider (by its configured name): its protocol, its thread budget (configured
threads, the limit learned from "no free slot" answers, leases in use), its circuit
breaker (``closed`` while its hash is absent), its last known balance (and
whether it is below its balance floor) and its spend over the last hour
(:class:`~captcha_tasks.engine.spend.SpendLedger`). Nothing here is secret: names,
protocols, amounts and the breaker's reason (written without secrets by the engine).
"""

from __future__ import annotations

from typing import Any

import redis

from ..engine.balance import read_balance
from ..engine.spend import SpendLedger, total, usd_text
from ..settings import Settings
from ..settings.providers import ProviderConfig
from ..state.keys import Keys

__all__ = ["BREAKER_OPEN_STATES", "breaker_state", "provider_states"]

#: Breaker states in which a provider takes no ordinary work (``half_open``: one probe).
BREAKER_OPEN_STATES = frozenset({"open", "half_open"})


def _number(raw: object) -> float | None:
    try:
        return float(str(raw)) if raw not in (None, "") else None
    except ValueError:  # not written by the engine: shown as unknown, not a crash
        return None


def _whole(raw: object) -> int | None:
    try:
        return int(str(raw)) if raw not in (None, "") else None
    except ValueError:
        return None


def breaker_state(fields: dict[str, Any]) -> dict[str, Any]:
    """A breaker hash (``Keys.breaker``) as status shows it: ``state`` is ``closed``
    when the hash or its field is missing; the rest as the engine last wrote them."""
    return {
        "state": str(fields.get("state") or "closed"),
        "until": _number(fields.get("until")),
        "reason": str(fields["reason"]) if fields.get("reason") else None,
        "opened_at": _number(fields.get("opened_at")),
    }


def _redis_reads(
    client: redis.Redis, keys: Keys, specs: tuple[ProviderConfig, ...], now: float
) -> list[tuple[int, int | None, dict[str, Any]]]:
    """Per provider, in one round trip: live leases, the learned limit, the breaker."""
    with client.pipeline(transaction=False) as pipe:
        for spec in specs:
            pipe.zcount(keys.provider_budget(spec.name), f"({now}", "+inf")  # live leases
            pipe.get(keys.provider_limit_of(spec.name))
            pipe.hgetall(keys.breaker(spec.name))
        answers = pipe.execute()
    return [
        (int(answers[n]), _whole(answers[n + 1]), breaker_state(answers[n + 2] or {}))
        for n in range(0, len(answers), 3)
    ]


def provider_states(client: redis.Redis, settings: Settings, now: float) -> list[dict[str, Any]]:
    """One dict per provider, amounts as strings (exact decimals; JSON-ready)."""
    keys = Keys(settings.key_prefix)
    ledger = SpendLedger(client, keys)
    specs = settings.providers()
    out = []
    for spec, (in_use, learned, breaker) in zip(
        specs, _redis_reads(client, keys, specs, now), strict=True
    ):
        floor = spec.balance_floor
        balance = read_balance(client, keys, spec.name)
        spend = ledger.last_hour(spec.name, now)
        out.append(
            {
                "name": spec.name,
                "protocol": spec.protocol,
                "threads": {"limit": spec.threads, "learned_limit": learned, "in_use": in_use},
                "threads_in_use": in_use,  # the same as threads["in_use"], one level up
                "breaker": breaker,
                "balance": None if balance is None or balance.usd is None else str(balance.usd),
                "balance_checked_at": None if balance is None else balance.checked_at,
                "balance_stale": bool(balance and balance.stale),
                "balance_floor": None if floor is None else str(floor),
                "below_floor": bool(balance and balance.below(floor)),
                "spend_last_hour": usd_text(total(spend)),
                "spend_last_hour_by_type": {t: usd_text(usd) for t, (usd, _) in spend.items()},
                "solves_last_hour": sum(n for _, n in spend.values()),
                "unpriced_solves_last_hour": sum(
                    n for t, (usd, n) in spend.items() if not usd and t not in dict(spec.prices)
                ),
            }
        )
    return out
