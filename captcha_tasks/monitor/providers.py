"""Each configured provider's state, read from Redis: what ``status`` shows and the
metrics report at scrape.

Per provider (by its configured name): its protocol, the threads of its budget in
use, its last known balance (and whether it is below ``CAPTCHA_TASKS_BALANCE_FLOOR``)
and its spend over the last hour (:class:`~captcha_tasks.engine.spend.SpendLedger`).
Nothing here is secret: names, protocols and amounts.
"""

from __future__ import annotations

from typing import Any

import redis

from ..engine.balance import read_balance
from ..engine.spend import SpendLedger, total, usd_text
from ..settings import Settings
from ..state.keys import Keys

__all__ = ["provider_states"]


def provider_states(client: redis.Redis, settings: Settings, now: float) -> list[dict[str, Any]]:
    """One dict per provider, amounts as strings (exact decimals; JSON-ready)."""
    keys = Keys(settings.key_prefix)
    ledger = SpendLedger(client, keys)
    floor = settings.balance_floor
    out = []
    for spec in settings.providers():
        in_use = int(client.zcount(keys.provider_budget(spec.name), f"({now}", "+inf"))
        balance = read_balance(client, keys, spec.name)
        spend = ledger.last_hour(spec.name, now)
        out.append({
            "name": spec.name,
            "protocol": spec.protocol,
            "threads_in_use": in_use,
            "threads": spec.threads,
            "balance": None if balance is None or balance.usd is None else str(balance.usd),
            "balance_checked_at": None if balance is None else balance.checked_at,
            "balance_stale": bool(balance and balance.stale),
            "balance_floor": None if floor is None else str(floor),
            "below_floor": bool(balance and balance.below(floor)),
            "spend_last_hour": usd_text(total(spend)),
            "spend_last_hour_by_type": {t: usd_text(usd) for t, (usd, _) in spend.items()},
            "solves_last_hour": sum(n for _, n in spend.values()),
        })  # fmt: skip
    return out
